//! Per-client-address throttling of the credential endpoints, where every attempt costs a database lookup and
//! a guessing client must be slowed down: `POST /v1/auth/token` and `POST /v1/agent/register`.
//!
//! A keyed GCRA limiter (the `governor` crate): each address gets `burst` attempts at once, refilled at
//! `per_minute`. Over the limit: 429 `rate_limited` problem+json with `Retry-After`. The client address is the
//! TCP peer, or with `--trust-forwarded-for` the last `X-Forwarded-For` entry (the one our proxy appended).

use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::config::RateLimitArgs;
use crate::error::ApiError;

/// The throttled routes (method POST).
pub const THROTTLED_PATHS: &[&str] = &["/v1/auth/token", "/v1/console/session", "/v1/agent/register"];

/// Addresses tracked before idle ones are forgotten.
const RETAIN_ABOVE: usize = 10_000;

pub struct AuthLimiter {
    limiter: DefaultKeyedRateLimiter<IpAddr>,
    trust_forwarded_for: bool,
}

impl AuthLimiter {
    pub fn new(args: &RateLimitArgs) -> Self {
        let per_minute = NonZeroU32::new(args.auth_rate_per_minute).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(args.auth_rate_burst).unwrap_or(NonZeroU32::MIN);
        AuthLimiter {
            limiter: RateLimiter::keyed(Quota::per_minute(per_minute).allow_burst(burst)),
            trust_forwarded_for: args.trust_forwarded_for,
        }
    }

    /// Count one attempt from `addr`; `Err(seconds to wait)` when over the limit.
    pub fn check(&self, addr: IpAddr) -> Result<(), u64> {
        if self.limiter.len() > RETAIN_ABOVE {
            self.limiter.retain_recent();
        }
        self.limiter.check_key(&addr).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
        })
    }

    /// The address to count `req` against. None when the server has no peer address (the router driven
    /// in-process, as tests do); `axum::serve` in [`crate::app::run`] always provides it.
    fn client_addr(&self, req: &Request) -> Option<IpAddr> {
        if self.trust_forwarded_for
            && let Some(forwarded) = req.headers().get("x-forwarded-for").and_then(|v| v.to_str().ok())
            && let Some(last) = forwarded.rsplit(',').next()
            && let Ok(addr) = last.trim().parse::<IpAddr>()
        {
            return Some(addr);
        }
        req.extensions().get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(addr)| addr.ip())
    }
}

/// Middleware: throttle the credential endpoints, pass everything else through.
pub async fn throttle_credentials(State(limiter): State<Arc<AuthLimiter>>, req: Request, next: Next) -> Response {
    if req.method() == Method::POST
        && THROTTLED_PATHS.contains(&req.uri().path())
        && let Some(addr) = limiter.client_addr(&req)
        && let Err(retry_after_secs) = limiter.check(addr)
    {
        tracing::warn!(client = %addr, path = req.uri().path(), "credential endpoint rate limit hit");
        return ApiError::TooManyRequests { retry_after_secs }.into_response();
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_refused_per_address() {
        let limiter =
            AuthLimiter::new(&RateLimitArgs { auth_rate_per_minute: 1, auth_rate_burst: 3, ..Default::default() });
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        for _ in 0..3 {
            assert!(limiter.check(a).is_ok());
        }
        let wait = limiter.check(a).unwrap_err();
        assert!((1..=60).contains(&wait), "{wait}");
        assert!(limiter.check(b).is_ok(), "another address has its own budget");
    }
}
