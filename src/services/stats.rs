//! A service's request figures as the gateways count them: per minute, per gateway process, added up in the
//! database (so every service replica's gateway counts, and any replica answers for all). Pure: the buckets of
//! the latency histogram, a minute's counts, and the summary of a window.

use gpuplane_store::services::RequestMinute;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Upper edges of the latency buckets, milliseconds (a last bucket takes the rest).
pub const LATENCY_EDGES_MS: [f64; 15] =
    [1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 30000.0, 60000.0];
pub const BUCKETS: usize = LATENCY_EDGES_MS.len() + 1;

/// One service's counts over one minute (or the sum of several).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Counts {
    pub requests: i64,
    /// Answers 5xx (the replica's, or the gateway's: none ready, unreachable, failed while answering).
    pub errors: i64,
    /// Refused by the gateway for the caller's key or rate limit (401, 429).
    pub refused: i64,
    pub output_tokens: i64,
    /// Requests per latency bucket ([`LATENCY_EDGES_MS`]).
    pub latency: Vec<i64>,
}

impl Counts {
    /// Count one request: its status and its time to the end of its answer.
    pub fn add(&mut self, status: u16, took_ms: f64, output_tokens: u64) {
        if self.latency.len() != BUCKETS {
            self.latency = vec![0; BUCKETS];
        }
        self.requests += 1;
        if status >= 500 {
            self.errors += 1;
        } else if status == 401 || status == 429 {
            self.refused += 1;
        }
        self.output_tokens += i64::try_from(output_tokens).unwrap_or(i64::MAX);
        let bucket = LATENCY_EDGES_MS.iter().position(|edge| took_ms <= *edge).unwrap_or(BUCKETS - 1);
        self.latency[bucket] += 1;
    }

    pub fn merge(&mut self, other: &Counts) {
        if self.latency.len() != BUCKETS {
            self.latency = vec![0; BUCKETS];
        }
        self.requests += other.requests;
        self.errors += other.errors;
        self.refused += other.refused;
        self.output_tokens += other.output_tokens;
        for (mine, theirs) in self.latency.iter_mut().zip(&other.latency) {
            *mine += theirs;
        }
    }
}

impl Counts {
    /// One service's counts of one minute, as the database keeps them.
    pub fn into_minute(self, service_id: uuid::Uuid, minute: chrono::DateTime<chrono::Utc>) -> RequestMinute {
        let Counts { requests, errors, refused, output_tokens, latency } = self;
        RequestMinute { service_id, minute, requests, errors, refused, output_tokens, latency }
    }
}

impl From<RequestMinute> for Counts {
    fn from(m: RequestMinute) -> Self {
        Counts {
            requests: m.requests,
            errors: m.errors,
            refused: m.refused,
            output_tokens: m.output_tokens,
            latency: m.latency,
        }
    }
}

/// A service's requests over a window, as `GET /v1/services/{id}` shows them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RequestStats {
    /// The window, minutes (the last ones, the current one included).
    pub minutes: i64,
    pub requests: i64,
    /// Answers 5xx: the replicas', or the gateway's (no replica ready, none reachable, one failed answering).
    pub errors: i64,
    /// Refused for the key or the rate limit (401, 429).
    pub refused: i64,
    /// Tokens the answers of an OpenAI-compatible service reported.
    pub output_tokens: i64,
    pub requests_per_s: f64,
    pub output_tokens_per_s: f64,
    /// Time to the end of the answer, milliseconds: the upper edge of the histogram bucket the median (99th
    /// percentile) falls in; absent without requests.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

/// The summary of `counts` over `minutes`.
pub fn summarize(counts: &Counts, minutes: i64) -> RequestStats {
    let seconds = (minutes.max(1) * 60) as f64;
    RequestStats {
        minutes,
        requests: counts.requests,
        errors: counts.errors,
        refused: counts.refused,
        output_tokens: counts.output_tokens,
        requests_per_s: counts.requests as f64 / seconds,
        output_tokens_per_s: counts.output_tokens as f64 / seconds,
        p50_ms: quantile(&counts.latency, 0.50),
        p99_ms: quantile(&counts.latency, 0.99),
    }
}

/// The upper edge of the bucket the `q` quantile falls in (the last bucket: its lower edge, "at least").
fn quantile(latency: &[i64], q: f64) -> Option<f64> {
    let total: i64 = latency.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((q * total as f64).ceil() as i64).max(1);
    let mut seen = 0;
    for (i, n) in latency.iter().enumerate() {
        seen += n;
        if seen >= rank {
            return Some(LATENCY_EDGES_MS.get(i).copied().unwrap_or(LATENCY_EDGES_MS[LATENCY_EDGES_MS.len() - 1]));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_and_percentiles_come_from_the_buckets() {
        let mut minute = Counts::default();
        for _ in 0..98 {
            minute.add(200, 3.0, 10);
        }
        minute.add(503, 40.0, 0);
        minute.add(401, 0.5, 0);
        let mut other = Counts::default();
        other.add(429, 70_000.0, 0);
        minute.merge(&other);
        assert_eq!((minute.requests, minute.errors, minute.refused, minute.output_tokens), (101, 1, 2, 980));
        let stats = summarize(&minute, 1);
        assert_eq!(stats.p50_ms, Some(5.0), "3 ms falls in (2.5, 5]");
        assert_eq!(stats.p99_ms, Some(50.0), "the 100th of 101 is the 40 ms one");
        assert!((stats.requests_per_s - 101.0 / 60.0).abs() < 1e-9);
        assert_eq!(summarize(&Counts::default(), 60).p50_ms, None);
        let mut slow = Counts::default();
        slow.add(200, 90_000.0, 0);
        assert_eq!(summarize(&slow, 1).p99_ms, Some(60_000.0), "past the last edge: at least that");
    }
}
