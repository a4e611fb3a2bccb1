//! What every handler and worker can reach: the database pool, the signing keys, the settings, the metrics
//! handle and the process-wide caches. A leaf: it depends on no domain's handlers, so every layer may use it.

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;
use sqlx::PgPool;

use crate::config::Settings;
use crate::jwt::TokenKeys;
use crate::observability::metrics_handle;
use crate::rate_limit::AuthLimiter;

pub mod gpu_map;
pub mod log_wakeups;

use gpu_map::GpuMapCache;
use log_wakeups::LogWakeups;

/// What every handler can reach. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub db: PgPool,
    pub tokens: Arc<TokenKeys>,
    pub settings: Arc<Settings>,
    pub metrics: PrometheusHandle,
    pub agent_gpus: Arc<GpuMapCache>,
    pub auth_limiter: Arc<AuthLimiter>,
    /// Wakes the replica's log followers (`GET /v1/jobs/{id}/logs?follow=true`).
    pub log_wakeups: LogWakeups,
}

impl AppState {
    pub fn new(db: PgPool, settings: Settings) -> anyhow::Result<Self> {
        Ok(AppState {
            db,
            tokens: Arc::new(TokenKeys::new(&settings)?),
            auth_limiter: Arc::new(AuthLimiter::new(&settings.rate_limit)),
            settings: Arc::new(settings),
            metrics: metrics_handle(),
            agent_gpus: Arc::default(),
            log_wakeups: LogWakeups::default(),
        })
    }
}
