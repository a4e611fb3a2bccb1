//! Retry delays: exponential from 1 s, doubling, capped at 30 s, with full jitter (AWS architecture blog,
//! "Exponential Backoff And Jitter"), so a fleet of agents does not hammer a recovering service in lockstep.

use std::time::Duration;

use rand::Rng;

pub const BASE: Duration = Duration::from_secs(1);
pub const CAP: Duration = Duration::from_secs(30);

/// Consecutive failures, turned into the next delay.
#[derive(Debug, Default)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    /// The delay before the next attempt, after one more failure.
    pub fn next_delay(&mut self, rng: &mut impl Rng) -> Duration {
        let ceiling = ceiling(self.failures);
        self.failures = self.failures.saturating_add(1);
        jittered(ceiling, rng.random())
    }

    pub fn reset(&mut self) {
        self.failures = 0;
    }

    pub fn failures(&self) -> u32 {
        self.failures
    }
}

/// The longest delay after `failures` earlier failures: 1 s, 2 s, 4 s, ... 30 s.
pub fn ceiling(failures: u32) -> Duration {
    BASE.saturating_mul(2u32.saturating_pow(failures)).min(CAP)
}

/// Full jitter: uniform in `[0, ceiling]`, `unit` being uniform in `[0, 1)`.
pub fn jittered(ceiling: Duration, unit: f64) -> Duration {
    ceiling.mul_f64(unit.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    #[test]
    fn doubles_from_one_second_and_caps_at_thirty() {
        let ceilings: Vec<u64> = (0..8).map(|f| ceiling(f).as_secs()).collect();
        assert_eq!(ceilings, vec![1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(ceiling(u32::MAX), CAP);
    }

    #[test]
    fn jitter_stays_within_the_ceiling() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut backoff = Backoff::default();
        for attempt in 0..1000u32 {
            let delay = backoff.next_delay(&mut rng);
            assert!(delay <= ceiling(attempt), "attempt {attempt}: {delay:?}");
        }
        assert_eq!(jittered(CAP, 0.0), Duration::ZERO);
        assert_eq!(jittered(CAP, 1.0), CAP);
        backoff.reset();
        assert_eq!(backoff.failures(), 0);
        assert!(backoff.next_delay(&mut rng) <= BASE);
    }
}
