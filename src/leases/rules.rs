//! The rules a lease change is judged by, with no I/O: the handlers read the figures from the store, ask these,
//! and render the answer.

use gpuplane_store::leases::Term;
use gpuplane_store::leases::changes::{InUse, Quotas};

use crate::error::FieldError;

/// Longest hourly lease (a leap year) and monthly term.
pub const MAX_HOURS: i32 = 8784;
pub const MAX_MONTHS: i32 = 36;

/// What an extension adds, `(hours, months)`, to a lease of `term` that runs `hours` or `months` now: hourly
/// leases extend by hours only, monthly ones by months only, and neither past its longest term.
pub fn extension(
    term: Term,
    hours: Option<i32>,
    months: Option<i32>,
    add_hours: Option<i32>,
    add_months: Option<i32>,
) -> Result<(i32, i32), FieldError> {
    // Sums in i64: a request near i32::MAX must not wrap past the cap.
    let total = |current: Option<i32>, add: i32| i64::from(current.unwrap_or(0)) + i64::from(add);
    match (term, add_hours, add_months) {
        (Term::Hourly, Some(h), None) if total(hours, h) <= i64::from(MAX_HOURS) => Ok((h, 0)),
        (Term::Hourly, _, _) => {
            Err(FieldError::new("hours", format!("hourly leases extend by hours; at most {MAX_HOURS} in all")))
        }
        (Term::Monthly, None, Some(m)) if total(months, m) <= i64::from(MAX_MONTHS) => Ok((0, m)),
        (Term::Monthly, _, _) => {
            Err(FieldError::new("months", format!("monthly leases extend by months; at most {MAX_MONTHS} in all")))
        }
    }
}

/// A quota a new lease would exceed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaExceeded {
    /// `max_concurrent_leases` or `max_gpus_per_pool`.
    pub quota: &'static str,
    pub limit: i32,
    /// What the tenant holds now: leases, or GPUs in the pool.
    pub in_use: i64,
    pub message: String,
}

/// Whether a new lease of `gpu_count` GPUs fits the tenant's `quotas`, given what it holds (`in_use`): one more
/// live lease, and its GPUs in the pool (the pool's own limit overrides the tenant's per-pool one).
pub fn check_quotas(quotas: &Quotas, in_use: &InUse, gpu_count: i32) -> Result<(), QuotaExceeded> {
    if let Some(limit) = quotas.max_concurrent_leases
        && in_use.leases + 1 > i64::from(limit)
    {
        return Err(QuotaExceeded {
            quota: "max_concurrent_leases",
            limit,
            in_use: in_use.leases,
            message: format!("quota max_concurrent_leases is {limit}; the tenant holds {} leases", in_use.leases),
        });
    }
    if let Some(limit) = quotas.max_gpus_pool.or(quotas.max_gpus_per_pool)
        && in_use.gpus_in_pool + i64::from(gpu_count) > i64::from(limit)
    {
        return Err(QuotaExceeded {
            quota: "max_gpus_per_pool",
            limit,
            in_use: in_use.gpus_in_pool,
            message: format!(
                "quota max_gpus_per_pool is {limit}; the tenant holds {} GPUs in this pool",
                in_use.gpus_in_pool
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_extension_keeps_to_its_term_and_its_cap() {
        assert_eq!(extension(Term::Hourly, Some(10), None, Some(5), None), Ok((5, 0)));
        assert_eq!(extension(Term::Hourly, Some(MAX_HOURS - 5), None, Some(5), None), Ok((5, 0)));
        assert_eq!(extension(Term::Hourly, Some(MAX_HOURS - 5), None, Some(6), None).unwrap_err().field, "hours");
        assert_eq!(extension(Term::Hourly, Some(10), None, None, Some(1)).unwrap_err().field, "hours");
        assert_eq!(extension(Term::Hourly, Some(10), None, Some(1), Some(1)).unwrap_err().field, "hours");
        // Near i32::MAX: the sum must not wrap under the cap.
        assert_eq!(extension(Term::Hourly, Some(10), None, Some(i32::MAX), None).unwrap_err().field, "hours");
        assert_eq!(extension(Term::Monthly, None, Some(2), None, Some(3)), Ok((0, 3)));
        assert_eq!(extension(Term::Monthly, None, Some(MAX_MONTHS), None, Some(1)).unwrap_err().field, "months");
        assert_eq!(extension(Term::Monthly, None, Some(2), Some(3), None).unwrap_err().field, "months");
    }

    #[test]
    fn quotas_count_one_more_lease_and_its_gpus_in_the_pool() {
        let quotas = |leases, per_pool, pool| Quotas {
            max_concurrent_leases: leases,
            max_gpus_per_pool: per_pool,
            max_gpus_pool: pool,
        };
        let in_use = InUse { leases: 2, gpus_in_pool: 6 };
        assert_eq!(check_quotas(&quotas(None, None, None), &in_use, 1000), Ok(()));
        assert_eq!(check_quotas(&quotas(Some(3), None, None), &in_use, 1), Ok(()));
        let full = check_quotas(&quotas(Some(2), None, None), &in_use, 1).unwrap_err();
        assert_eq!((full.quota, full.limit, full.in_use), ("max_concurrent_leases", 2, 2));
        assert_eq!(check_quotas(&quotas(None, Some(8), None), &in_use, 2), Ok(()));
        let over = check_quotas(&quotas(None, Some(8), None), &in_use, 3).unwrap_err();
        assert_eq!((over.quota, over.limit, over.in_use), ("max_gpus_per_pool", 8, 6));
        // The pool's own limit overrides the tenant's per-pool one, either way.
        assert_eq!(check_quotas(&quotas(None, Some(8), Some(16)), &in_use, 3), Ok(()));
        assert!(check_quotas(&quotas(None, Some(16), Some(8)), &in_use, 3).is_err());
    }
}
