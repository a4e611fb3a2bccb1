//! Wiring: the shared state, the router with its middleware, and the server loop with graceful shutdown.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, Request, header};
use axum::middleware;
use axum::response::IntoResponse;
use metrics_exporter_prometheus::PrometheusHandle;
use sqlx::PgPool;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;
use utoipa_axum::router::OpenApiRouter;
use utoipa_swagger_ui::SwaggerUi;

use crate::auth::TokenKeys;
use crate::config::Settings;
use crate::error::ApiError;
use crate::telemetry::{REQUEST_ID, metrics_handle, track_metrics};

/// Largest request body accepted (413 above it).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// What every handler can reach. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub db: PgPool,
    pub tokens: Arc<TokenKeys>,
    pub settings: Arc<Settings>,
    pub metrics: PrometheusHandle,
    pub agent_gpus: Arc<crate::agents::GpuMapCache>,
    pub auth_limiter: Arc<crate::rate_limit::AuthLimiter>,
}

impl AppState {
    pub fn new(db: PgPool, settings: Settings) -> anyhow::Result<Self> {
        Ok(AppState {
            db,
            tokens: Arc::new(TokenKeys::new(&settings)?),
            auth_limiter: Arc::new(crate::rate_limit::AuthLimiter::new(&settings.rate_limit)),
            settings: Arc::new(settings),
            metrics: metrics_handle(),
            agent_gpus: Arc::default(),
        })
    }
}

/// Every API route, with its OpenAPI description. The router and the document come from this one list.
fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(crate::openapi::base())
        .merge(crate::health::router())
        .merge(crate::auth::routes::router())
        .merge(crate::console::session::router())
        .merge(crate::tenants::router())
        .merge(crate::inventory::router())
        .merge(crate::leases::router())
        .merge(crate::planning::router())
        .merge(crate::agents::router())
        .merge(crate::jobs::router())
        .merge(crate::environments::router())
        .merge(crate::billing::router())
        .merge(crate::webhooks::router())
}

/// The OpenAPI document the server serves at `/openapi.json` (and `gpuplane openapi` prints).
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    let (_, mut api) = api_routes().split_for_parts();
    crate::openapi::complete(&mut api);
    api
}

/// The full application router with middleware, ready to serve.
pub fn build_router(state: AppState) -> Router {
    let (router, mut api) = api_routes().split_for_parts();
    crate::openapi::complete(&mut api);
    router
        .route_layer(middleware::from_fn(track_metrics))
        .merge(crate::console::assets::router())
        .fallback(|| async { ApiError::NotFound("route") })
        .merge(SwaggerUi::new("/docs").url("/openapi.json", api))
        .layer(middleware::from_fn_with_state(state.auth_limiter.clone(), crate::rate_limit::throttle_credentials))
        .with_state(state)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(CatchPanicLayer::custom(|_| {
            ApiError::Internal(anyhow::anyhow!("handler panicked")).into_response()
        }))
        .layer(TraceLayer::new_for_http().make_span_with(|req: &Request<_>| {
            let request_id = req.headers().get(REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("-");
            tracing::info_span!("request", request_id, method = %req.method(), uri = %req.uri(), tenant.id = tracing::field::Empty)
        }))
        // Every response, errors and docs included, is to be taken as the type it declares.
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
}

/// Serve until `shutdown` is cancelled; in-flight requests finish first.
pub async fn run(listener: TcpListener, state: AppState, shutdown: CancellationToken) -> anyhow::Result<()> {
    let router = build_router(state);
    // The peer address feeds the per-client throttling of the credential endpoints.
    axum::serve(listener, router.into_make_service_with_connect_info::<std::net::SocketAddr>())
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await?;
    Ok(())
}

/// Cancel `token` on SIGINT or SIGTERM: one definition for the service and the agent.
pub use gpuplane_agent::signals::cancel_on_signal;

/// Start the background loops (lease expiry and queue, node liveness, telemetry retention, webhook delivery and
/// alert checks, retuning running jobs, idle leases); they stop when
/// `shutdown` is cancelled.
pub fn spawn_background(state: &AppState, shutdown: &CancellationToken) -> Vec<tokio::task::JoinHandle<()>> {
    vec![
        tokio::spawn(crate::leases::lifecycle::run(state.clone(), Duration::from_secs(1), shutdown.clone())),
        tokio::spawn(crate::agents::liveness::run(state.clone(), shutdown.clone())),
        tokio::spawn(crate::billing::metering::run(state.clone(), Duration::from_secs(15), shutdown.clone())),
        tokio::spawn(crate::auth::lifecycle::sweep_expired_credentials(
            state.clone(),
            Duration::from_secs(30),
            shutdown.clone(),
        )),
        tokio::spawn(crate::webhooks::delivery::run(state.clone(), shutdown.clone())),
        tokio::spawn(crate::webhooks::alerts::run(state.clone(), shutdown.clone())),
        tokio::spawn(crate::jobs::retuning::run(state.clone(), shutdown.clone())),
        tokio::spawn(crate::leases::idle::run(state.clone(), shutdown.clone())),
    ]
}
