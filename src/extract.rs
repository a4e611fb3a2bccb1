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
    T: DeserializeOwned,
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
            return Err(ApiError::UnsupportedMediaType);
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge
            } else {
                ApiError::BadRequest(rejection.body_text())
            }
        })?;
        parse_json(&bytes).map(ApiJson)
    }
}

/// Deserialize JSON bytes: syntax errors are 400 `malformed_json`, shape errors 422 with the field path.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
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
                    let field = if path == "." { "body".to_string() } else { path };
                    Err(ApiError::Validation(vec![FieldError::new(field, strip_position(&inner.to_string()))]))
                }
                _ => Err(ApiError::MalformedJson(inner.to_string())),
            }
        }
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
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize::<_, T>(de).map(ApiQuery).map_err(|err| {
            let path = err.path().to_string();
            let field = if path == "." { "query".to_string() } else { path };
            ApiError::Validation(vec![FieldError::new(field, err.into_inner().to_string())])
        })
    }
}

/// Keyset pagination: ids are UUIDv7 (time-ordered), so `after` is the last id of the previous page.
#[derive(Debug, Clone, Copy, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageParams {
    /// Items per page, 1-500 (default 50).
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

/// Generate a new time-ordered id.
pub fn new_id() -> Uuid {
    Uuid::now_v7()
}
