//! Retry delays: exponential from 1 s, doubling, capped at 30 s, with full jitter (AWS architecture blog,
//! "Exponential Backoff And Jitter"), so a fleet of agents does not hammer a recovering service in lockstep.
//!
//! A long delay alone would keep an agent away for up to 30 s after the service returns, long enough to be
//! marked unreachable. So while a delay longer than `PROBE_EVERY` runs, the agent probes `/readyz` about
//! every `PROBE_EVERY` (jittered, a request the service answers without touching anything but one `SELECT 1`)
//! and retries at once when it answers: agents return within about a second of the service.

use std::time::Duration;

use rand::Rng;

pub const BASE: Duration = Duration::from_secs(1);
pub const CAP: Duration = Duration::from_secs(30);
/// Probe readiness about this often while waiting out a longer delay.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);

/// When to probe next: `PROBE_EVERY` with +-50 % jitter, `unit` being uniform in `[0, 1)`; `None` when the
/// retry itself comes first.
pub fn next_probe(retry_in: Duration, unit: f64) -> Option<Duration> {
    let probe = PROBE_EVERY.mul_f64(0.5 + unit.clamp(0.0, 1.0));
    (probe < retry_in).then_some(probe)
}

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
    fn long_delays_are_cut_short_by_probes_about_every_second() {
        assert_eq!(next_probe(Duration::from_millis(300), 0.5), None, "a short delay needs no probe");
        assert_eq!(next_probe(CAP, 0.5), Some(PROBE_EVERY));
        assert!(next_probe(CAP, 0.0).unwrap() >= PROBE_EVERY / 2);
        assert!(next_probe(CAP, 0.999).unwrap() <= PROBE_EVERY * 3 / 2);
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
