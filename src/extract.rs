//! Request extractors whose rejections are problem+json: malformed JSON is 400, a wrong content type 415,
//! a body too large 413, values of the wrong shape 422 with the field's path, and an unparseable path id 404.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;
use uuid::Uuid;

use crate::error::{ApiError, FieldError};

/// A JSON body, deserialized with the failing field's path in the error.
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned + utoipa::ToSchema,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let is_json = req
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|mime| {
                let mime = mime.trim().to_ascii_lowercase();
                mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
            })
            .unwrap_or(false);
        if !is_json {
            return Err(ApiError::UnsupportedMediaType("application/json"));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge
            } else {
                ApiError::BadRequest(rejection.body_text())
            }
        })?;
        // Serde fills a struct from an array of its fields in order; the API documents objects. Bodies without
        // any array cannot hold one where an object belongs.
        if bytes.contains(&b'[')
            && let Ok(value) = serde_json::from_slice::<serde_json::Value>(&bytes)
        {
            let mut errors = Vec::new();
            arrays_where_objects_belong(&value, &format!("#/components/schemas/{}", T::name()), "", &mut errors);
            if !errors.is_empty() {
                return Err(ApiError::Validation(errors));
            }
        }
        parse_json(&bytes).map(ApiJson)
    }
}

/// The component schemas of the API's own document, as JSON: installed once by the router that serves the
/// requests ([`install_component_schemas`]), so this layer needs no knowledge of the routes.
static COMPONENT_SCHEMAS: std::sync::OnceLock<serde_json::Value> = std::sync::OnceLock::new();

/// Keep the document's component schemas for the body checks (the router calls it as it is built; the first
/// document wins: every router of one binary is built from the same routes).
pub fn install_component_schemas(doc: &utoipa::openapi::OpenApi) {
    COMPONENT_SCHEMAS.get_or_init(|| {
        let doc = serde_json::to_value(doc).unwrap_or_default();
        doc.pointer("/components/schemas").cloned().unwrap_or_default()
    });
}

fn component_schemas() -> &'static serde_json::Value {
    static NONE: serde_json::Value = serde_json::Value::Null;
    COMPONENT_SCHEMAS.get().unwrap_or(&NONE)
}

/// Field errors for every array in `value` where the schema at `reference` (a component reference, or inline)
/// wants an object.
fn arrays_where_objects_belong(value: &serde_json::Value, reference: &str, path: &str, errors: &mut Vec<FieldError>) {
    let Some(name) = reference.strip_prefix("#/components/schemas/") else { return };
    if let Some(schema) = component_schemas().get(name) {
        check_shape(value, schema, path, errors, 0);
    }
}

fn check_shape(
    value: &serde_json::Value,
    schema: &serde_json::Value,
    path: &str,
    errors: &mut Vec<FieldError>,
    depth: u8,
) {
    use serde_json::Value;
    if depth > 32 {
        return;
    }
    if let Some(Value::String(reference)) = schema.get("$ref") {
        let name = reference.trim_start_matches("#/components/schemas/");
        if let Some(target) = component_schemas().get(name) {
            check_shape(value, target, path, errors, depth + 1);
        }
        return;
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        if let Some(Value::Array(branches)) = schema.get(key) {
            for branch in branches.iter().filter(|b| b.get("type") != Some(&Value::String("null".into()))) {
                check_shape(value, branch, path, errors, depth + 1);
            }
        }
    }
    let wants_object = match schema.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        None => schema.get("properties").is_some(),
        _ => false,
    };
    match value {
        Value::Array(_) if wants_object => {
            let field = if path.is_empty() { "body".to_string() } else { path.to_string() };
            errors.push(FieldError::new(field, "must be a JSON object"));
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check_shape(item, item_schema, &format!("{path}[{i}]"), errors, depth + 1);
                }
            }
        }
        Value::Object(map) => {
            if let Some(Value::Object(properties)) = schema.get("properties") {
                for (key, item) in map {
                    if let Some(property) = properties.get(key) {
                        let child = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                        check_shape(item, property, &child, errors, depth + 1);
                    }
                }
            }
        }
        _ => {}
    }
}

/// Deserialize JSON bytes: syntax errors are 400 `malformed_json`, shape errors 422 with the field path, and
/// control characters in any string (see [`check_text`]) 422 with the field path, before any handler runs.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // Every request body of this API is an object. Serde would also fill a struct from an array of its fields
    // in order (`[null, "suspended"]`), a shape no client means and the spec does not allow.
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first.is_some_and(|b| *b != b'{') && serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok() {
        return Err(ApiError::field("body", "must be a JSON object"));
    }
    // Raw control characters are illegal inside JSON strings, so only an escape (`\u0000`), a raw DEL or a raw
    // C1 character can smuggle one in: bodies without any of them (nearly all) skip the walk.
    if may_hold_control_chars(bytes)
        && let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes)
    {
        let mut errors = Vec::new();
        find_control_chars(&value, &mut String::new(), &mut errors);
        if !errors.is_empty() {
            return Err(ApiError::Validation(errors));
        }
    }
    match deserialize_json(bytes) {
        Err(ApiError::Validation(errors))
            if errors.iter().any(|e| e.message.starts_with("invalid type: floating point")) =>
        {
            // JSON has one number type: `24.0` is the integer 24 to JSON Schema and to most clients. Only when a
            // float was refused for an integer field is the body read again with integral floats as integers.
            let mut value: serde_json::Value =
                serde_json::from_slice(bytes).map_err(|e| ApiError::MalformedJson(e.to_string()))?;
            integral_floats_to_integers(&mut value);
            deserialize_json(&serde_json::to_vec(&value).map_err(|e| ApiError::Internal(e.into()))?)
        }
        other => other,
    }
}

fn integral_floats_to_integers(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|f| n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15) {
                *n = serde_json::Number::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_floats_to_integers),
        Value::Object(map) => map.values_mut().for_each(integral_floats_to_integers),
        _ => {}
    }
}

fn deserialize_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    match serde_path_to_error::deserialize::<_, T>(&mut de) {
        Ok(value) => {
            // Trailing garbage after the JSON value is a syntax error.
            de.end().map_err(|e| ApiError::MalformedJson(e.to_string()))?;
            Ok(value)
        }
        Err(err) => {
            let path = err.path().to_string();
            let inner = err.into_inner();
            match inner.classify() {
                serde_json::error::Category::Data => {
                    let message = strip_position(&inner.to_string());
                    let field = if path == "." { "body".to_string() } else { path };
                    Err(ApiError::Validation(vec![
                        unknown_field(&field, &message).unwrap_or_else(|| FieldError::new(field, message)),
                    ]))
                }
                _ => Err(ApiError::MalformedJson(inner.to_string())),
            }
        }
    }
}

/// Serde's "unknown field `TP`, expected one of `tp`, ..." at `pins`, as the field error of `pins.TP` itself:
/// every request body refuses the fields its schema does not name (`additionalProperties: false`).
fn unknown_field(at: &str, message: &str) -> Option<FieldError> {
    let rest = message.strip_prefix("unknown field `")?;
    let (name, expected) = rest.split_once('`')?;
    let field = match at {
        "body" => name.to_string(),
        _ if at.ends_with(&format!(".{name}")) || at == name => at.to_string(),
        _ => format!("{at}.{name}"),
    };
    let expected = expected.trim_start_matches(',').trim();
    let expected = if expected.is_empty() { "no fields are allowed here".to_string() } else { expected.to_string() };
    Some(FieldError::new(field, format!("unknown field; {expected}")))
}

/// Characters no text field of this API accepts (the rule is the wire protocol's: the agent replaces them in
/// what it reports).
pub use gpuplane_protocol::text::is_forbidden_char;

/// The message of a text field holding a forbidden character.
pub const CONTROL_CHAR_MESSAGE: &str = "must not contain control characters (NUL, U+0001-U+001F other than tab and \
    newline, U+007F-U+009F)";

/// Reject text holding a [forbidden character](is_forbidden_char).
pub fn check_text(field: &str, text: &str) -> Result<(), FieldError> {
    if text.chars().any(is_forbidden_char) { Err(FieldError::new(field, CONTROL_CHAR_MESSAGE)) } else { Ok(()) }
}

/// A name or one-line label: not blank, at most `max` characters, no control characters at all (tab and newline
/// included). Stored trimmed. The spec states the same with `minLength`, `maxLength` and a pattern.
pub fn check_name(field: &str, text: &str, max: usize) -> Result<(), FieldError> {
    if text.trim().is_empty() || text.chars().count() > max {
        return Err(FieldError::new(field, format!("must be 1-{max} characters, not blank")));
    }
    if text.chars().any(char::is_control) {
        return Err(FieldError::new(field, "must be one line without control characters"));
    }
    Ok(())
}

fn may_hold_control_chars(bytes: &[u8]) -> bool {
    bytes
        .windows(2)
        .any(|w| (w[0] == b'\\' && w[1] == b'u') || w[0] == 0x7f || (w[0] == 0xc2 && (0x80..=0x9f).contains(&w[1])))
        || bytes.last() == Some(&0x7f)
}

/// Collect a field error for every string (value or key) that holds a forbidden character, with its JSON path.
fn find_control_chars(value: &serde_json::Value, path: &mut String, errors: &mut Vec<FieldError>) {
    use serde_json::Value;
    let here = |path: &str| if path.is_empty() { "body".to_string() } else { path.to_string() };
    match value {
        Value::String(s) => {
            if let Err(e) = check_text(&here(path), s) {
                errors.push(e);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                find_control_chars(item, path, errors);
                path.truncate(len);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                if key.chars().any(is_forbidden_char) {
                    errors.push(FieldError::new(here(path), CONTROL_CHAR_MESSAGE));
                } else {
                    find_control_chars(item, path, errors);
                }
                path.truncate(len);
            }
        }
        _ => {}
    }
}

fn strip_position(message: &str) -> String {
    match message.find(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// A path with one id. An id that is not a UUID names no object: 404.
pub struct ApiPath<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| ApiPath(p.0))
            .map_err(|_| ApiError::NotFound("object"))
    }
}

/// Query parameters; a bad value is 422 naming the parameter.
pub struct ApiQuery<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        let errors: Vec<FieldError> = form_urlencoded::parse(query.as_bytes())
            .filter_map(|(name, value)| check_text(&name, &value).err())
            .collect();
        if !errors.is_empty() {
            return Err(ApiError::Validation(errors));
        }
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize::<_, T>(de).map(ApiQuery).map_err(|err| {
            let path = err.path().to_string();
            let field = if path == "." { "query".to_string() } else { path };
            ApiError::Validation(vec![FieldError::new(field, err.into_inner().to_string())])
        })
    }
}

pub use gpuplane_protocol::time::{MAX_TIME, MIN_TIME, is_sane_time, sane_time, sane_time_opt};

/// Keyset pagination: ids are UUIDv7 (time-ordered), so `after` is the last id of the previous page.
#[derive(Debug, Clone, Copy, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageParams {
    /// Items per page, 1-500 (default 50).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
    /// Return items after this id (the `next_after` of the previous page).
    pub after: Option<Uuid>,
}

impl PageParams {
    pub const MAX: i64 = 500;

    /// The validated limit, plus one: fetch one more row than asked to know whether a next page exists.
    pub fn fetch_limit(&self) -> Result<i64, ApiError> {
        let limit = self.limit.unwrap_or(50);
        if !(1..=Self::MAX).contains(&limit) {
            return Err(ApiError::field("limit", format!("must be between 1 and {}", Self::MAX)));
        }
        Ok(limit + 1)
    }

    /// The lower bound for `id > $after`; the nil UUID sorts before every UUIDv7.
    pub fn after(&self) -> Uuid {
        self.after.unwrap_or(Uuid::nil())
    }
}

/// A page of results, in id order. (Documented per item type with `page_schema!`.)
#[derive(Debug, Serialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Pass as `after` to get the next page; absent on the last page.
    pub next_after: Option<Uuid>,
}

impl<T> Page<T> {
    /// Build a page from rows fetched with `fetch_limit` (one extra row signals a next page).
    pub fn from_rows(mut rows: Vec<T>, fetch_limit: i64, id_of: impl Fn(&T) -> Uuid) -> Self {
        let limit = (fetch_limit - 1).max(0) as usize;
        let next_after = if rows.len() > limit {
            rows.truncate(limit);
            rows.last().map(&id_of)
        } else {
            None
        };
        Page { items: rows, next_after }
    }
}

/// Declare the OpenAPI schema of `Page<$item>` under the name `$name`. Handlers return `Page<T>`; their
/// documentation names this type instead, because utoipa inlines generic arguments, which would give client
/// SDKs an anonymous copy of every item type (`PageLeaseItemsItem` beside `Lease`). Same JSON, item by reference.
#[macro_export]
macro_rules! page_schema {
    ($name:ident, $item:ty) => {
        #[doc = concat!("A page of `", stringify!($item), "`, in id order.")]
        #[derive(utoipa::ToSchema)]
        #[allow(dead_code)]
        pub struct $name {
            pub items: Vec<$item>,
            /// Pass as `after` to get the next page; absent on the last page.
            pub next_after: Option<uuid::Uuid>,
        }
    };
}

pub use gpuplane_store::new_id;

/// For a PATCH field where `null` means "clear it": absent -> `None` (with `#[serde(default)]`), `null` ->
/// `Some(None)`, a value -> `Some(Some(value))`.
pub fn double_option<'de, T, D>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    T: serde::Deserialize<'de>,
    D: serde::Deserializer<'de>,
{
    <Option<T> as serde::Deserialize>::deserialize(deserializer).map(Some)
}
