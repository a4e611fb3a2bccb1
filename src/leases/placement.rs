//! Pure placement decisions (no I/O): how a multi-node lease divides over nodes. Which GPUs inside a node is
//! decided by the statement that writes the lease (`store::write_lease`).

/// Fewest nodes for `n` GPUs over nodes with the given free counts (largest first): while no single node
/// fits the rest, take the largest free block whole; then take the rest from the smallest block that fits
/// it (best fit). Returns how many to take from each node, or None if they hold too few.
pub fn pack_counts(free: &[i32], n: i32) -> Option<Vec<i32>> {
    let total: i64 = free.iter().map(|&f| f.max(0) as i64).sum();
    if n <= 0 || total < n as i64 {
        return None;
    }
    let mut take = vec![0; free.len()];
    let mut left = n;
    while left > 0 {
        let open = |i: &usize| take[*i] == 0 && free[*i] > 0;
        let best_fit = (0..free.len()).filter(open).filter(|&i| free[i] >= left).min_by_key(|&i| (free[i], i));
        if let Some(i) = best_fit {
            take[i] = left;
            break;
        }
        let largest = (0..free.len()).filter(open).max_by_key(|&i| (free[i], std::cmp::Reverse(i)))?;
        take[largest] = free[largest];
        left -= free[largest];
    }
    Some(take)
}

/// Divide `n` GPUs over nodes with the given free counts (largest first), one per node per round, so the lease
/// touches as many nodes as possible. Returns how many to take from each node, or None if they hold too few.
pub fn spread_counts(free: &[i32], n: i32) -> Option<Vec<i32>> {
    let total: i64 = free.iter().map(|&f| f.max(0) as i64).sum();
    if n <= 0 || total < n as i64 {
        return None;
    }
    let mut take = vec![0; free.len()];
    let mut left = n;
    while left > 0 {
        for (i, &f) in free.iter().enumerate() {
            if left == 0 {
                break;
            }
            if take[i] < f {
                take[i] += 1;
                left -= 1;
            }
        }
    }
    Some(take)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn pack_takes_whole_blocks_then_the_best_fit() {
        assert_eq!(pack_counts(&[8, 8, 4, 4], 12), Some(vec![8, 0, 4, 0]));
        assert_eq!(pack_counts(&[8, 6, 3], 10), Some(vec![8, 0, 2]));
        assert_eq!(pack_counts(&[5, 5, 5], 12), Some(vec![5, 5, 2]));
        assert_eq!(pack_counts(&[2, 2], 5), None);
    }

    #[test]
    fn spread_touches_as_many_nodes_as_it_can() {
        assert_eq!(spread_counts(&[8, 8, 8, 8], 4), Some(vec![1, 1, 1, 1]));
        assert_eq!(spread_counts(&[8, 1, 1], 6), Some(vec![4, 1, 1]));
        assert_eq!(spread_counts(&[2, 2], 5), None);
    }

    proptest! {
        #[test]
        fn pack_takes_exactly_n_within_capacity(free in proptest::collection::vec(1i32..9, 1..20), n in 1i32..80) {
            match pack_counts(&free, n) {
                Some(take) => {
                    prop_assert_eq!(take.iter().sum::<i32>(), n);
                    prop_assert!(take.iter().zip(&free).all(|(t, f)| t <= f));
                    // At most one node is taken partially.
                    prop_assert!(take.iter().zip(&free).filter(|(t, f)| **t > 0 && t < f).count() <= 1);
                }
                None => prop_assert!(free.iter().sum::<i32>() < n),
            }
        }

        #[test]
        fn spread_takes_exactly_n_within_capacity(free in proptest::collection::vec(0i32..9, 1..20), n in 1i32..80) {
            match spread_counts(&free, n) {
                Some(take) => {
                    prop_assert_eq!(take.iter().sum::<i32>(), n);
                    prop_assert!(take.iter().zip(&free).all(|(t, f)| t <= f));
                    // Balanced: no node gets two more than another that still had room.
                    for (i, &ti) in take.iter().enumerate() {
                        for (j, &tj) in take.iter().enumerate() {
                            if tj < free[j] { prop_assert!(ti <= tj + 1, "{:?} {:?} {} {}", take, free, i, j); }
                        }
                    }
                }
                None => prop_assert!(free.iter().sum::<i32>() < n),
            }
        }
    }
}
