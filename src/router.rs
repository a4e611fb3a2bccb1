//! The router: every API route listed once (each domain's routes with their OpenAPI descriptions), the document
//! made from the same list, and the middleware around them.

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, Request, header};
use axum::middleware;
use axum::response::IntoResponse;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;
use utoipa_axum::router::OpenApiRouter;
use utoipa_swagger_ui::SwaggerUi;

use crate::error::ApiError;
use crate::state::AppState;
use crate::telemetry::{REQUEST_ID, track_metrics};

/// Largest request body accepted (413 above it).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

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
    crate::extract::install_component_schemas(&api);
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
