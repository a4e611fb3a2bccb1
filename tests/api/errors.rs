use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::json;
use sqlx::PgPool;

use crate::support::app::TestApp;

async fn raw_post(
    app: &TestApp,
    token: &str,
    content_type: Option<&str>,
    body: impl Into<Body>,
) -> crate::support::app::Response {
    let mut req =
        Request::builder().method("POST").uri("/v1/admin/tenants").header("authorization", format!("Bearer {token}"));
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    app.send(req.body(body.into()).unwrap()).await
}

#[sqlx::test]
async fn malformed_json_is_400(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    for body in ["{\"name\": ", "not json", "{\"name\": \"x\"} trailing"] {
        raw_post(&app, &op, Some("application/json"), body)
            .await
            .expect_problem(StatusCode::BAD_REQUEST, "malformed_json");
    }
    let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM tenants").fetch_one(&db).await.unwrap();
    assert_eq!(n, 0, "nothing was created");
}

#[sqlx::test]
async fn wrong_content_type_is_415(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    raw_post(&app, &op, Some("text/plain"), r#"{"name":"x"}"#)
        .await
        .expect_problem(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type");
    raw_post(&app, &op, None, r#"{"name":"x"}"#)
        .await
        .expect_problem(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type");
    // Parameters on the media type are fine.
    raw_post(&app, &op, Some("application/json; charset=utf-8"), r#"{"name":"x"}"#).await.expect(StatusCode::CREATED);
}

#[sqlx::test]
async fn body_too_large_is_413(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let huge = format!(r#"{{"name":"{}"}}"#, "x".repeat(2 * 1024 * 1024));
    raw_post(&app, &op, Some("application/json"), huge)
        .await
        .expect_problem(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
}

#[sqlx::test]
async fn invalid_values_are_422_with_fields(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    // Wrong type names the field.
    let res = app.post("/v1/admin/tenants", &op, json!({ "name": 42 })).await;
    assert_eq!(res.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").error_fields(), ["name"]);
    // Missing field.
    let res = app.post("/v1/admin/tenants", &op, json!({})).await;
    res.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    // Unknown field (typos do not pass silently).
    let res = app.post("/v1/admin/tenants", &op, json!({ "name": "ok", "nmae": "typo" })).await;
    res.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    // Semantic validation reports every bad field at once.
    let res = app.post("/v1/admin/tenants", &op, json!({ "name": "", "quotas": { "max_gpus_per_pool": -5 } })).await;
    let res = res.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(res.error_fields(), ["name", "quotas.max_gpus_per_pool"]);
    let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM tenants").fetch_one(&db).await.unwrap();
    assert_eq!(n, 0, "failed requests change nothing");
}

#[sqlx::test]
async fn unknown_routes_and_ids_are_404_problems(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    app.get("/v1/nothing-here", &op).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    app.get("/v1/admin/tenants/not-a-uuid", &op).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    app.get("/v1/admin/nodes/00000000-0000-7000-8000-000000000000", &op)
        .await
        .expect_problem(StatusCode::NOT_FOUND, "not_found");
}

#[sqlx::test]
async fn every_response_carries_a_request_id(db: PgPool) {
    let app = TestApp::new(db);
    let res = app.call(axum::http::Method::GET, "/healthz", None, None).await.expect(StatusCode::OK);
    let id = res.headers.get("x-request-id").expect("generated request id");
    assert_eq!(id.len(), 36);
    // A caller's own request id is propagated.
    let req = Request::builder().uri("/v1/tenant").header("x-request-id", "trace-me-123").body(Body::empty()).unwrap();
    let res = app.send(req).await.expect(StatusCode::UNAUTHORIZED);
    assert_eq!(res.headers.get("x-request-id").unwrap(), "trace-me-123");
}

#[sqlx::test]
async fn internal_errors_hide_their_detail(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    // Break the database under the running app: the client sees a generic 500.
    sqlx::query("ALTER TABLE tenants RENAME TO tenants_gone").execute(&db).await.unwrap();
    let res = app.get("/v1/admin/tenants", &op).await;
    assert_eq!(res.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(res.body["code"], "internal_error");
    let text = res.body.to_string();
    assert!(!text.contains("tenants_gone") && !text.contains("relation"), "no SQL detail leaks: {text}");
}

#[sqlx::test]
async fn metrics_count_requests_by_route_and_status(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    app.get("/v1/admin/tenants", &op).await.expect(StatusCode::OK);
    let res = app.call(axum::http::Method::GET, "/metrics", None, None).await.expect(StatusCode::OK);
    let text = res.body.as_str().unwrap();
    assert!(
        text.contains(r#"gpuplane_http_requests_total{method="GET",route="/v1/admin/tenants",status="200"}"#),
        "{text}"
    );
    assert!(text.contains("gpuplane_http_request_duration_seconds_bucket"));
    assert!(text.contains("gpuplane_db_pool_connections"));
}
