//! The API contract under hostile input: every bad request is a 4xx problem (never a 500 or a panic) and
//! changes nothing; a lost database is 503 with Retry-After; credentials have a lifecycle and are throttled.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request, StatusCode};
use gpuplane::auth::Role;
use gpuplane::config::{RateLimitArgs, Secret, Settings};
use gpuplane::{AppState, build_router};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use sqlx::PgPool;
use tower::ServiceExt;

use crate::support::app::TestApp;

/// A row count per table that bad requests could touch.
async fn fingerprint(db: &PgPool) -> Vec<i64> {
    let mut counts = Vec::new();
    for table in
        ["tenants", "api_keys", "pools", "nodes", "gpus", "leases", "ledger_entries", "job_templates", "audit_events"]
    {
        let (n,): (i64,) =
            sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}"))).fetch_one(db).await.unwrap();
        counts.push(n);
    }
    counts
}

#[sqlx::test]
async fn nul_and_control_characters_in_any_text_are_422_field_errors(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    let (tenant_id, tenant) = app.tenant_admin(&op, "acme").await;
    let pool = app.pool(&op, "h100-a", "h100").await;
    app.node(&op, &pool, "node-0", 2).await;
    let before = fingerprint(&db).await;
    let nul = "bad\u{0}name";
    let cases: Vec<(&String, String, Value, &str)> = vec![
        (&op, "/v1/admin/tenants", json!({ "name": nul }), "name"),
        (&op, "/v1/admin/tenants", json!({ "name": "bell\u{7}" }), "name"),
        (&op, "/v1/admin/tenants", json!({ "name": "c1\u{85}" }), "name"),
        (&tenant, "/v1/tenant/api-keys", json!({ "name": nul, "role": "tenant_member" }), "name"),
        (&op, "/v1/admin/api-keys", json!({ "name": nul }), "name"),
        (&tenant, "/v1/leases", json!({ "gpu_model": "h\u{0}100", "gpu_count": 1, "duration_hours": 1 }), "gpu_model"),
        (
            &op,
            &format!("/v1/admin/tenants/{tenant_id}/ledger"),
            json!({ "kind": "topup", "amount_minor": 5, "currency": "USD", "reason": nul }),
            "reason",
        ),
        (
            &op,
            "/v1/admin/nodes",
            json!({ "pool_id": pool, "hostname": "n9", "address": "n9\u{0}.test", "intra_link": "nvlink",
                    "network_gbps": 400, "rdma": true, "gpus": [{ "index": 0, "uuid": "GPU-\u{0}" }] }),
            "address",
        ),
        (
            &op,
            "/v1/admin/templates",
            json!({ "name": "ft", "description": nul, "argv": ["python3"], "parameters": [] }),
            "description",
        ),
    ]
    .into_iter()
    .map(|(t, p, b, f): (&String, &str, Value, &str)| (t, p.to_string(), b, f))
    .collect();
    for (token, path, body, field) in cases {
        let res = app.post(&path, token, body).await;
        let res = res.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
        assert!(res.error_fields().iter().any(|f| f == field), "{path}: {:?}", res.body);
    }
    // Nested paths are named exactly, and query parameters are checked the same way.
    let res = app
        .post(
            "/v1/admin/nodes",
            &op,
            json!({ "pool_id": pool, "hostname": "n9", "address": "n9.test", "intra_link": "nvlink",
                    "network_gbps": 400, "rdma": true, "gpus": [{ "index": 0, "uuid": "GPU-\u{0}" }] }),
        )
        .await;
    assert_eq!(
        res.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").error_fields(),
        ["gpus[0].uuid"]
    );
    let res = app.get("/v1/admin/invoices?month=2026-1%001", &op).await;
    assert_eq!(res.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").error_fields(), ["month"]);
    // Agent registration checks its facts before its join token.
    let facts = json!({ "hostname": "n9", "address": "n9.test", "intra_link": "nvlink", "network_gbps": 400,
                        "driver_version": "550\u{0}", "gpus": [{ "index": 0, "uuid": "GPU-0", "name": "H\u{0}100", "memory_bytes": 1 }] });
    let res =
        app.call(Method::POST, "/v1/agent/register", None, Some(json!({ "join_token": "gpj_x", "node": facts }))).await;
    let res = res.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(res.error_fields(), ["node.driver_version", "node.gpus[0].name"]);
    // Tab and newline stay allowed in text.
    app.post(
        "/v1/admin/templates",
        &op,
        json!({ "name": "ft", "description": "line 1\n\tline 2", "argv": ["python3"] }),
    )
    .await
    .expect(StatusCode::CREATED);
    let mut after = fingerprint(&db).await;
    after[7] -= 1; // the template just created
    assert_eq!(before, after, "refused requests changed nothing");
}

#[sqlx::test]
async fn an_array_is_not_an_object_body(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    let tenant = app.post("/v1/admin/tenants", &op, json!({ "name": "acme" })).await.expect(StatusCode::CREATED);
    let id = tenant.body["id"].as_str().unwrap();
    let res = app.patch(&format!("/v1/admin/tenants/{id}"), &op, json!([null, "suspended"])).await;
    assert_eq!(res.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").error_fields(), ["body"]);
    let (status,): (String,) = sqlx::query_as("SELECT status FROM tenants").fetch_one(&db).await.unwrap();
    assert_eq!(status, "active");
    // Nested objects too, at any depth, named by their path.
    let (_, tenant) = app.tenant_admin(&op, "acme-2").await;
    let plan = json!({ "cluster": { "gpu": "a100-80g", "gpus": 64, "gpus_per_node": 8 }, "model": { "preset": "llama3-70b" },
                       "pins": [null, null], "workload": { "kind": "train", "seq_len": 4096, "global_batch": 1024 } });
    let res = app.post("/v1/plans", &tenant, plan).await;
    assert_eq!(res.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").error_fields(), ["pins"]);
    let pool = app.pool(&op, "h100-a", "h100").await;
    let node = json!({ "pool_id": pool, "hostname": "n1", "address": "n1.test", "intra_link": "nvlink",
                       "network_gbps": 400, "gpus": [[0, "GPU-n1-0"]] });
    let res = app.post("/v1/admin/nodes", &op, node).await;
    assert_eq!(res.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").error_fields(), ["gpus[0]"]);
    let (nodes,): (i64,) = sqlx::query_as("SELECT count(*) FROM nodes").fetch_one(&db).await.unwrap();
    assert_eq!(nodes, 0);
}

#[sqlx::test]
async fn extensions_near_i32_max_are_422_not_500_or_402(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    let (tenant_id, tenant) = app.tenant_admin(&op, "acme").await;
    let pool = app.pool(&op, "h100-a", "h100").await;
    app.node(&op, &pool, "node-0", 4).await;
    let hourly = app
        .post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 2 }))
        .await
        .expect(StatusCode::CREATED);
    let monthly = app
        .post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 1, "months": 1 }))
        .await
        .expect(StatusCode::CREATED);
    let before: Vec<(i64, Option<i32>, Option<i32>)> =
        sqlx::query_as("SELECT generation, duration_hours, months FROM leases ORDER BY id")
            .fetch_all(&db)
            .await
            .unwrap();
    let (balance_before,): (i64,) =
        sqlx::query_as("SELECT COALESCE(sum(amount_minor), 0)::bigint FROM ledger_entries WHERE tenant_id = $1::uuid")
            .bind(&tenant_id)
            .fetch_one(&db)
            .await
            .unwrap();
    let cases = [
        (&hourly, json!({ "hours": 2147483647 }), "hours"),
        (&hourly, json!({ "hours": 8783 }), "hours"),
        (&hourly, json!({ "hours": -2147483648 }), "hours"),
        (&monthly, json!({ "months": 2147483647 }), "months"),
        (&monthly, json!({ "months": 36 }), "months"),
    ];
    for (lease, body, field) in cases {
        let id = lease.body["id"].as_str().unwrap();
        let res = app.post(&format!("/v1/leases/{id}/extend"), &tenant, body.clone()).await;
        let res = res.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
        assert_eq!(res.error_fields(), [field], "{body}");
    }
    let after: Vec<(i64, Option<i32>, Option<i32>)> =
        sqlx::query_as("SELECT generation, duration_hours, months FROM leases ORDER BY id")
            .fetch_all(&db)
            .await
            .unwrap();
    assert_eq!(before, after, "no lease changed");
    let (balance_after,): (i64,) =
        sqlx::query_as("SELECT COALESCE(sum(amount_minor), 0)::bigint FROM ledger_entries WHERE tenant_id = $1::uuid")
            .bind(&tenant_id)
            .fetch_one(&db)
            .await
            .unwrap();
    assert_eq!(balance_before, balance_after);
    // The largest extension that fits still works.
    let id = hourly.body["id"].as_str().unwrap();
    app.post(&format!("/v1/leases/{id}/extend"), &tenant, json!({ "hours": 8782 })).await.expect(StatusCode::OK);
}

#[sqlx::test]
async fn dates_outside_1970_to_9999_are_422_everywhere(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let pool = app.pool(&op, "h100-a", "h100").await;
    let node = app.node(&op, &pool, "node-0", 2).await;
    let lease = app
        .post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 2 }))
        .await
        .expect(StatusCode::CREATED);
    let lease = lease.body["id"].as_str().unwrap();
    let cases = [
        (&tenant, format!("/v1/leases/{lease}/telemetry?to=-262143-01-01T00:30:00Z"), "to"),
        (&tenant, format!("/v1/leases/{lease}/telemetry?from=+262142-12-31T00:00:00Z"), "from"),
        (&op, format!("/v1/admin/nodes/{node}/telemetry?from=1969-12-31T23:59:59Z"), "from"),
        (&op, format!("/v1/admin/pools/{pool}/utilization?to=10000-01-01T00:00:00Z"), "to"),
        (&op, "/v1/admin/billing/revenue?from=-9999-01-01T00:00:00Z&to=2026-01-01T00:00:00Z".to_string(), "from"),
        (&op, "/v1/admin/invoices?month=-9999-01".to_string(), "month"),
        (&op, "/v1/admin/invoices?month=+12345-01".to_string(), "month"),
        (&op, "/v1/admin/invoices?month=1969-12".to_string(), "month"),
        (&tenant, "/v1/billing/usage/export?format=jsonl&from=-200000-01-01T00:00:00Z".to_string(), "from"),
        (&op, "/v1/admin/billing/usage/export?to=99999-01-01T00:00:00Z".to_string(), "to"),
    ];
    for (token, path, field) in cases {
        let res = app.get(&path, token).await;
        let res = res.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
        assert_eq!(res.error_fields(), [field], "{path}");
    }
    // The edges are fine.
    app.get("/v1/admin/invoices?month=1970-01", &op).await.expect(StatusCode::OK);
    app.get("/v1/admin/billing/revenue?from=1970-01-01T00:00:00Z&to=9999-12-31T23:59:59Z", &op)
        .await
        .expect(StatusCode::OK);
}

#[sqlx::test]
async fn an_export_refuses_before_its_first_byte_and_aborts_when_it_fails_midway(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    // The database failing before the first byte: a problem, not a 200 with an empty body.
    sqlx::query("ALTER TABLE usage_records RENAME TO usage_records_gone").execute(&db).await.unwrap();
    let res = app.get("/v1/admin/billing/usage/export?format=jsonl", &op).await;
    res.expect_problem(StatusCode::INTERNAL_SERVER_ERROR, "internal_error");
    sqlx::query("ALTER TABLE usage_records_gone RENAME TO usage_records").execute(&db).await.unwrap();
    // Failing after the first chunk: the body ends with an error (an aborted transfer), not a clean end. Many
    // rows (a view stands in for the table; the export's SQL is the real one), and the query's connection is
    // killed while the response is being streamed.
    sqlx::query("ALTER TABLE usage_records RENAME TO usage_records_real").execute(&db).await.unwrap();
    sqlx::query(
        "CREATE VIEW usage_records AS SELECT md5(g::text)::uuid AS id, md5(g::text)::uuid AS tenant_id, \
             md5(g::text)::uuid AS lease_id, (SELECT id FROM pools LIMIT 1) AS pool_id, 'hourly'::text AS term, \
             '2026-01-01T00:00:00Z'::timestamptz + make_interval(secs => g) AS period_start, \
             '2026-01-01T00:01:00Z'::timestamptz + make_interval(secs => g) AS period_end, 1 AS gpu_count, \
             60::bigint AS gpu_seconds, 100::bigint AS unit_price_minor, 'USD'::text AS currency, 2::bigint AS amount_minor, \
             NULL::uuid AS volume_id, NULL::integer AS gib, NULL::bigint AS gib_seconds \
         FROM generate_series(1, 400000) g",
    )
    .execute(&db)
    .await
    .unwrap();
    app.pool(&op, "h100-a", "h100").await;
    let req = Request::builder()
        .uri("/v1/admin/billing/usage/export?format=csv&from=2026-01-01T00:00:00Z&to=2026-02-01T00:00:00Z")
        .header("authorization", format!("Bearer {op}"))
        .body(Body::empty())
        .unwrap();
    let res = app.router.clone().oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK, "the first chunks were fine");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let killed: Option<(bool,)> = sqlx::query_as(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND query LIKE '%FROM usage_records r JOIN pools%' AND pid <> pg_backend_pid()",
        )
        .fetch_optional(&db)
        .await
        .unwrap();
        if killed.is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "the export query was never seen running");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut body = res.into_body();
    let mut received = 0usize;
    let failed = loop {
        match body.frame().await {
            Some(Ok(frame)) => received += frame.data_ref().map_or(0, |d| d.len()),
            Some(Err(_)) => break true,
            None => break false,
        }
    };
    assert!(received > 0, "streaming had begun");
    assert!(failed, "the body ends with an error, not a clean end, after {received} bytes");
}

#[sqlx::test]
async fn a_lost_database_connection_is_503_with_retry_after(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    // A request in flight when its connection is killed: hold it on a lock, then terminate its backend.
    let mut locker = db.begin().await.unwrap();
    sqlx::query("LOCK TABLE tenants IN ACCESS EXCLUSIVE MODE").execute(&mut *locker).await.unwrap();
    let router = app.router.clone();
    let token = op.clone();
    let request = tokio::spawn(async move {
        let req = Request::builder()
            .uri("/v1/admin/tenants")
            .header("authorization", format!("Bearer {token}"))
            .body(Body::empty())
            .unwrap();
        let res = router.oneshot(req).await.unwrap();
        let status = res.status();
        let retry_after = res.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string());
        let body: Value = serde_json::from_slice(&res.into_body().collect().await.unwrap().to_bytes()).unwrap();
        (status, retry_after, body)
    });
    // Polled outside the locking transaction: a transaction sees one snapshot of pg_stat_activity.
    let deadline = Instant::now() + Duration::from_secs(30);
    let pid = loop {
        let waiting: Option<(i32,)> = sqlx::query_as(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_optional(&db)
        .await
        .unwrap();
        if let Some((pid,)) = waiting {
            break pid;
        }
        assert!(Instant::now() < deadline, "the request never waited on the lock");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    sqlx::query("SELECT pg_terminate_backend($1)").bind(pid).execute(&db).await.unwrap();
    locker.rollback().await.unwrap();
    let (status, retry_after, body) = request.await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["code"], "service_unavailable");
    assert_eq!(retry_after.as_deref(), Some("5"));
    // A closed pool (no connection to be had) is the same.
    app.state.db.close().await;
    let res = app.get("/v1/admin/tenants", &op).await;
    let res = res.expect_problem(StatusCode::SERVICE_UNAVAILABLE, "service_unavailable");
    assert!(res.headers.contains_key("retry-after"));
}

#[sqlx::test]
async fn operators_create_list_rotate_and_revoke_operator_keys_but_never_the_last(db: PgPool) {
    let app = TestApp::new(db.clone());
    let first = app.operator().await;
    let (first_id,): (uuid::Uuid,) =
        sqlx::query_as("SELECT id FROM api_keys WHERE role = 'operator'").fetch_one(&db).await.unwrap();
    // The only operator key cannot be revoked.
    app.delete(&format!("/v1/admin/api-keys/{first_id}"), &first)
        .await
        .expect_problem(StatusCode::CONFLICT, "last_operator_key");
    // A second key: shown once, not cached, usable.
    let created = app.post("/v1/admin/api-keys", &first, json!({ "name": "second" })).await.expect(StatusCode::CREATED);
    assert_eq!(created.headers.get("cache-control").unwrap(), "no-store");
    assert_eq!(created.body["role"], "operator");
    let second_key = created.body["api_key"].as_str().unwrap().to_string();
    let second_id = created.body["id"].as_str().unwrap().to_string();
    let second = app.token_for(&second_key).await;
    let listed = app.get("/v1/admin/api-keys", &second).await.expect(StatusCode::OK).body;
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed[0]["last_used_at"].is_string() && listed[0]["prefix"].as_str().unwrap().starts_with("gpk_"));
    assert!(listed.iter().all(|k| k.get("api_key").is_none() && k["created_at"].is_string()), "no secrets");
    // Tenants see none of this.
    let (_, tenant) = app.tenant_admin(&first, "acme").await;
    app.get("/v1/admin/api-keys", &tenant).await.expect_problem(StatusCode::FORBIDDEN, "forbidden");
    // Now the first can go; its tokens stop working at once; then the second is the last.
    app.delete(&format!("/v1/admin/api-keys/{first_id}"), &second).await.expect(StatusCode::NO_CONTENT);
    app.get("/v1/admin/api-keys", &first).await.expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    app.delete(&format!("/v1/admin/api-keys/{second_id}"), &second)
        .await
        .expect_problem(StatusCode::CONFLICT, "last_operator_key");
    // Rotation: a new key now, the old one valid through its grace period.
    let rotated = app
        .post(&format!("/v1/admin/api-keys/{second_id}/rotate"), &second, json!({ "grace_seconds": 3600 }))
        .await
        .expect(StatusCode::CREATED);
    assert_eq!(rotated.body["replaces"], second_id.as_str());
    let third_key = rotated.body["api_key"].as_str().unwrap().to_string();
    let third = app.token_for(&third_key).await;
    app.token_for(&second_key).await; // still valid during the grace period
    app.post(&format!("/v1/admin/api-keys/{second_id}/rotate"), &third, json!({}))
        .await
        .expect_problem(StatusCode::CONFLICT, "key_not_rotatable");
    // Past its grace period the old key and its tokens are refused.
    sqlx::query("UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1::uuid")
        .bind(&second_id)
        .execute(&db)
        .await
        .unwrap();
    app.get("/v1/admin/api-keys", &second).await.expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    app.call(Method::POST, "/v1/auth/token", None, Some(json!({ "api_key": second_key })))
        .await
        .expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    // The sweep then marks it revoked as well; once.
    assert_eq!(gpuplane::auth::key_lifecycle::revoke_expired_keys(&db).await.unwrap(), 1);
    assert_eq!(gpuplane::auth::key_lifecycle::revoke_expired_keys(&db).await.unwrap(), 0);
    let (revoked,): (bool,) = sqlx::query_as("SELECT revoked_at IS NOT NULL FROM api_keys WHERE id = $1::uuid")
        .bind(&second_id)
        .fetch_one(&db)
        .await
        .unwrap();
    assert!(revoked);
    // Bad grace periods change nothing.
    let third_id = rotated.body["id"].as_str().unwrap();
    app.post(&format!("/v1/admin/api-keys/{third_id}/rotate"), &third, json!({ "grace_seconds": 604801 }))
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    // Every change is audited: who, what, when.
    let events = app.get("/v1/admin/audit-events", &third).await.expect(StatusCode::OK).body;
    let actions: Vec<(&str, &str)> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["tenant_id"].is_null())
        .map(|e| (e["action"].as_str().unwrap(), e["subject_key_id"].as_str().unwrap()))
        .collect();
    let first_id = first_id.to_string();
    assert_eq!(
        actions,
        [
            ("api_key.created", first_id.as_str()),
            ("api_key.created", second_id.as_str()),
            ("api_key.revoked", first_id.as_str()),
            ("api_key.created", third_id),
            ("api_key.rotated", second_id.as_str()),
        ]
    );
    let rotation = events["items"].as_array().unwrap().iter().find(|e| e["action"] == "api_key.rotated").unwrap();
    assert_eq!(rotation["actor_key_id"], second_id.as_str());
    assert_eq!(rotation["detail"]["successor_key_id"], third_id);
}

#[sqlx::test]
async fn tenant_admins_rotate_their_keys_with_a_grace_period(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    let (tenant_id, key) = app.tenant_key(&op, "acme", Role::TenantAdmin).await;
    let token = app.token_for(&key).await;
    let keys = app.get("/v1/tenant/api-keys", &token).await.expect(StatusCode::OK).body;
    let key_id = keys[0]["id"].as_str().unwrap();
    let rotated = app
        .post(&format!("/v1/tenant/api-keys/{key_id}/rotate"), &token, json!({ "grace_seconds": 0 }))
        .await
        .expect(StatusCode::CREATED);
    assert_eq!(rotated.headers.get("cache-control").unwrap(), "no-store");
    let new_key = rotated.body["api_key"].as_str().unwrap();
    app.token_for(new_key).await;
    // Grace 0: the old key is revoked at once.
    app.call(Method::POST, "/v1/auth/token", None, Some(json!({ "api_key": key })))
        .await
        .expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    // Another tenant's key is 404.
    let (_, other) = app.tenant_admin(&op, "other").await;
    app.post(&format!("/v1/tenant/api-keys/{key_id}/rotate"), &other, json!({}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "not_found");
    let (n,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM audit_events WHERE tenant_id = $1::uuid AND action = 'api_key.rotated'")
            .bind(&tenant_id)
            .fetch_one(&db)
            .await
            .unwrap();
    assert_eq!(n, 1);
}

fn throttled_app(db: PgPool, trust_forwarded_for: bool) -> axum::Router {
    let mut settings = Settings::new(Secret::new(crate::support::app::TEST_SECRET));
    settings.rate_limit = RateLimitArgs { auth_rate_per_minute: 1, auth_rate_burst: 5, trust_forwarded_for };
    build_router(AppState::new(db, settings).unwrap())
}

async fn token_attempt(router: &axum::Router, peer: &str, forwarded_for: Option<&str>) -> axum::response::Response {
    let mut req = Request::builder()
        .method("POST")
        .uri("/v1/auth/token")
        .header("content-type", "application/json")
        .body(Body::from(r#"{"api_key":"gpk_wrong"}"#))
        .unwrap();
    if let Some(xff) = forwarded_for {
        req.headers_mut().insert("x-forwarded-for", xff.parse().unwrap());
    }
    req.extensions_mut().insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
    router.clone().oneshot(req).await.unwrap()
}

#[sqlx::test]
async fn credential_endpoints_are_throttled_per_client_address(db: PgPool) {
    let router = throttled_app(db.clone(), false);
    for _ in 0..5 {
        assert_eq!(token_attempt(&router, "10.0.0.1:5000", None).await.status(), StatusCode::UNAUTHORIZED);
    }
    let res = token_attempt(&router, "10.0.0.1:5001", Some("192.0.2.1")).await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS, "X-Forwarded-For is not trusted by default");
    assert_eq!(res.headers().get("content-type").unwrap(), "application/problem+json");
    let wait: u64 = res.headers().get("retry-after").unwrap().to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    let body: Value = serde_json::from_slice(&res.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(body["code"], "rate_limited");
    // Agent registration shares the limit; another address has its own.
    let req = Request::builder()
        .method("POST")
        .uri("/v1/agent/register")
        .header("content-type", "application/json")
        .extension(ConnectInfo("10.0.0.1:5002".parse::<SocketAddr>().unwrap()))
        .body(Body::from("{}"))
        .unwrap();
    assert_eq!(router.clone().oneshot(req).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(token_attempt(&router, "10.0.0.2:5000", None).await.status(), StatusCode::UNAUTHORIZED);

    // Behind a proxy (trusted): the last X-Forwarded-For entry is the client.
    let router = throttled_app(db, true);
    for _ in 0..5 {
        let res = token_attempt(&router, "10.9.9.9:1", Some("203.0.113.7, 198.51.100.1")).await;
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    }
    let res = token_attempt(&router, "10.9.9.9:1", Some("203.0.113.8, 198.51.100.1")).await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS, "a spoofed first entry changes nothing");
    let res = token_attempt(&router, "10.9.9.9:1", Some("198.51.100.2")).await;
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "another client behind the same proxy");
}

#[sqlx::test]
async fn security_headers_and_no_library_internals_in_401s(db: PgPool) {
    let app = TestApp::new(db);
    let op = app.operator().await;
    for res in [
        app.get("/v1/admin/tenants", &op).await,
        app.get("/v1/nothing", &op).await,
        app.call(Method::GET, "/healthz", None, None).await,
    ] {
        assert_eq!(res.headers.get("x-content-type-options").unwrap(), "nosniff");
    }
    let key = gpuplane::auth::keys::generate().secret;
    let res = app.call(Method::POST, "/v1/auth/token", None, Some(json!({ "api_key": key }))).await;
    assert_eq!(res.expect(StatusCode::UNAUTHORIZED).headers.get("x-content-type-options").unwrap(), "nosniff");
    let key = app.add_key(&op, &app.tenant_key(&op, "acme", Role::TenantMember).await.0, Role::TenantMember).await;
    let res =
        app.call(Method::POST, "/v1/auth/token", None, Some(json!({ "api_key": key }))).await.expect(StatusCode::OK);
    assert_eq!(res.headers.get("cache-control").unwrap(), "no-store");
    let mut tampered = op.clone();
    tampered.push('x');
    for token in [tampered.as_str(), "a.b.c", "not-a-jwt"] {
        let res = app.get("/v1/admin/tenants", token).await.expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
        assert_eq!(res.body["detail"], "invalid access token");
    }
}
