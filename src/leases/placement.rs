//! Pure placement decisions (no I/O): which GPUs inside a node, and how a `spread` lease divides over nodes.

/// Choose `k` of a node's free GPU indices so that they sit as close together as possible: adjacent indices
/// share a PCIe switch or NVLink pair on common boards, so the smallest index span is the best guess when the
/// node reports no finer topology. Ties go to the lowest indices, keeping the high end free in one block.
pub fn pick_compact(free_indices: &[i32], k: usize) -> Option<Vec<i32>> {
    if k == 0 || free_indices.len() < k {
        return None;
    }
    let mut sorted = free_indices.to_vec();
    sorted.sort_unstable();
    let best = (0..=sorted.len() - k).min_by_key(|&start| (sorted[start + k - 1] - sorted[start], start))?;
    Some(sorted[best..best + k].to_vec())
}

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
    fn compact_prefers_the_tightest_window() {
        assert_eq!(pick_compact(&[0, 3, 4, 5, 7], 3), Some(vec![3, 4, 5]));
        assert_eq!(pick_compact(&[0, 1, 2, 3], 2), Some(vec![0, 1]));
        assert_eq!(pick_compact(&[6, 7, 0, 2], 2), Some(vec![6, 7]));
        assert_eq!(pick_compact(&[1, 2], 3), None);
        assert_eq!(pick_compact(&[1, 2], 0), None);
    }

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
        fn compact_returns_k_distinct_free_indices(free in proptest::collection::btree_set(0i32..64, 0..64), k in 1usize..16) {
            let free: Vec<i32> = free.into_iter().collect();
            match pick_compact(&free, k) {
                Some(picked) => {
                    prop_assert_eq!(picked.len(), k);
                    prop_assert!(picked.iter().all(|i| free.contains(i)));
                    prop_assert!(picked.windows(2).all(|w| w[0] < w[1]));
                }
                None => prop_assert!(free.len() < k),
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
