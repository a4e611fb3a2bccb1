//! Pure placement decisions (no I/O): how a multi-node lease divides over nodes, as multi-node allocation
//! plans it. Which GPUs inside a node is decided by the statement that writes the lease
//! (`allocation::write_lease`).

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
