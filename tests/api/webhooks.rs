//! Webhooks end to end: a real HTTP receiver on 127.0.0.1:0 verifies every Standard Webhooks signature with the
//! endpoint's secret, while the real delivery worker sends what the service emitted.

use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::http::StatusCode;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use gpuplane::webhooks::delivery::Worker;
use gpuplane::webhooks::{Audience, emit};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::app::TestApp;
use crate::support::webhooks::{
    Received, app, assert_signed, create_endpoint, deliver_until, spawn_receiver, types_of, worker,
};

#[sqlx::test]
async fn endpoints_are_validated_managed_and_show_their_secret_once(db: PgPool) {
    let app = app(db);
    let op = app.operator().await;
    let (tenant_id, admin) = app.tenant_admin(&op, "acme").await;
    let member = app.add_key(&op, &tenant_id, gpuplane::auth::Role::TenantMember).await;
    let member = app.token_for(&member).await;
    let created = app
        .post("/v1/webhooks", &admin, json!({ "url": "https://hooks.example.com/x", "event_types": ["lease.*"] }))
        .await
        .expect(StatusCode::CREATED);
    let secret = created.body["secret"].as_str().unwrap();
    assert!(secret.starts_with("whsec_"));
    assert_eq!(STANDARD.decode(&secret[6..]).unwrap().len(), 32);
    let id = created.body["id"].as_str().unwrap();
    let got = app.get(&format!("/v1/webhooks/{id}"), &admin).await.expect(StatusCode::OK);
    assert!(got.body.get("secret").is_none(), "the secret is shown at creation only");
    assert_eq!(got.body["enabled"], true);
    let listed = app.get("/v1/webhooks", &admin).await.expect(StatusCode::OK);
    assert_eq!(listed.body["items"].as_array().unwrap().len(), 1);
    let patched = app
        .patch(&format!("/v1/webhooks/{id}"), &admin, json!({ "event_types": ["*"], "enabled": false }))
        .await
        .expect(StatusCode::OK);
    assert_eq!((patched.body["event_types"].clone(), patched.body["enabled"].clone()), (json!(["*"]), json!(false)));

    let bad = app
        .post(
            "/v1/webhooks",
            &admin,
            json!({ "url": "ftp://x.example/", "event_types": ["lease.", "Lease.*", "*", "a..b"],
                    "description": "d".repeat(501) }),
        )
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    let mut fields = bad.error_fields();
    fields.sort();
    assert_eq!(fields, ["description", "event_types[0]", "event_types[1]", "event_types[3]", "url"]);
    app.post("/v1/webhooks", &admin, json!({ "url": "https://x.example/", "event_types": [] }))
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    app.post("/v1/webhooks", &member, json!({ "url": "https://x.example/", "event_types": ["*"] }))
        .await
        .expect_problem(StatusCode::FORBIDDEN, "forbidden");
    app.delete(&format!("/v1/webhooks/{id}"), &admin).await.expect(StatusCode::NO_CONTENT);
    app.get(&format!("/v1/webhooks/{id}"), &admin).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
}

#[sqlx::test]
async fn private_and_plain_http_urls_are_refused_without_the_flag_also_at_delivery(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    let (tenant_id, admin) = app.tenant_admin(&op, "acme").await;
    for url in [
        "https://127.0.0.1/hook",
        "https://localhost:8443/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://[fd00:ec2::254]/",
        "https://10.0.0.7/hook",
        "http://hooks.example.com/hook",
    ] {
        let res = app
            .post("/v1/webhooks", &admin, json!({ "url": url, "event_types": ["*"] }))
            .await
            .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
        assert_eq!(res.error_fields(), ["url"], "{url}");
    }
    // An endpoint whose address turned private after it was checked is refused when delivering, not called.
    let (receiver, url) = spawn_receiver().await;
    let endpoint_id = uuid::Uuid::now_v7();
    let sealed = app.state.settings.keyring.seal(
        gpuplane::secrets::Context::WebhookSecret { endpoint_id },
        gpuplane::webhooks::signing::new_secret().as_bytes(),
    );
    sqlx::query(
        "INSERT INTO webhook_endpoints (id, tenant_id, url, event_types, secret_key_id, secret_sealed) \
         VALUES ($1, $2::uuid, $3, '{*}', $4, $5)",
    )
    .bind(endpoint_id)
    .bind(&tenant_id)
    .bind(url.replace("http://", "https://"))
    .bind(&sealed.key_id)
    .bind(&sealed.bytes)
    .execute(&db)
    .await
    .unwrap();
    let mut tx = db.begin().await.unwrap();
    emit(&mut tx, Audience::Tenant(tenant_id.parse().unwrap()), "lease.started", json!({})).await.unwrap();
    tx.commit().await.unwrap();
    let worker = worker(&app);
    assert_eq!(worker.deliver_due(32).await.unwrap(), 1);
    assert!(receiver.requests.lock().unwrap().is_empty(), "nothing was sent to a loopback address");
    let (error,): (String,) = sqlx::query_as("SELECT error FROM webhook_attempts").fetch_one(&db).await.unwrap();
    assert!(error.contains("refused"), "{error}");
}

#[sqlx::test]
async fn lease_node_and_queue_events_are_delivered_signed(db: PgPool) {
    let app = app(db.clone());
    let worker = worker(&app);
    let (receiver, url) = spawn_receiver().await;
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let (_, tenant_secret) = create_endpoint(&app, &tenant, &url, json!(["lease.*"])).await;
    let (_, op_secret) = create_endpoint(&app, &op, &url, json!(["node.*", "queue.stalled", "gpu.*"])).await;
    let pool = app.pool(&op, "h100-a", "h100").await;
    let (node_id, _) = app.agent_node(&op, &pool, "node-a", 1).await;
    let lease = app
        .post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 1 }))
        .await
        .expect(StatusCode::CREATED);
    let lease_id = lease.body["id"].as_str().unwrap().to_string();
    let queued = app
        .post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 1, "queue": true }))
        .await
        .expect(StatusCode::CREATED);
    assert_eq!(queued.body["state"], "queued");
    // Expiring within the lead (an hour by default): raised once, however often the check runs.
    assert_eq!(gpuplane::webhooks::alerts::check_expiring(&db, Duration::from_secs(3600)).await.unwrap(), 1);
    assert_eq!(gpuplane::webhooks::alerts::check_expiring(&db, Duration::from_secs(3600)).await.unwrap(), 0);
    sqlx::query("UPDATE leases SET created_at = now() - interval '1 hour' WHERE state = 'queued'")
        .execute(&db)
        .await
        .unwrap();
    assert_eq!(gpuplane::webhooks::alerts::check_queue_stalled(&db, Duration::from_secs(60)).await.unwrap(), 1);
    assert_eq!(gpuplane::webhooks::alerts::check_queue_stalled(&db, Duration::from_secs(60)).await.unwrap(), 0);
    app.post(&format!("/v1/leases/{lease_id}/release"), &tenant, json!({})).await.expect(StatusCode::OK);
    // The queued lease starts on the freed GPU: the release wakes the queue in the background, and a sweep
    // skips a queue that is being started, so wait until it is active. Then its node goes silent: unreachable,
    // then offline.
    let queued_id = queued.body["id"].as_str().unwrap().to_string();
    crate::support::agents::wait_until("the queued lease to start", 15, || async {
        gpuplane::leases::sweeper::sweep_once(&app.state, false).await.unwrap();
        let (state,): (String,) = sqlx::query_as("SELECT state FROM leases WHERE id = $1::uuid")
            .bind(&queued_id)
            .fetch_one(&db)
            .await
            .unwrap();
        state == "active"
    })
    .await;
    sqlx::query("UPDATE nodes SET last_heartbeat_at = now() - interval '10 minutes' WHERE id = $1::uuid")
        .bind(&node_id)
        .execute(&db)
        .await
        .unwrap();
    app.sweep().await;

    let wanted = [
        "lease.started",
        "lease.queued",
        "lease.expiring",
        "queue.stalled",
        "lease.ended",
        "node.unreachable",
        "lease.node_unreachable",
        "node.offline",
    ];
    deliver_until(&worker, || {
        let got = types_of(&receiver);
        wanted.iter().all(|w| got.iter().any(|g| g == w))
    })
    .await;
    let ended: Vec<Received> =
        receiver.accepted.lock().unwrap().iter().filter(|r| r.body["type"] == "lease.ended").cloned().collect();
    assert!(
        ended.iter().any(|r| r.body["data"]["lease_id"] == lease_id.as_str() && r.body["data"]["reason"] == "released")
    );
    assert!(receiver.accepted.lock().unwrap().iter().all(|r| r.body["timestamp"].is_string()));
    // Every request carries a valid signature: the tenant's or the operators' secret, by type.
    for (headers, body) in receiver.requests.lock().unwrap().iter() {
        let value: Value = serde_json::from_slice(body).unwrap();
        let fleet = ["node.", "queue.", "gpu."].iter().any(|p| value["type"].as_str().unwrap().starts_with(p));
        assert_signed(headers, body, if fleet { &op_secret } else { &tenant_secret });
    }
    // The tenant's event list holds its events, never the fleet's.
    let events = app.get("/v1/events?limit=500", &tenant).await.expect(StatusCode::OK);
    let types: Vec<&str> =
        events.body["items"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert!(types.contains(&"lease.started") && !types.iter().any(|t| t.starts_with("node.")), "{types:?}");
    let fleet = app.get("/v1/events?type=node.offline", &op).await.expect(StatusCode::OK);
    assert_eq!(fleet.body["items"].as_array().unwrap().len(), 1);
}

/// A lease event is written once, in `lease_events`: the feed and the deliveries read it there (through the view
/// `event_log`), with the id, type and data the outbox's copy used to carry. Before migration 0036 each one was
/// also copied into `webhook_events`.
#[sqlx::test]
async fn a_lease_event_is_written_once_and_published_from_the_lease_events(db: PgPool) {
    let app = app(db.clone());
    let worker = worker(&app);
    let (receiver, url) = spawn_receiver().await;
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let (endpoint, _) = create_endpoint(&app, &tenant, &url, json!(["lease.*"])).await;
    let pool = app.pool(&op, "h100-a", "h100").await;
    app.agent_node(&op, &pool, "node-a", 1).await;
    let lease = app
        .post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 1 }))
        .await
        .expect(StatusCode::CREATED);
    let lease_id = lease.body["id"].as_str().unwrap().to_string();
    app.post(&format!("/v1/leases/{lease_id}/release"), &tenant, json!({})).await.expect(StatusCode::OK);

    let published: Vec<(uuid::Uuid, String)> = sqlx::query_as(
        "SELECT id, kind FROM lease_events WHERE lease_id = $1::uuid AND kind IN ('allocated', 'released') ORDER BY id",
    )
    .bind(&lease_id)
    .fetch_all(&db)
    .await
    .unwrap();
    assert_eq!(published.len(), 2, "{published:?}");
    let copies: i64 = sqlx::query_scalar("SELECT count(*) FROM webhook_events").fetch_one(&db).await.unwrap();
    assert_eq!(copies, 0, "no lease event is copied");

    // The feed: the lease events' own ids, as the types and data the outbox published.
    let feed = app.get("/v1/events", &tenant).await.expect(StatusCode::OK);
    let items = feed.body["items"].as_array().unwrap();
    let ids: Vec<String> = items.iter().map(|e| e["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(ids, published.iter().map(|(id, _)| id.to_string()).collect::<Vec<_>>());
    assert_eq!(items[0]["type"], "lease.started");
    assert_eq!(items[0]["data"]["lease_id"], lease_id.as_str());
    assert_eq!(items[0]["data"]["pool_id"], pool.as_str());
    assert_eq!(items[1]["type"], "lease.ended");
    assert_eq!(items[1]["data"]["reason"], "released");
    assert_eq!(items[1]["data"]["lease_id"], lease_id.as_str());

    // The deliveries name the same events, and the receiver gets them with those ids.
    let deliveries = app.get(&format!("/v1/webhooks/{endpoint}/deliveries"), &tenant).await.expect(StatusCode::OK);
    let mut delivered: Vec<String> = deliveries.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["event_id"].as_str().unwrap().to_string())
        .collect();
    delivered.sort();
    assert_eq!(delivered, ids);
    deliver_until(&worker, || receiver.accepted.lock().unwrap().len() == 2).await;
    let mut received: Vec<Value> = receiver.accepted.lock().unwrap().iter().map(|r| r.body.clone()).collect();
    received.sort_by_key(|b| b["type"].as_str().unwrap().to_string());
    assert_eq!(received[0]["type"], "lease.ended");
    assert_eq!(received[0]["data"]["reason"], "released");
    assert_eq!(received[0]["data"], items[1]["data"]);
    assert_eq!(received[1]["type"], "lease.started");
    assert_eq!(received[1]["data"], items[0]["data"]);
}

/// Migration 0036 on a database with lease events copied by the old outbox: the copies go, each pending delivery
/// still resolves to its event (now the lease event itself), and an old release's insert without a tenant is
/// still accepted (rolling upgrade).
#[sqlx::test(migrations = false)]
async fn migration_0036_keeps_every_delivery_of_a_copied_lease_event(db: PgPool) {
    let dir = std::env::temp_dir().join(format!("gpuplane-pre-0036-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    let migrations = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    for entry in std::fs::read_dir(&migrations).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".sql") && name.as_str() < "0036" {
            std::fs::copy(migrations.join(&name), dir.join(&name)).unwrap();
        }
    }
    sqlx::migrate::Migrator::new(dir.as_path()).await.unwrap().run(&db).await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let (tenant, pool, lease, event) =
        (uuid::Uuid::now_v7(), uuid::Uuid::now_v7(), uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
    for (sql, id) in [
        ("INSERT INTO tenants (id, name) VALUES ($1, 'acme')", tenant),
        (
            "INSERT INTO pools (id, name, gpu_model, region, price_per_gpu_hour_minor, currency) \
             VALUES ($1, 'h100-a', 'h100', 'eu-west', 250, 'USD')",
            pool,
        ),
    ] {
        sqlx::query(sql).bind(id).execute(&db).await.unwrap();
    }
    sqlx::query(
        "INSERT INTO webhook_endpoints (id, tenant_id, url, event_types, secret) \
         VALUES ($1, $2, 'https://example.com/hook', '{lease.*}', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')",
    )
    .bind(uuid::Uuid::now_v7())
    .bind(tenant)
    .execute(&db)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO leases (id, tenant_id, pool_id, gpu_count, placement, term, duration_hours, state) \
         VALUES ($1, $2, $3, 1, 'pack', 'hourly', 1, 'queued')",
    )
    .bind(lease)
    .bind(tenant)
    .bind(pool)
    .execute(&db)
    .await
    .unwrap();
    sqlx::query("INSERT INTO lease_events (id, lease_id, kind, actor) VALUES ($1, $2, 'allocated', 'system')")
        .bind(event)
        .bind(lease)
        .execute(&db)
        .await
        .unwrap();
    let before: (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM webhook_events WHERE id = $1), \
                (SELECT count(*) FROM webhook_deliveries WHERE event_id = $1)",
    )
    .bind(event)
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(before, (1, 1), "the old outbox copied the event and made its delivery");

    gpuplane::db::MIGRATOR.run(&db).await.unwrap();
    let copies: i64 = sqlx::query_scalar("SELECT count(*) FROM webhook_events").fetch_one(&db).await.unwrap();
    assert_eq!(copies, 0);
    let (event_type, data): (String, Value) =
        sqlx::query_as("SELECT ev.type, ev.data FROM webhook_deliveries d JOIN event_log ev ON ev.id = d.event_id")
            .fetch_one(&db)
            .await
            .unwrap();
    assert_eq!(event_type, "lease.started");
    assert_eq!(data, json!({ "lease_id": lease, "pool_id": pool }));
    // A replica of the previous release writes a lease event without its tenant: filled in from the lease.
    sqlx::query("INSERT INTO lease_events (id, lease_id, kind, actor) VALUES ($1, $2, 'released', 'system')")
        .bind(uuid::Uuid::now_v7())
        .bind(lease)
        .execute(&db)
        .await
        .unwrap();
    let tenants: Vec<uuid::Uuid> =
        sqlx::query_scalar("SELECT tenant_id FROM lease_events ORDER BY id").fetch_all(&db).await.unwrap();
    assert_eq!(tenants, vec![tenant, tenant]);
    let deliveries: i64 = sqlx::query_scalar("SELECT count(*) FROM webhook_deliveries").fetch_one(&db).await.unwrap();
    assert_eq!(deliveries, 2, "the new event has its delivery too");
}

#[sqlx::test]
async fn a_fatal_xid_and_an_issued_invoice_are_delivered(db: PgPool) {
    let app = app(db.clone());
    let worker = worker(&app);
    let (receiver, url) = spawn_receiver().await;
    let op = app.operator().await;
    let (tenant_id, tenant) = app.tenant_admin(&op, "acme").await;
    create_endpoint(&app, &tenant, &url, json!(["invoice.issued"])).await;
    let (_, op_secret) = create_endpoint(&app, &op, &url, json!(["gpu.unhealthy"])).await;
    let pool = app.pool(&op, "h100-a", "h100").await;
    let (_, agent) = app.agent_node(&op, &pool, "node-a", 1).await;
    let sample = json!({ "gpu_index": 0, "at": chrono::Utc::now(), "gpu_util": 0.0, "mem_copy_util": 0.0,
        "fb_used_mib": 0, "fb_free_mib": 81559, "power_w": 100.0, "energy_mj": 1, "gpu_temp_c": 40.0,
        "mem_temp_c": 40.0, "sm_clock_mhz": 1980, "nvlink_bandwidth_gbps": 0.0, "xid_count": 1, "xid_codes": [79] });
    app.post("/v1/agent/heartbeat", &agent, json!({ "samples": [sample] })).await.expect(StatusCode::OK);
    let invoice_id = uuid::Uuid::now_v7();
    sqlx::query(
        "INSERT INTO invoices (id, tenant_id, month, currency, state, usage_minor, credits_minor, total_minor, lines) \
         VALUES ($1, $2::uuid, '2026-01-01', 'USD', 'draft', 100, 0, 100, '[]')",
    )
    .bind(invoice_id)
    .bind(&tenant_id)
    .execute(&db)
    .await
    .unwrap();
    app.post(&format!("/v1/admin/invoices/{invoice_id}/issue"), &op, json!({})).await.expect(StatusCode::OK);
    deliver_until(&worker, || types_of(&receiver).len() == 2).await;
    let got = receiver.accepted.lock().unwrap().clone();
    let xid = got.iter().find(|r| r.body["type"] == "gpu.unhealthy").unwrap();
    assert_eq!(xid.body["data"]["xid"], json!([79]));
    let invoice = got.iter().find(|r| r.body["type"] == "invoice.issued").unwrap();
    assert_eq!(invoice.body["data"]["id"], invoice_id.to_string());
    let requests = receiver.requests.lock().unwrap();
    let (headers, body) = requests.iter().find(|(h, _)| h["webhook-id"] == xid.id.as_str()).unwrap();
    assert_signed(headers, body, &op_secret);
}

#[sqlx::test]
async fn a_failing_receiver_gets_retries_with_the_same_id_and_the_log_shows_each_attempt(db: PgPool) {
    let app = app(db.clone());
    let worker = worker(&app);
    let (receiver, url) = spawn_receiver().await;
    receiver.fail.store(2, Ordering::SeqCst);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let (endpoint, secret) = create_endpoint(&app, &tenant, &url, json!(["*"])).await;
    let test =
        app.post(&format!("/v1/webhooks/{endpoint}/test"), &tenant, json!({})).await.expect(StatusCode::ACCEPTED);
    let delivery_id = test.body["id"].as_str().unwrap().to_string();
    deliver_until(&worker, || !receiver.accepted.lock().unwrap().is_empty()).await;
    let requests = receiver.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 3, "two failures, then the success");
    let ids: Vec<&str> = requests.iter().map(|(h, _)| h["webhook-id"].to_str().unwrap()).collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "one webhook-id across retries: {ids:?}");
    for (headers, body) in &requests {
        assert_signed(headers, body, &secret);
    }
    let deliveries = app.get(&format!("/v1/webhooks/{endpoint}/deliveries"), &tenant).await.expect(StatusCode::OK);
    let delivery = &deliveries.body["items"][0];
    assert_eq!((delivery["state"].as_str(), delivery["attempts"].as_i64()), (Some("succeeded"), Some(3)));
    let log: Vec<(bool, i64)> = delivery["attempt_log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["succeeded"].as_bool().unwrap(), a["response_code"].as_i64().unwrap()))
        .collect();
    assert_eq!(log, [(false, 500), (false, 500), (true, 204)]);
    // Failing past the schedule: failed; a manual retry sends it once more.
    receiver.fail.store(10, Ordering::SeqCst);
    app.post(&format!("/v1/webhooks/{endpoint}/deliveries/{delivery_id}/retry"), &tenant, json!({}))
        .await
        .expect(StatusCode::ACCEPTED);
    let test2 =
        app.post(&format!("/v1/webhooks/{endpoint}/test"), &tenant, json!({})).await.expect(StatusCode::ACCEPTED);
    let failing = test2.body["id"].as_str().unwrap().to_string();
    let db2 = db.clone();
    let state_of = move |id: String| {
        let db = db2.clone();
        async move {
            let (s,): (String,) = sqlx::query_as("SELECT state FROM webhook_deliveries WHERE id = $1::uuid")
                .bind(id)
                .fetch_one(&db)
                .await
                .unwrap();
            s
        }
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while state_of(failing.clone()).await != "failed" {
        assert!(tokio::time::Instant::now() < deadline);
        worker.deliver_due(32).await.unwrap();
    }
    let (attempts,): (i32,) = sqlx::query_as("SELECT attempts FROM webhook_deliveries WHERE id = $1::uuid")
        .bind(&failing)
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(attempts, 4, "the first attempt and the three retries of the schedule");
}

#[sqlx::test]
async fn an_endpoint_failing_for_days_is_disabled_with_an_operator_event(db: PgPool) {
    let app = app(db.clone());
    let worker = worker(&app);
    let (receiver, url) = spawn_receiver().await;
    receiver.fail.store(100, Ordering::SeqCst);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let (endpoint, _) = create_endpoint(&app, &tenant, &url, json!(["*"])).await;
    sqlx::query("UPDATE webhook_endpoints SET failing_since = now() - interval '6 days'").execute(&db).await.unwrap();
    app.post(&format!("/v1/webhooks/{endpoint}/test"), &tenant, json!({})).await.expect(StatusCode::ACCEPTED);
    worker.deliver_due(32).await.unwrap();
    let got = app.get(&format!("/v1/webhooks/{endpoint}"), &tenant).await.expect(StatusCode::OK);
    assert_eq!(got.body["enabled"], false);
    assert!(got.body["disabled_reason"].as_str().unwrap().contains("failed"));
    let events = app.get("/v1/events?type=webhook.disabled", &op).await.expect(StatusCode::OK);
    assert_eq!(events.body["items"][0]["data"]["endpoint_id"], endpoint.as_str());
    // Enabling it again clears the failure history.
    let enabled = app
        .patch(&format!("/v1/webhooks/{endpoint}"), &tenant, json!({ "enabled": true }))
        .await
        .expect(StatusCode::OK);
    assert!(enabled.body["disabled_reason"].is_null());
}

#[sqlx::test]
async fn an_event_committed_while_no_worker_runs_is_delivered_by_a_fresh_one(db: PgPool) {
    let (receiver, url) = spawn_receiver().await;
    let (lease_id, secret) = {
        // The first service: commits a change with its event, and dies before any worker ran.
        let app = app(db.clone());
        let op = app.operator().await;
        let (_, tenant) = app.tenant_admin(&op, "acme").await;
        let (_, secret) = create_endpoint(&app, &tenant, &url, json!(["lease.started"])).await;
        let pool = app.pool(&op, "h100-a", "h100").await;
        app.node(&op, &pool, "node-a", 1).await;
        let lease = app
            .post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 1 }))
            .await
            .expect(StatusCode::CREATED);
        (lease.body["id"].as_str().unwrap().to_string(), secret)
    };
    assert!(receiver.requests.lock().unwrap().is_empty());
    // A fresh service on the same database (a new state, a new worker) delivers it.
    let fresh = app(db.clone());
    let shutdown = tokio_util::sync::CancellationToken::new();
    let background = tokio::spawn(gpuplane::workers::webhook_delivery(fresh.state.clone(), shutdown.clone()));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while receiver.accepted.lock().unwrap().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "not delivered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shutdown.cancel();
    background.await.unwrap();
    let got = receiver.accepted.lock().unwrap()[0].clone();
    assert_eq!(got.body["data"]["lease_id"], lease_id.as_str());
    let (headers, body) = receiver.requests.lock().unwrap()[0].clone();
    assert_signed(&headers, &body, &secret);
}

#[sqlx::test]
async fn two_workers_never_deliver_one_delivery_twice(db: PgPool) {
    let app = app(db.clone());
    let (receiver, url) = spawn_receiver().await;
    let op = app.operator().await;
    let (tenant_id, tenant) = app.tenant_admin(&op, "acme").await;
    create_endpoint(&app, &tenant, &url, json!(["*"])).await;
    let mut tx = db.begin().await.unwrap();
    for i in 0..200 {
        emit(&mut tx, Audience::Tenant(tenant_id.parse().unwrap()), "lease.started", json!({ "n": i })).await.unwrap();
    }
    tx.commit().await.unwrap();
    let (a, b) = (worker(&app), worker(&app));
    let run = |w: Worker| async move { while w.deliver_due(8).await.unwrap() > 0 {} };
    tokio::join!(run(a), run(b));
    let ids: Vec<String> =
        receiver.requests.lock().unwrap().iter().map(|(h, _)| h["webhook-id"].to_str().unwrap().to_string()).collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!((ids.len(), unique.len()), (200, 200), "each delivered exactly once");
}

#[sqlx::test]
async fn another_tenants_endpoints_deliveries_and_events_are_not_found(db: PgPool) {
    let app = app(db.clone());
    let op = app.operator().await;
    let (_, a) = app.tenant_admin(&op, "acme").await;
    let (_, b) = app.tenant_admin(&op, "globex").await;
    let (endpoint, _) = create_endpoint(&app, &a, "https://hooks.example.com/a", json!(["*"])).await;
    let (op_endpoint, _) = create_endpoint(&app, &op, "https://hooks.example.com/ops", json!(["*"])).await;
    let test = app.post(&format!("/v1/webhooks/{endpoint}/test"), &a, json!({})).await.expect(StatusCode::ACCEPTED);
    let delivery = test.body["id"].as_str().unwrap();
    for id in [&endpoint, &op_endpoint] {
        app.get(&format!("/v1/webhooks/{id}"), &b).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
        app.patch(&format!("/v1/webhooks/{id}"), &b, json!({ "enabled": false }))
            .await
            .expect_problem(StatusCode::NOT_FOUND, "not_found");
        app.get(&format!("/v1/webhooks/{id}/deliveries"), &b).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
        app.post(&format!("/v1/webhooks/{id}/test"), &b, json!({}))
            .await
            .expect_problem(StatusCode::NOT_FOUND, "not_found");
        app.delete(&format!("/v1/webhooks/{id}"), &b).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    }
    app.post(&format!("/v1/webhooks/{endpoint}/deliveries/{delivery}/retry"), &b, json!({}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "not_found");
    app.get(&format!("/v1/webhooks/{endpoint}"), &op).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    assert_eq!(app.get("/v1/webhooks", &b).await.expect(StatusCode::OK).body["items"], json!([]));
    let ops = app.get("/v1/webhooks", &op).await.expect(StatusCode::OK);
    assert_eq!(ops.body["items"].as_array().unwrap().len(), 1);
    assert_eq!(app.get("/v1/events", &b).await.expect(StatusCode::OK).body["items"], json!([]));
    assert_eq!(app.get("/v1/events", &a).await.expect(StatusCode::OK).body["items"].as_array().unwrap().len(), 1);
}

/// The audience rule (`webhook_in_audience`, migration 0021) is an index condition: the outbox's fan-out to a
/// tenant's endpoints and a page of a tenant's or the fleet's events read their audience's index entries, not
/// every tenant's rows. With sequential scans priced out, `tenant_id IS NOT DISTINCT FROM $1` (the form before)
/// still gives a filter over a whole index or table, and this test fails; so does any plan that sorts a page.
#[sqlx::test]
async fn audience_reads_are_served_by_the_audience_indexes(db: PgPool) {
    let tenant = uuid::Uuid::now_v7();
    let mut conn = db.acquire().await.unwrap();
    sqlx::query("SET enable_seqscan = off").execute(&mut *conn).await.unwrap();
    let plans = [
        (
            "SELECT e.id FROM webhook_endpoints e WHERE webhook_in_audience(e.tenant_id, $1) AND e.enabled",
            "webhook_endpoints_tenant_idx",
            "webhook_endpoints_tenant_idx",
        ),
        // A page of the event log (`GET /v1/events`): a merge of the two tables' ordered audience scans, the
        // lease events' branch gone for the operators (a lease event always has a tenant).
        (
            "SELECT id FROM event_log WHERE webhook_in_audience(tenant_id, $1) AND id > '00000000-0000-0000-0000-000000000000' ORDER BY id LIMIT 51",
            "webhook_events_tenant_idx",
            "webhook_events_fleet_idx",
        ),
        (
            "SELECT id FROM event_log WHERE webhook_in_audience(tenant_id, $1) AND id > '00000000-0000-0000-0000-000000000000' ORDER BY id LIMIT 51",
            "lease_events_tenant_idx",
            "webhook_events_fleet_idx",
        ),
    ];
    for (sql, tenant_index, fleet_index) in plans {
        for (audience, index) in [(Some(tenant), tenant_index), (None, fleet_index)] {
            let lines: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("EXPLAIN {sql}")))
                .bind(audience)
                .fetch_all(&mut *conn)
                .await
                .unwrap();
            let plan = lines.join("\n");
            assert!(
                plan.contains(&format!("Index Scan using {index}"))
                    || plan.contains(&format!("Index Only Scan using {index}"))
                    || plan.contains(&format!("Bitmap Index Scan on {index}")),
                "{audience:?}: {plan}"
            );
            let filters_audience = plan.lines().any(|l| l.contains("Filter") && l.contains("tenant_id"));
            // A sort node (a Merge Append's "Sort Key" is the merge of ordered scans, not a sort).
            let sorts = plan.lines().any(|l| {
                let node = l.trim_start().trim_start_matches("->").trim_start();
                (node.starts_with("Sort ") || node.starts_with("Incremental Sort ")) && node.contains("(cost=")
            });
            assert!(!sorts && !filters_audience, "{audience:?}: {plan}");
        }
    }
}

/// A pool with one 1-GPU node, that node's agent token, the tenant's 1-hour lease of the GPU, and a template
/// `sleeper` running `/bin/sleep SECS`: (agent token, lease id).
async fn sleeper_on_a_leased_gpu(app: &TestApp, op: &str, tenant: &str, secs: &str) -> (String, String) {
    let pool = app.pool(op, "h100-a", "h100").await;
    let node: uuid::Uuid = app.node(op, &pool, "node-a", 1).await.parse().unwrap();
    let agent = app.state.tokens.issue_agent(node, 1).unwrap();
    let lease = app
        .post("/v1/leases", tenant, json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 1 }))
        .await
        .expect(StatusCode::CREATED);
    app.post("/v1/admin/templates", op, json!({"name": "sleeper", "argv": ["/bin/sleep", secs]}))
        .await
        .expect(StatusCode::CREATED);
    (agent, lease.body["id"].as_str().unwrap().to_string())
}

#[sqlx::test]
async fn job_state_changes_are_delivered_signed(db: PgPool) {
    let app = app(db.clone());
    let worker = worker(&app);
    let (receiver, url) = spawn_receiver().await;
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let (_, secret) = create_endpoint(&app, &tenant, &url, json!(["job.*"])).await;
    let (agent, lease_id) = sleeper_on_a_leased_gpu(&app, &op, &tenant, "1").await;
    let lease_id = lease_id.as_str();
    let mut jobs = Vec::new();
    for outcome in [json!({"state": "succeeded", "exit_code": 0}), json!({"state": "failed", "exit_code": 3})] {
        let job = app
            .post(&format!("/v1/leases/{lease_id}/jobs"), &tenant, json!({ "template": "sleeper" }))
            .await
            .expect(StatusCode::CREATED);
        jobs.push(job.body["id"].as_str().unwrap().to_string());
        let list = app.get("/v1/agent/assignments", &agent).await.expect(StatusCode::OK).body;
        let jn = list["assignments"][0]["job_node_id"].as_str().unwrap().to_string();
        let path = format!("/v1/agent/assignments/{jn}/status");
        app.post(&path, &agent, json!({"state": "running"})).await.expect(StatusCode::OK);
        app.post(&path, &agent, outcome).await.expect(StatusCode::OK);
    }
    deliver_until(&worker, || types_of(&receiver).len() == 4).await;
    let got: Vec<(String, String)> = receiver
        .accepted
        .lock()
        .unwrap()
        .iter()
        .map(|r| (r.body["type"].as_str().unwrap().to_string(), r.body["data"]["job_id"].as_str().unwrap().to_string()))
        .collect();
    for (t, job) in
        [("job.started", &jobs[0]), ("job.succeeded", &jobs[0]), ("job.started", &jobs[1]), ("job.failed", &jobs[1])]
    {
        assert!(got.contains(&(t.to_string(), job.clone())), "{t} {job}: {got:?}");
    }
    for (headers, body) in receiver.requests.lock().unwrap().iter() {
        assert_signed(headers, body, &secret);
    }
}

#[sqlx::test]
async fn low_utilization_of_a_running_job_is_alerted_once_until_it_clears(db: PgPool) {
    let app = app(db.clone());
    let worker = worker(&app);
    let (receiver, url) = spawn_receiver().await;
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let (_, secret) = create_endpoint(&app, &tenant, &url, json!(["utilization.low"])).await;
    let (agent, lease_id) = sleeper_on_a_leased_gpu(&app, &op, &tenant, "600").await;
    let lease_id: uuid::Uuid = lease_id.parse().unwrap();
    let job = app
        .post(&format!("/v1/leases/{lease_id}/jobs"), &tenant, json!({ "template": "sleeper" }))
        .await
        .expect(StatusCode::CREATED);
    let job_path = format!("/v1/jobs/{}", job.body["id"].as_str().unwrap());
    assert_eq!(job.body["insights"], Value::Null, "not evaluated yet");
    let jn = app.get("/v1/agent/assignments", &agent).await.body["assignments"][0]["job_node_id"]
        .as_str()
        .unwrap()
        .to_string();
    app.post(&format!("/v1/agent/assignments/{jn}/status"), &agent, json!({"state": "running"}))
        .await
        .expect(StatusCode::OK);
    // Ten minutes running, its GPU at 35% for the last five (the samples as the insights test writes them).
    sqlx::query("UPDATE jobs SET started_at = now() - interval '10 minutes'").execute(&db).await.unwrap();
    crate::support::app::write_lease_samples(&db, lease_id, 35.0).await;
    use gpuplane::leases::insights::check_utilization;
    assert_eq!(check_utilization(&db).await.unwrap(), 1);
    assert_eq!(check_utilization(&db).await.unwrap(), 0, "one alert until it clears");
    deliver_until(&worker, || types_of(&receiver).len() == 1).await;
    let got = receiver.accepted.lock().unwrap()[0].clone();
    assert_eq!(got.body["data"]["lease_id"], lease_id.to_string());
    assert!(got.body["data"]["message"].as_str().unwrap().contains("35%"));
    let (headers, body) = receiver.requests.lock().unwrap()[0].clone();
    assert_signed(&headers, &body, &secret);
    // Busy again: the condition clears; it can be raised anew later.
    sqlx::query("DELETE FROM telemetry_raw").execute(&db).await.unwrap();
    crate::support::app::write_lease_samples(&db, lease_id, 95.0).await;
    assert_eq!(check_utilization(&db).await.unwrap(), 0);
    let (left,): (i64,) = sqlx::query_as("SELECT count(*) FROM webhook_alerts").fetch_one(&db).await.unwrap();
    assert_eq!(left, 0, "cleared");
    // What the evaluation saw is kept with the job, and stays once the job has ended (the lease shows nothing
    // then: no job runs on it).
    sqlx::query("DELETE FROM telemetry_raw").execute(&db).await.unwrap();
    crate::support::app::write_lease_samples(&db, lease_id, 35.0).await;
    check_utilization(&db).await.unwrap();
    app.post(&format!("/v1/agent/assignments/{jn}/status"), &agent, json!({"state": "succeeded", "exit_code": 0}))
        .await
        .expect(StatusCode::OK);
    let ended = app.get(&job_path, &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(ended["state"], "succeeded");
    assert_eq!(ended["insights"]["insights"][0]["kind"], "low_utilization", "{ended}");
    assert!(ended["insights"]["at"].is_string());
    let lease = app.get(&format!("/v1/leases/{lease_id}/insights"), &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(lease["job_id"], Value::Null);
}

/// Hostile input on the new paths: control characters (NUL included) in a URL, a description and an event type,
/// an overflowing number, another tenant's ids, a type filter with NUL: each a 422 or 404 that changes nothing.
#[sqlx::test]
async fn hostile_input_is_refused_and_changes_nothing(db: PgPool) {
    let app = app(db.clone());
    let op = app.operator().await;
    let (_, a) = app.tenant_admin(&op, "acme").await;
    let (_, b) = app.tenant_admin(&op, "globex").await;
    for (body, field) in [
        (json!({ "url": "https://x.example/\u{0}", "event_types": ["*"] }), "url"),
        (json!({ "url": "https://x.example/", "event_types": ["*"], "description": "a\u{0}b" }), "description"),
        (json!({ "url": "https://x.example/", "event_types": ["lease.\u{0}"] }), "event_types[0]"),
    ] {
        let res = app
            .post("/v1/webhooks", &a, body)
            .await
            .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
        assert_eq!(res.error_fields(), [field], "{}", res.body);
    }
    let res = app.get("/v1/events?limit=99999999999999999999", &a).await;
    res.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    app.get("/v1/events?type=%00", &a).await.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    let (id, _) = create_endpoint(&app, &a, "http://127.0.0.1:9/hook", json!(["*"])).await;
    let other = json!({ "enabled": false });
    app.patch(&format!("/v1/webhooks/{id}"), &b, other).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    app.post(&format!("/v1/webhooks/{id}/test"), &b, json!({}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "not_found");
    // A path trick is an id that names nothing (malformed ids are 404 everywhere, as in errors.rs).
    app.get("/v1/webhooks/..%2F..%2Fadmin", &a).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    let (count,): (i64,) = sqlx::query_as("SELECT count(*) FROM webhook_endpoints").fetch_one(&db).await.unwrap();
    assert_eq!(count, 1, "only the one valid endpoint exists");
    let enabled = app.get(&format!("/v1/webhooks/{id}"), &a).await.expect(StatusCode::OK).body["enabled"].clone();
    assert_eq!(enabled, true, "another tenant's PATCH changed nothing");
}
