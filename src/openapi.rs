//! The OpenAPI document, generated from the same route list the router serves (utoipa-axum), then completed
//! in one place with what every operation shares: the bearer security scheme and the problem+json errors.

use utoipa::OpenApi;
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};

use crate::error::{FieldError, Problem};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "gpuplane",
        description = "Control plane of a GPU rental platform: tenants, GPU inventory, leases, node agents, \
                       auto-parallel planning and billing. Authenticate by exchanging an API key at \
                       `POST /v1/auth/token` and sending `Authorization: Bearer <access_token>`. Errors are RFC 9457 \
                       `application/problem+json` with a stable `code`.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    tags(
        (name = "auth", description = "API keys and access tokens"),
        (name = "tenants", description = "The caller's tenant and its API keys"),
        (name = "inventory", description = "GPU models and pools"),
        (name = "leases", description = "Leasing GPUs: allocation, extension, release, history"),
        (name = "planner", description = "Auto-parallel plans and rental advice"),
        (name = "jobs", description = "Jobs on a lease's GPUs: templates, planned launch specs, state, insights"),
        (name = "uploads", description = "A job's working directory, uploaded as an archive and unpacked on every node of the job"),
        (name = "environments", description = "Interactive access: SSH keys, and SSH into a sandbox holding a lease's GPUs"),
        (name = "services", description = "Jobs that serve: their URL through the gateway, their callers' keys, who may call them and how often"),
        (name = "volumes", description = "Storage that outlives a lease: a tenant's volumes in a pool, and what each pool sells of storage"),
        (name = "agents", description = "Node agents: registration and heartbeats (agent credentials only)"),
        (name = "billing", description = "Prices, prepaid balance, ledger, invoices, usage exports, revenue"),
        (name = "webhooks", description = "Signed webhooks (Standard Webhooks) for tenant and fleet events, their delivery log, and the event list"),
        (name = "admin", description = "Platform operators: tenants, catalog, pools, nodes"),
        (name = "system", description = "Health, readiness and metrics"),
    ),
    components(schemas(Problem, FieldError, crate::billing::export::ExportFormat))
)]
struct ApiDoc;

/// The document's base: info, tags and shared schemas. Routes are added by `app::api_router`.
pub fn base() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// Operations anyone may call without a token.
const PUBLIC_OPERATIONS: &[&str] = &[
    "create_token",
    "create_console_session",
    "delete_console_session",
    "get_healthz",
    "get_readyz",
    "get_metrics",
    "register_agent",
];

pub const BEARER: &str = "bearer";
/// The console's session cookie (`POST /v1/console/session`), accepted wherever a bearer token is.
pub const CONSOLE_SESSION: &str = "console_session";

/// The shared error responses, by status, with the situation each one stands for.
const PROBLEMS: &[(&str, &str, &str)] = &[
    ("400", "BadRequest", "Malformed request, e.g. invalid JSON (`malformed_json`)"),
    (
        "401",
        "Unauthorized",
        "Missing, expired, tampered or revoked credentials (`unauthorized`), or a console session that has ended: \
         signed out, its tenant suspended (`session_ended`)",
    ),
    (
        "403",
        "Forbidden",
        "Authenticated but not allowed (`forbidden`, `tenant_suspended`), or a state change by the console's \
         session cookie without its `X-CSRF-Token` (`csrf_failed`)",
    ),
    ("404", "NotFound", "No such object, or it belongs to another tenant (`not_found`)"),
    ("413", "PayloadTooLarge", "Request body too large (`payload_too_large`)"),
    (
        "415",
        "UnsupportedMediaType",
        "Body is not of the media type the operation takes: application/json, or application/octet-stream for an upload (`unsupported_media_type`)",
    ),
    ("422", "ValidationFailed", "Invalid values, with field-level `errors` (`validation_failed`)"),
    (
        "429",
        "TooManyRequests",
        "Too many attempts from this client address; retry after `Retry-After` seconds (`rate_limited`)",
    ),
    ("500", "InternalError", "Unexpected server failure; details are in the server log (`internal_error`)"),
    (
        "503",
        "ServiceUnavailable",
        "The database is unreachable for now; retry after `Retry-After` seconds (`service_unavailable`)",
    ),
];

/// Response bodies that carry a secret (a key, a token, a signing secret, a job's secret values). Every response
/// with one of them is marked `x-gpuplane-secret: true` and declares `Cache-Control: no-store`, which its handler
/// sends (`secrets::NO_STORE`); tests/api/openapi.rs calls each marked response and checks the header, and
/// checks that every schema with a secret-looking field is listed here.
pub const SECRET_SCHEMAS: &[&str] = &[
    "AssignmentList",
    "ConsoleSession",
    "CreatedApiKey",
    "CreatedJoinToken",
    "CreatedServiceKey",
    "CreatedWebhookEndpoint",
    "RegisterResponse",
    "RotatedApiKey",
    "TokenResponse",
];
/// The extension that marks a response carrying a secret.
pub const SECRET_EXTENSION: &str = "x-gpuplane-secret";

/// Operations throttled per client address (see `rate_limit`): they may answer 429.
const THROTTLED_OPERATIONS: &[&str] = &["create_token", "create_console_session", "register_agent"];

/// What every text field of a request accepts: no control characters but tab, line feed and carriage return
/// (see `extract::is_forbidden_char`). Stated on every request string that has no stricter pattern or format.
pub const TEXT_PATTERN: &str = "^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f-\\u009f]*$";

/// Add the bearer scheme, per-operation security, and the shared problem responses that apply.
pub fn complete(api: &mut utoipa::openapi::OpenApi) {
    let components = api.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        BEARER,
        SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("JWT").build()),
    );
    components.add_security_scheme(
        CONSOLE_SESSION,
        SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
            crate::auth::cookie::SESSION_COOKIE,
            "The web console's session: the access token in an HttpOnly, SameSite=Strict cookie set by \
             `POST /v1/console/session`. Every POST, PUT, PATCH and DELETE authenticated by it must echo the \
             session's CSRF token (the sign-in response's `csrf_token`, also the `gp_csrf` cookie) in the \
             `X-CSRF-Token` header, or it is refused with 403 `csrf_failed`.",
        ))),
    );
    for (_, name, description) in PROBLEMS {
        components.responses.insert(
            (*name).to_string(),
            RefOr::T(
                ResponseBuilder::new()
                    .description(*description)
                    .content(
                        "application/problem+json",
                        ContentBuilder::new().schema(Some(Ref::from_schema_name("Problem"))).build(),
                    )
                    .build(),
            ),
        );
    }
    state_text_rules(api);
    for (path, item) in api.paths.paths.iter_mut() {
        let has_path_params = path.contains('{');
        // Agent endpoints take an agent credential only: the console's cookie is a user's.
        let user = !path.starts_with("/v1/agent/");
        for op in
            [&mut item.get, &mut item.post, &mut item.put, &mut item.patch, &mut item.delete].into_iter().flatten()
        {
            complete_operation(op, has_path_params, user);
            mark_secret_responses(op);
        }
    }
}

/// Mark the responses whose body is one of [`SECRET_SCHEMAS`] and declare their `Cache-Control: no-store`.
fn mark_secret_responses(op: &mut Operation) {
    use utoipa::openapi::extensions::ExtensionsBuilder;
    use utoipa::openapi::header::HeaderBuilder;
    use utoipa::openapi::{ObjectBuilder, Type};
    for response in op.responses.responses.values_mut() {
        let RefOr::T(response) = response else { continue };
        let secret = response.content.values().any(|content| match content {
            RefOr::T(c) => matches!(&c.schema, Some(RefOr::Ref(r))
                if SECRET_SCHEMAS.iter().any(|name| r.ref_location == format!("#/components/schemas/{name}"))),
            RefOr::Ref(_) => false,
        });
        if !secret {
            continue;
        }
        let marker = ExtensionsBuilder::new().add(SECRET_EXTENSION, true).build();
        response.extensions.get_or_insert_with(Default::default).merge(marker);
        let no_store = HeaderBuilder::new()
            .schema(Some(ObjectBuilder::new().schema_type(Type::String).enum_values(Some(["no-store"]))))
            .description(Some("The body carries a secret: no cache may keep it."))
            .build();
        response.headers.insert("Cache-Control".to_string(), RefOr::T(no_store));
    }
}

fn complete_operation(op: &mut Operation, has_path_params: bool, user: bool) {
    let public = op.operation_id.as_deref().is_some_and(|id| PUBLIC_OPERATIONS.contains(&id));
    let has_body = op.request_body.is_some();
    let has_query = op.parameters.as_ref().is_some_and(|ps| {
        ps.iter().any(|p| matches!(p, RefOr::T(p) if p.parameter_in == utoipa::openapi::path::ParameterIn::Query))
    });
    if !public {
        let mut security = vec![SecurityRequirement::new(BEARER, Vec::<String>::new())];
        if user {
            security.push(SecurityRequirement::new(CONSOLE_SESSION, Vec::<String>::new()));
        }
        op.security = Some(security);
    }
    let mut wanted = vec!["500", "503"];
    if op.operation_id.as_deref().is_some_and(|id| THROTTLED_OPERATIONS.contains(&id)) {
        wanted.push("429");
    }
    if !public {
        wanted.extend(["401", "403"]);
    }
    if has_body {
        wanted.extend(["400", "413", "415", "422"]);
    }
    if has_query {
        wanted.push("422");
    }
    if has_path_params {
        wanted.push("404");
    }
    for status in wanted {
        let name = PROBLEMS.iter().find(|p| p.0 == status).map(|p| p.1).unwrap_or("InternalError");
        op.responses
            .responses
            .entry(status.to_string())
            .or_insert_with(|| RefOr::Ref(Ref::new(format!("#/components/responses/{name}"))));
    }
}

/// Give every request string without a pattern, format or enum the [`TEXT_PATTERN`] the extractors enforce, and
/// every unsigned 32-bit integer its real range.
/// Done on the JSON form of the document: utoipa's typed model has no generic walk over schemas.
fn state_text_rules(api: &mut utoipa::openapi::OpenApi) {
    use serde_json::Value;
    use utoipa::openapi::schema::{Schema, SchemaType, Type};
    fn walk(v: &mut Value) {
        match v {
            Value::Object(map) => {
                let is_string = match map.get("type") {
                    Some(Value::String(t)) => t == "string",
                    Some(Value::Array(ts)) => ts.iter().any(|t| t == "string"),
                    _ => false,
                };
                // utoipa writes Rust's u32 as `int32` with `minimum: 0`, a format that ends at 2^31 - 1, while the
                // server takes every u32: state the real range.
                let unsigned_32 = map.get("format").is_some_and(|f| f == "int32")
                    && map.get("minimum").and_then(Value::as_f64) == Some(0.0)
                    && !map.contains_key("maximum");
                if unsigned_32 {
                    map.insert("format".into(), Value::String("int64".into()));
                    map.insert("maximum".into(), Value::from(u32::MAX));
                }
                // Likewise u64, which goes past `int64`.
                let unsigned_64 = map.get("format").is_some_and(|f| f == "int64")
                    && map.get("minimum").and_then(Value::as_f64) == Some(0.0)
                    && !map.contains_key("maximum");
                if unsigned_64 {
                    map.remove("format");
                    map.insert("maximum".into(), Value::from(u64::MAX));
                }
                let free = !["pattern", "format", "enum", "const", "$ref"].iter().any(|k| map.contains_key(*k));
                if is_string && free {
                    map.insert("pattern".into(), Value::String(TEXT_PATTERN.into()));
                }
                map.values_mut().for_each(walk);
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    // Request bodies are component schemas (shared with responses, which never carry control characters
    // either) and parameters are inline. Each schema goes through its JSON form and back.
    fn complete<T: serde::Serialize + serde::de::DeserializeOwned>(schema: &mut T) {
        let Ok(mut value) = serde_json::to_value(&*schema) else { return };
        walk(&mut value);
        match serde_json::from_value(value) {
            Ok(completed) => *schema = completed,
            // utoipa cannot read back a schema holding an any-value (`{}`) property; such a schema states its
            // patterns itself (tests/api/openapi.rs checks that every request string has one).
            Err(err) => tracing::debug!(error = %err, "an OpenAPI schema did not read back; left as it was"),
        }
    }
    if let Some(components) = api.components.as_mut() {
        // Error bodies name what was wrong with a request, so they may quote what it held.
        components
            .schemas
            .iter_mut()
            .filter(|(name, _)| !["Problem", "FieldError"].contains(&name.as_str()))
            .for_each(|(_, s)| complete(s));
    }
    for item in api.paths.paths.values_mut() {
        for op in
            [&mut item.get, &mut item.post, &mut item.put, &mut item.patch, &mut item.delete].into_iter().flatten()
        {
            for param in op.parameters.iter_mut().flatten() {
                // utoipa writes an optional parameter (`Option<String>`) as nullable, but a header or query
                // value is text: "null" is a value like any other, judged by the pattern. Absent is `required:
                // false`, so the schema is the value's alone.
                if let RefOr::T(utoipa::openapi::path::Parameter {
                    schema: Some(RefOr::T(Schema::Object(object))), ..
                }) = param
                    && let SchemaType::Array(types) = &object.schema_type
                {
                    let kept: Vec<Type> = types.iter().filter(|t| **t != Type::Null).cloned().collect();
                    if let [single] = kept.as_slice() {
                        object.schema_type = SchemaType::Type(single.clone());
                    }
                }
                complete(param);
            }
        }
    }
}
