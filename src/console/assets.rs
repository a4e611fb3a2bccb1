//! The console's files, embedded in the binary: `/` is the page, `/console/<name>-<hash>.<ext>` its script and
//! style sheet. The names carry a hash of the content, so they are cached for a year and a new binary's page
//! asks for new names; the page itself is revalidated on every load. No file is read from disk at run time.

use std::sync::LazyLock;

use axum::Router;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

use crate::error::ApiError;
use crate::extract::ApiPath;

/// The content security policy of every console response: nothing but this origin, no inline script or style,
/// no framing.
pub const CSP: &str =
    "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const INDEX_TEMPLATE: &str = include_str!("static/index.html");

/// A file the page loads.
struct Asset {
    /// Its name in `index.html`, replaced there by the hashed name.
    name: &'static str,
    body: &'static [u8],
    content_type: &'static str,
}

const FILES: &[Asset] = &[
    Asset { name: "app.js", body: include_bytes!("static/app.js"), content_type: "text/javascript; charset=utf-8" },
    Asset { name: "app.css", body: include_bytes!("static/app.css"), content_type: "text/css; charset=utf-8" },
];

/// Each file under its content-hashed name (`app-0123456789abcdef.js`).
static HASHED: LazyLock<Vec<(String, &'static Asset)>> = LazyLock::new(|| {
    FILES
        .iter()
        .map(|a| {
            let digest = Sha256::digest(a.body);
            let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
            let (stem, ext) = a.name.rsplit_once('.').unwrap_or((a.name, ""));
            (format!("{stem}-{hex}.{ext}"), a)
        })
        .collect()
});

/// The page, naming the hashed files.
static INDEX: LazyLock<String> = LazyLock::new(|| {
    HASHED.iter().fold(INDEX_TEMPLATE.to_string(), |page, (hashed, asset)| {
        page.replace(&format!("/console/{}", asset.name), &format!("/console/{hashed}"))
    })
});

/// Bytes a first visit loads: the page and every file it names.
pub fn first_load_bytes() -> usize {
    INDEX.len() + FILES.iter().map(|a| a.body.len()).sum::<usize>()
}

/// The hashed URL paths of the files (for tests and the docs).
pub fn asset_paths() -> Vec<String> {
    HASHED.iter().map(|(name, _)| format!("/console/{name}")).collect()
}

pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new().route("/", get(index)).route("/console/{file}", get(asset))
}

type Headers = [(HeaderName, HeaderValue); 6];

fn headers(content_type: &'static str, cache: &'static str) -> Headers {
    [
        (CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (CACHE_CONTROL, HeaderValue::from_static(cache)),
        (HeaderName::from_static("content-security-policy"), HeaderValue::from_static(CSP)),
        (HeaderName::from_static("x-frame-options"), HeaderValue::from_static("DENY")),
        (HeaderName::from_static("referrer-policy"), HeaderValue::from_static("no-referrer")),
        (HeaderName::from_static("cross-origin-opener-policy"), HeaderValue::from_static("same-origin")),
    ]
}

async fn index() -> Response {
    (headers("text/html; charset=utf-8", "no-cache"), INDEX.as_str()).into_response()
}

async fn asset(ApiPath(file): ApiPath<String>) -> Result<Response, ApiError> {
    let (_, asset) = HASHED.iter().find(|(name, _)| *name == file).ok_or(ApiError::NotFound("console file"))?;
    Ok((headers(asset.content_type, "public, max-age=31536000, immutable"), asset.body).into_response())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_page_names_every_file_by_its_hash() {
        for path in super::asset_paths() {
            assert!(super::INDEX.contains(&path), "{path} missing from index.html");
        }
        assert!(!super::INDEX.contains("/console/app.js"));
    }
}
