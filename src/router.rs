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
use utoipa_axum::routes;
use utoipa_swagger_ui::SwaggerUi;

use crate::error::ApiError;
use crate::observability::{REQUEST_ID, track_metrics};
use crate::state::AppState;
use crate::{
    agent_api, auth, billing, console, environments, health, inventory, jobs, leases, planning_api, services, tenants,
    uploads, volumes, webhooks,
};

/// Largest request body accepted (413 above it).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Every API route, each listed once here with its OpenAPI description (the handler's `#[utoipa::path]`), by
/// domain. The router and the document come from this one list.
fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(crate::openapi::base())
        // health
        .routes(routes!(health::get_healthz))
        .routes(routes!(health::get_readyz))
        .routes(routes!(health::get_metrics))
        // auth/routes
        .routes(routes!(auth::routes::create_token))
        .routes(routes!(auth::routes::list_tenant_api_keys, auth::routes::create_tenant_api_key))
        .routes(routes!(auth::routes::revoke_tenant_api_key))
        .routes(routes!(auth::key_lifecycle::rotate_tenant_api_key))
        .routes(routes!(auth::key_lifecycle::list_operator_api_keys, auth::key_lifecycle::create_operator_api_key))
        .routes(routes!(auth::key_lifecycle::revoke_operator_api_key))
        .routes(routes!(auth::key_lifecycle::rotate_operator_api_key))
        .routes(routes!(auth::key_lifecycle::list_audit_events))
        // console/session
        .routes(routes!(
            console::session::create_console_session,
            console::session::get_console_session,
            console::session::delete_console_session
        ))
        // tenants
        .routes(routes!(tenants::get_own_tenant))
        .routes(routes!(tenants::list_tenants, tenants::create_tenant))
        .routes(routes!(tenants::get_tenant, tenants::update_tenant))
        .routes(routes!(tenants::set_tenant_quotas))
        .routes(routes!(tenants::create_api_key_for_tenant))
        // inventory/gpu_models
        .routes(routes!(inventory::gpu_models::list_gpu_models))
        .routes(routes!(inventory::gpu_models::create_gpu_model))
        // inventory/pools
        .routes(routes!(inventory::pools::list_pools))
        .routes(routes!(inventory::pools::get_pool))
        .routes(routes!(inventory::model_cache::list_pool_models))
        .routes(routes!(inventory::pools::create_pool))
        .routes(routes!(inventory::pools::update_pool))
        // inventory/nodes
        .routes(routes!(inventory::nodes::list_nodes, inventory::nodes::create_node))
        .routes(routes!(inventory::nodes::get_fleet))
        .routes(routes!(inventory::nodes::get_node))
        .routes(routes!(inventory::nodes::cordon_node))
        .routes(routes!(inventory::nodes::uncordon_node))
        .routes(routes!(inventory::nodes::drain_node))
        .routes(routes!(inventory::nodes::set_node_maintenance))
        .routes(routes!(inventory::nodes::allow_node_reregistration))
        // leases/routes
        .routes(routes!(leases::routes::list_leases, leases::routes::create_lease))
        .routes(routes!(leases::routes::get_lease, leases::routes::update_lease))
        .routes(routes!(leases::routes::extend_lease))
        .routes(routes!(leases::routes::release_lease))
        .routes(routes!(leases::routes::list_lease_events))
        .routes(routes!(leases::routes::admin_list_leases))
        .routes(routes!(leases::routes::terminate_lease))
        // leases/network
        .routes(routes!(leases::network::get_lease_network))
        // planning_api
        .routes(routes!(planning_api::create_plan))
        .routes(routes!(planning_api::create_mixed_plan))
        .routes(routes!(planning_api::create_advice))
        // agent_api/routes
        .routes(routes!(agent_api::routes::register_agent))
        .routes(routes!(agent_api::routes::post_heartbeat))
        .routes(routes!(agent_api::routes::restore_gpu))
        // agent_api/tokens
        .routes(routes!(agent_api::tokens::list_join_tokens, agent_api::tokens::create_join_token))
        .routes(routes!(agent_api::tokens::revoke_join_token))
        // agent_api/telemetry
        .routes(routes!(agent_api::telemetry::get_lease_telemetry))
        .routes(routes!(agent_api::telemetry::get_node_telemetry))
        .routes(routes!(agent_api::telemetry::get_pool_utilization))
        // agent_api/holds
        .routes(routes!(agent_api::holds::list_liveness_holds))
        .routes(routes!(agent_api::holds::release_liveness_hold))
        // jobs/routes
        .routes(routes!(jobs::routes::list_templates))
        .routes(routes!(jobs::routes::create_template))
        .routes(routes!(jobs::routes::list_lease_jobs, jobs::routes::create_job))
        .routes(routes!(jobs::routes::get_job))
        .routes(routes!(jobs::routes::list_job_steps))
        .routes(routes!(jobs::log_routes::get_job_logs))
        // uploads/routes
        .routes(routes!(uploads::routes::create_upload))
        .routes(routes!(uploads::routes::get_upload))
        .routes(routes!(jobs::routes::cancel_job))
        .routes(routes!(jobs::routes::replan_job))
        // agent_api/assignments and leases' insights, listed where they were when jobs/routes held them, so the
        // document keeps its order
        .routes(routes!(agent_api::assignments::get_assignments))
        .routes(routes!(agent_api::assignments::report_assignment_status))
        .routes(routes!(agent_api::assignments::report_assignment_logs))
        .routes(routes!(agent_api::assignments::get_agent_upload))
        .routes(routes!(leases::routes::get_lease_insights))
        // environments/routes
        .routes(routes!(environments::ssh_keys::list_ssh_keys, environments::ssh_keys::add_ssh_key))
        .routes(routes!(environments::ssh_keys::delete_ssh_key))
        .routes(routes!(
            environments::routes::get_environment,
            environments::routes::start_environment,
            environments::routes::stop_environment
        ))
        .routes(routes!(agent_api::environments::report_environment_status))
        // volumes/routes
        // services/routes
        .routes(routes!(services::routes::list_services))
        .routes(routes!(services::routes::get_service, services::routes::update_service))
        .routes(routes!(services::routes::list_service_keys, services::routes::create_service_key))
        .routes(routes!(services::routes::revoke_service_key))
        .routes(routes!(volumes::routes::list_volumes, volumes::routes::create_volume))
        .routes(routes!(volumes::routes::get_volume, volumes::routes::update_volume, volumes::routes::delete_volume))
        .routes(routes!(volumes::routes::set_pool_storage))
        .routes(routes!(volumes::routes::create_storage_price))
        .routes(routes!(volumes::routes::set_volume_quotas))
        .routes(routes!(volumes::attachments::list_lease_volumes, volumes::attachments::attach_volume))
        .routes(routes!(volumes::attachments::detach_volume))
        // billing/ledger
        .routes(routes!(billing::ledger::create_ledger_entry))
        .routes(routes!(billing::ledger::get_balance))
        .routes(routes!(billing::ledger::list_ledger))
        // billing/export
        .routes(routes!(billing::export::export_usage))
        .routes(routes!(billing::export::admin_export_usage))
        // billing/invoices
        .routes(routes!(billing::invoices::generate_invoices))
        .routes(routes!(billing::invoices::admin_list_invoices))
        .routes(routes!(billing::invoices::issue_invoice))
        .routes(routes!(billing::invoices::pay_invoice))
        .routes(routes!(billing::invoices::list_invoices))
        .routes(routes!(billing::invoices::get_invoice))
        // billing/prices
        .routes(routes!(billing::prices::list_pool_prices, billing::prices::create_pool_price))
        .routes(routes!(billing::prices::set_pool_sla))
        .routes(routes!(billing::prices::get_revenue))
        // webhooks/routes
        .routes(routes!(webhooks::routes::list_webhooks, webhooks::routes::create_webhook))
        .routes(routes!(
            webhooks::routes::get_webhook,
            webhooks::routes::update_webhook,
            webhooks::routes::delete_webhook
        ))
        .routes(routes!(webhooks::routes::list_deliveries))
        .routes(routes!(webhooks::routes::test_webhook))
        .routes(routes!(webhooks::routes::retry_delivery))
        .routes(routes!(webhooks::routes::list_events))
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
