//! `/v1/webhooks` (endpoints, their deliveries, test sends, manual retries) and `/v1/events`.
//!
//! Tenant administrators manage their tenant's endpoints and receive tenant events; operators manage operator
//! endpoints and receive fleet events. Every query is scoped to the caller's audience, so another tenant's
//! endpoint, delivery or event is a 404.

use axum::Json;
use axum::extract::{FromRequestParts, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use gpuplane_store::webhooks as store;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::{Audience, signing, ssrf};
use crate::auth::{Principal, Role};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{ApiJson, ApiPath, ApiQuery, Page, PageParams, check_text, new_id};
use crate::secrets::Context;
use crate::secrets::{NO_STORE, NoStore};
use crate::state::AppState;

crate::page_schema!(WebhookEndpointPage, WebhookEndpoint);
crate::page_schema!(WebhookDeliveryPage, WebhookDelivery);
crate::page_schema!(WebhookEventPage, WebhookEvent);

/// Event type patterns: `*`, a prefix wildcard such as `lease.*`, or one type such as `lease.ended`.
pub const EVENT_TYPE_PATTERN: &str = r"^(\*|[a-z][a-z_]{0,39}(\.[a-z][a-z_]{0,39}){0,3}(\.\*)?)$";
/// Most event type patterns per endpoint.
pub const MAX_EVENT_TYPES: usize = 50;
/// Most endpoints per tenant (or for the operators).
pub const MAX_ENDPOINTS: i64 = 50;

/// An event type pattern, in the OpenAPI document: `*`, `lease.*`, `lease.ended` ...
pub struct EventTypePattern;

impl utoipa::PartialSchema for EventTypePattern {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .pattern(Some(EVENT_TYPE_PATTERN))
            .max_length(Some(170))
            .description(Some("`*`, a prefix wildcard such as `lease.*`, or one event type such as `lease.ended`"))
            .into()
    }
}

impl utoipa::ToSchema for EventTypePattern {}

/// Who manages endpoints here: a tenant administrator (tenant events) or an operator (fleet events).
pub struct WebhookOwner(pub Audience);

impl FromRequestParts<AppState> for WebhookOwner {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let p = Principal::from_request_parts(parts, state).await?;
        match (p.role, p.tenant_id) {
            (Role::Operator, _) => Ok(WebhookOwner(Audience::Operators)),
            (Role::TenantAdmin, Some(tenant_id)) => Ok(WebhookOwner(Audience::Tenant(tenant_id))),
            _ => Err(ApiError::forbidden("webhooks are managed by tenant admins (tenant events) or operators")),
        }
    }
}

/// A new endpoint, with its signing secret: the only time the secret is shown.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CreatedWebhookEndpoint {
    #[serde(flatten)]
    pub endpoint: WebhookEndpoint,
    /// `whsec_` and the base64 of 32 random bytes: the HMAC-SHA256 key of the `webhook-signature` header
    /// (Standard Webhooks). Store it now: it is not shown again.
    pub secret: String,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"url": "https://hooks.example.com/gpuplane", "event_types": ["lease.*", "job.failed"], "description": "on-call"}))]
pub struct CreateWebhookRequest {
    /// An https URL whose host resolves only to public addresses (plain http and private addresses only when the
    /// service runs with `--webhook-allow-private`). No credentials, no fragment.
    #[schema(min_length = 1, max_length = 2048, pattern = "^[hH][tT][tT][pP][sS]?://[^\\s]+$")]
    pub url: String,
    /// 1-50 event type patterns: `*`, `lease.*`, `lease.ended` ...
    #[schema(min_items = 1, max_items = 50, value_type = Vec<EventTypePattern>)]
    pub event_types: Vec<String>,
    /// At most 500 characters.
    #[schema(max_length = 500)]
    pub description: Option<String>,
    /// Default true.
    pub enabled: Option<bool>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateWebhookRequest {
    /// As at creation.
    #[schema(min_length = 1, max_length = 2048, pattern = "^[hH][tT][tT][pP][sS]?://[^\\s]+$")]
    pub url: Option<String>,
    #[schema(min_items = 1, max_items = 50, value_type = Option<Vec<EventTypePattern>>)]
    pub event_types: Option<Vec<String>>,
    #[schema(max_length = 500)]
    pub description: Option<String>,
    /// Enabling an endpoint clears its failure history and the reason it was disabled.
    pub enabled: Option<bool>,
}

pub use gpuplane_store::webhooks::{DeliveryState, WebhookAttempt, WebhookDelivery, WebhookEndpoint, WebhookEvent};

/// Validate the event type patterns (`event_types`).
fn check_event_types(types: &[String], errors: &mut Vec<FieldError>) {
    if types.is_empty() || types.len() > MAX_EVENT_TYPES {
        errors.push(FieldError::new("event_types", format!("give 1-{MAX_EVENT_TYPES} event type patterns")));
    }
    let valid = |t: &str| {
        if t == "*" {
            return true;
        }
        let body = t.strip_suffix(".*").unwrap_or(t);
        let parts: Vec<&str> = body.split('.').collect();
        parts.len() <= 4
            && parts.iter().all(|p| {
                (1..=40).contains(&p.len())
                    && p.starts_with(|c: char| c.is_ascii_lowercase())
                    && p.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            })
    };
    for (i, t) in types.iter().enumerate() {
        if !valid(t) {
            errors.push(FieldError::new(
                format!("event_types[{i}]"),
                "an event type (`lease.ended`), a prefix wildcard (`lease.*`) or `*`",
            ));
        }
    }
}

fn check_description(description: &str, errors: &mut Vec<FieldError>) {
    if description.chars().count() > 500 {
        errors.push(FieldError::new("description", "at most 500 characters"));
    } else if let Err(e) = check_text("description", description) {
        errors.push(e);
    }
}

/// Check a URL against the form rules and the SSRF guard.
async fn check_url(state: &AppState, url: &str, errors: &mut Vec<FieldError>) {
    if let Err(e) = ssrf::vet(url, state.settings.webhooks.allow_private).await {
        errors.push(FieldError::new("url", e));
    }
}

async fn load_endpoint(
    conn: &mut sqlx::PgConnection,
    audience: Audience,
    id: Uuid,
) -> Result<WebhookEndpoint, ApiError> {
    store::load_endpoint(conn, audience.tenant_id(), id).await?.ok_or(ApiError::NotFound("webhook endpoint"))
}

/// The caller's endpoints.
#[utoipa::path(
    get, path = "/v1/webhooks", tag = "webhooks", operation_id = "list_webhooks",
    params(PageParams),
    responses((status = 200, description = "A page of the caller's webhook endpoints", body = WebhookEndpointPage))
)]
pub async fn list_webhooks(
    State(state): State<AppState>,
    WebhookOwner(audience): WebhookOwner,
    ApiQuery(page): ApiQuery<PageParams>,
) -> ApiResult<Json<Page<WebhookEndpoint>>> {
    let limit = page.fetch_limit()?;
    let mut conn = state.db.acquire().await?;
    let rows = store::list_endpoints(&mut conn, audience.tenant_id(), page.after(), limit).await?;
    Ok(Json(Page::from_rows(rows, limit, |e: &WebhookEndpoint| e.id)))
}

/// Create an endpoint (tenant admin: tenant events; operator: fleet events). The secret is in this response
/// only.
#[utoipa::path(
    post, path = "/v1/webhooks", tag = "webhooks", operation_id = "create_webhook",
    request_body = CreateWebhookRequest,
    responses(
        (status = 201, description = "The endpoint and its signing secret (shown once)", body = CreatedWebhookEndpoint),
        (status = 409, description = "The caller has 50 endpoints already (`too_many_webhooks`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_webhook(
    State(state): State<AppState>,
    WebhookOwner(audience): WebhookOwner,
    ApiJson(req): ApiJson<CreateWebhookRequest>,
) -> ApiResult<(StatusCode, NoStore, Json<CreatedWebhookEndpoint>)> {
    let mut errors = Vec::new();
    let description = req.description.unwrap_or_default();
    check_event_types(&req.event_types, &mut errors);
    check_description(&description, &mut errors);
    check_url(&state, &req.url, &mut errors).await;
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let secret = signing::new_secret();
    let mut tx = state.db.begin().await?;
    // Serialize creations per audience so the limit holds under concurrency.
    store::lock_audience(&mut tx, audience.tenant_id()).await?;
    let count = store::count_endpoints(&mut tx, audience.tenant_id()).await?;
    if count >= MAX_ENDPOINTS {
        return Err(ApiError::conflict("too_many_webhooks", format!("at most {MAX_ENDPOINTS} webhook endpoints")));
    }
    let id = new_id();
    // Stored sealed: the service must sign with it, but a dump of the database must not give it away.
    let sealed = state.settings.keyring.seal(Context::WebhookSecret { endpoint_id: id }, secret.as_bytes());
    let new = store::NewEndpoint {
        id,
        tenant_id: audience.tenant_id(),
        url: &req.url,
        event_types: &req.event_types,
        description: &description,
        enabled: req.enabled.unwrap_or(true),
        secret_key_id: &sealed.key_id,
        secret_sealed: &sealed.bytes,
    };
    let endpoint = store::insert_endpoint(&mut tx, &new).await?;
    tx.commit().await?;
    tracing::info!(endpoint.id = %endpoint.id, ?audience, "webhook endpoint created");
    Ok((StatusCode::CREATED, NO_STORE, Json(CreatedWebhookEndpoint { endpoint, secret })))
}

/// One of the caller's endpoints.
#[utoipa::path(
    get, path = "/v1/webhooks/{webhook_id}", tag = "webhooks", operation_id = "get_webhook",
    params(("webhook_id" = Uuid, Path, description = "Endpoint id")),
    responses((status = 200, description = "The endpoint (without its secret)", body = WebhookEndpoint))
)]
pub async fn get_webhook(
    State(state): State<AppState>,
    WebhookOwner(audience): WebhookOwner,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<WebhookEndpoint>> {
    let mut conn = state.db.acquire().await?;
    Ok(Json(load_endpoint(&mut conn, audience, id).await?))
}

/// Change an endpoint: its URL, event types, description, or whether it is enabled.
#[utoipa::path(
    patch, path = "/v1/webhooks/{webhook_id}", tag = "webhooks", operation_id = "update_webhook",
    params(("webhook_id" = Uuid, Path, description = "Endpoint id")),
    request_body = UpdateWebhookRequest,
    responses((status = 200, description = "The endpoint as it is now", body = WebhookEndpoint))
)]
pub async fn update_webhook(
    State(state): State<AppState>,
    WebhookOwner(audience): WebhookOwner,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(req): ApiJson<UpdateWebhookRequest>,
) -> ApiResult<Json<WebhookEndpoint>> {
    let mut errors = Vec::new();
    if let Some(types) = &req.event_types {
        check_event_types(types, &mut errors);
    }
    if let Some(description) = &req.description {
        check_description(description, &mut errors);
    }
    if let Some(url) = &req.url {
        check_url(&state, url, &mut errors).await;
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let change = store::EndpointChange {
        url: req.url.as_deref(),
        event_types: req.event_types.as_deref(),
        description: req.description.as_deref(),
        enabled: req.enabled,
    };
    let mut conn = state.db.acquire().await?;
    let updated = store::update_endpoint(&mut conn, audience.tenant_id(), id, &change).await?;
    Ok(Json(updated.ok_or(ApiError::NotFound("webhook endpoint"))?))
}

/// Delete an endpoint and its delivery log.
#[utoipa::path(
    delete, path = "/v1/webhooks/{webhook_id}", tag = "webhooks", operation_id = "delete_webhook",
    params(("webhook_id" = Uuid, Path, description = "Endpoint id")),
    responses((status = 204, description = "Deleted"))
)]
pub async fn delete_webhook(
    State(state): State<AppState>,
    WebhookOwner(audience): WebhookOwner,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    let mut conn = state.db.acquire().await?;
    if !store::delete_endpoint(&mut conn, audience.tenant_id(), id).await? {
        return Err(ApiError::NotFound("webhook endpoint"));
    }
    Ok(StatusCode::NO_CONTENT)
}

/// An endpoint's deliveries, newest last, each with its attempt log.
#[utoipa::path(
    get, path = "/v1/webhooks/{webhook_id}/deliveries", tag = "webhooks", operation_id = "list_webhook_deliveries",
    params(("webhook_id" = Uuid, Path, description = "Endpoint id"), PageParams),
    responses((status = 200, description = "A page of the endpoint's deliveries", body = WebhookDeliveryPage))
)]
pub async fn list_deliveries(
    State(state): State<AppState>,
    WebhookOwner(audience): WebhookOwner,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(page): ApiQuery<PageParams>,
) -> ApiResult<Json<Page<WebhookDelivery>>> {
    let limit = page.fetch_limit()?;
    let mut conn = state.db.acquire().await?;
    load_endpoint(&mut conn, audience, id).await?;
    let rows = store::list_deliveries(&mut conn, audience.tenant_id(), id, page.after(), limit).await?;
    Ok(Json(Page::from_rows(rows, limit, |d: &WebhookDelivery| d.id)))
}

/// Send a `webhook.test` event to this endpoint only (whatever its event types), to check the receiver.
#[utoipa::path(
    post, path = "/v1/webhooks/{webhook_id}/test", tag = "webhooks", operation_id = "test_webhook",
    params(("webhook_id" = Uuid, Path, description = "Endpoint id")),
    responses(
        (status = 202, description = "The test delivery, queued", body = WebhookDelivery),
        (status = 409, description = "The endpoint is disabled (`webhook_disabled`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn test_webhook(
    State(state): State<AppState>,
    WebhookOwner(audience): WebhookOwner,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<(StatusCode, Json<WebhookDelivery>)> {
    let mut tx = state.db.begin().await?;
    let endpoint = load_endpoint(&mut tx, audience, id).await?;
    if !endpoint.enabled {
        return Err(ApiError::conflict("webhook_disabled", "the endpoint is disabled; enable it first"));
    }
    let event_id = new_id();
    let delivery_id = new_id();
    // Not through `emit`: a test goes to this endpoint alone, not to every subscriber of its audience.
    let data = serde_json::json!({ "endpoint_id": id, "message": "a test event sent on request" });
    store::insert_test_delivery(&mut tx, event_id, audience.tenant_id(), data, delivery_id, id).await?;
    let delivery = store::load_delivery(&mut tx, delivery_id).await?;
    tx.commit().await?;
    Ok((StatusCode::ACCEPTED, Json(delivery)))
}

/// Attempt a delivery again now (one more attempt; a failed delivery becomes pending).
#[utoipa::path(
    post, path = "/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/retry", tag = "webhooks",
    operation_id = "retry_webhook_delivery",
    params(
        ("webhook_id" = Uuid, Path, description = "Endpoint id"),
        ("delivery_id" = Uuid, Path, description = "Delivery id"),
    ),
    responses((status = 202, description = "The delivery, due now", body = WebhookDelivery))
)]
pub async fn retry_delivery(
    State(state): State<AppState>,
    WebhookOwner(audience): WebhookOwner,
    ApiPath((id, delivery_id)): ApiPath<(Uuid, Uuid)>,
) -> ApiResult<(StatusCode, Json<WebhookDelivery>)> {
    let mut tx = state.db.begin().await?;
    if !store::retry_delivery(&mut tx, audience.tenant_id(), id, delivery_id).await? {
        return Err(ApiError::NotFound("webhook delivery"));
    }
    let delivery = store::load_delivery(&mut tx, delivery_id).await?;
    tx.commit().await?;
    Ok((StatusCode::ACCEPTED, Json(delivery)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventListParams {
    /// Only events of this exact type, e.g. `lease.ended`.
    #[param(max_length = 200)]
    #[serde(rename = "type")]
    pub type_: Option<String>,
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
    pub after: Option<Uuid>,
}

/// The caller's events, oldest first: a tenant's events for tenant users, fleet events for operators.
#[utoipa::path(
    get, path = "/v1/events", tag = "webhooks", operation_id = "list_events",
    params(EventListParams),
    responses((status = 200, description = "A page of events", body = WebhookEventPage))
)]
pub async fn list_events(
    State(state): State<AppState>,
    principal: Principal,
    ApiQuery(params): ApiQuery<EventListParams>,
) -> ApiResult<Json<Page<WebhookEvent>>> {
    let page = PageParams { limit: params.limit, after: params.after };
    let limit = page.fetch_limit()?;
    if params.type_.as_ref().is_some_and(|t| t.chars().count() > 200) {
        return Err(ApiError::field("type", "at most 200 characters"));
    }
    let audience = match (principal.role, principal.tenant_id) {
        (Role::Operator, _) => Audience::Operators,
        (_, Some(tenant_id)) => Audience::Tenant(tenant_id),
        (_, None) => return Err(ApiError::forbidden("no tenant")),
    };
    let mut conn = state.db.acquire().await?;
    let rows =
        store::list_events(&mut conn, audience.tenant_id(), page.after(), params.type_.as_deref(), limit).await?;
    Ok(Json(Page::from_rows(rows, limit, |e: &WebhookEvent| e.id)))
}
