//! NVIDIA driver and CUDA version numbers as agents report them (`525.60.13`, `11.8`): their syntax and their
//! order, the one implementation both the service (`inventory::readiness`) and the agent (`--driver-version`)
//! use. Pure; belongs with the wire protocol.

use std::cmp::Ordering;

/// Most dotted components a version may have (`525.60.13` has 3).
pub const MAX_COMPONENTS: usize = 4;

/// `525.60.13` as numbers; `None` unless 1 to 4 dot-separated components of 1-6 digits each.
pub fn parse_version(text: &str) -> Option<Vec<u32>> {
    let parts: Vec<&str> = text.split('.').collect();
    if parts.len() > MAX_COMPONENTS {
        return None;
    }
    parts
        .iter()
        .map(
            |p| if (1..=6).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()) { p.parse().ok() } else { None },
        )
        .collect()
}

/// Numeric comparison per dotted component, a missing component counting as 0 (`11.8` == `11.8.0`,
/// `525.60.13` > `525.8.2`, `10.0` > `9.2`).
pub fn compare_versions(a: &[u32], b: &[u32]) -> Ordering {
    let len = a.len().max(b.len());
    (0..len)
        .map(|i| a.get(i).copied().unwrap_or(0).cmp(&b.get(i).copied().unwrap_or(0)))
        .find(|o| o.is_ne())
        .unwrap_or(Ordering::Equal)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn v(text: &str) -> Vec<u32> {
        parse_version(text).unwrap()
    }

    #[test]
    fn components_compare_as_numbers_not_text() {
        assert_eq!(compare_versions(&v("525.60.13"), &v("525.8.99")), Ordering::Greater);
        assert_eq!(compare_versions(&v("470.57.02"), &v("525.60.13")), Ordering::Less);
        assert_eq!(compare_versions(&v("11.8"), &v("11.8.0")), Ordering::Equal);
        assert_eq!(compare_versions(&v("12.0"), &v("11.8")), Ordering::Greater);
        assert_eq!(compare_versions(&v("10.0"), &v("9.2")), Ordering::Greater);
        assert_eq!(compare_versions(&v("535"), &v("525.60.13")), Ordering::Greater);
    }

    #[test]
    fn only_dotted_numbers_parse() {
        for bad in ["", "1..2", "a.1", "1.2.3.4.5", "-1", "1.2 ", " 1", "1234567", "1.x"] {
            assert_eq!(parse_version(bad), None, "{bad:?}");
        }
        assert_eq!(parse_version("470.57.02"), Some(vec![470, 57, 2]));
    }

    proptest! {
        #[test]
        fn comparison_is_a_total_order(a in prop::collection::vec(0u32..1000, 1..=4),
                                        b in prop::collection::vec(0u32..1000, 1..=4),
                                        c in prop::collection::vec(0u32..1000, 1..=4)) {
            prop_assert_eq!(compare_versions(&a, &b), compare_versions(&b, &a).reverse());
            if compare_versions(&a, &b).is_le() && compare_versions(&b, &c).is_le() {
                prop_assert!(compare_versions(&a, &c).is_le());
            }
            let mut padded = a.clone();
            padded.resize(4, 0);
            prop_assert_eq!(compare_versions(&a, &padded), Ordering::Equal);
        }

    }
}
