//! Per-key rate limits of services: each caller (a key, or a client address on a public service) gets the
//! service's `rate_limit_per_minute` at once, refilled evenly over the minute (GCRA, the `governor` crate).
//! Counted per gateway process: with N service replicas behind a load balancer, a caller may get up to N times
//! the limit (docs/serving.md).

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Mutex;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use uuid::Uuid;

/// Callers tracked per limit before idle ones are forgotten.
const RETAIN_ABOVE: usize = 100_000;

/// Who is counted: (service, key id or client address).
type Caller = (Uuid, String);

#[derive(Default)]
pub struct Limits {
    /// One keyed limiter per distinct limit (services that share a limit share a limiter, keyed apart).
    by_limit: Mutex<HashMap<u32, std::sync::Arc<DefaultKeyedRateLimiter<Caller>>>>,
}

impl Limits {
    /// Count one request of `caller` to `service` under `per_minute`; `Err(seconds to wait)` when over.
    pub fn check(&self, service: Uuid, caller: String, per_minute: u32) -> Result<(), u64> {
        let Some(per_minute) = NonZeroU32::new(per_minute) else { return Ok(()) };
        let limiter = {
            let Ok(mut by_limit) = self.by_limit.lock() else { return Ok(()) };
            by_limit
                .entry(per_minute.get())
                .or_insert_with(|| RateLimiter::keyed(Quota::per_minute(per_minute)).into())
                .clone()
        };
        if limiter.len() > RETAIN_ABOVE {
            limiter.retain_recent();
        }
        limiter.check_key(&(service, caller)).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_caller_has_its_own_allowance_per_service() {
        let limits = Limits::default();
        let (s1, s2) = (Uuid::from_u128(1), Uuid::from_u128(2));
        for _ in 0..3 {
            assert!(limits.check(s1, "k1".into(), 3).is_ok());
        }
        let wait = limits.check(s1, "k1".into(), 3).unwrap_err();
        assert!((1..=20).contains(&wait), "{wait}");
        assert!(limits.check(s1, "k2".into(), 3).is_ok(), "another key");
        assert!(limits.check(s2, "k1".into(), 3).is_ok(), "another service");
        assert!(limits.check(s1, "k1".into(), 0).is_ok(), "no limit");
    }
}
