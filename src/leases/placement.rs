//! Pure placement decisions (no I/O): how a multi-node lease divides over nodes. Which GPUs inside a node is
//! decided by the statement that writes the lease (`store::write_lease`). Multi-node allocation plans with them in
//! the store, where they are defined.

pub use gpuplane_store::leases::placement::{pack_counts, spread_counts};

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
