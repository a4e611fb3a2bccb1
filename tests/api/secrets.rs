//! Secrets at rest: webhook signing secrets and job secret values are stored sealed (AES-256-GCM) under the
//! service's keyring, so a dump of the database holds none of them in clear; they still sign webhooks and reach
//! the agents; rotation re-seals them under a new key; rows written in clear before migration 0027 are sealed at
//! start; every response that carries a secret is `Cache-Control: no-store`.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use gpuplane::config::{Secret, Settings};
use gpuplane::secrets::sealing::{self, Scope};
use gpuplane::secrets::{Context, Keyring};
use gpuplane::webhooks::delivery::Worker;
use gpuplane::{AppState, build_router};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::app::{Response, TEST_SECRET, TestApp};
use crate::support::webhooks::{assert_signed, deliver_until, spawn_receiver};

pub const K1: &str = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
pub const K2: &str = "k2:Hx4dHBsaGRgXFhUUExIREA8ODQwLCgkIBwYFBAMCAQA";
const K3: &str = "k3:ZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmZmY=";
const JOB_SECRET: &str = "hf_job-secret-value-0123456789";

/// The service with `keyring`, allowed to post webhooks to this machine.
pub fn app_with(db: PgPool, keyring: &str) -> TestApp {
    let mut settings = Settings::new(Secret::new(TEST_SECRET));
    settings.webhooks.allow_private = true;
    settings.webhooks.retry_schedule = vec![Duration::ZERO; 3];
    settings.keyring = Arc::new(Keyring::parse(keyring).unwrap());
    let state = AppState::new(db.clone(), settings).unwrap();
    TestApp { router: build_router(state.clone()), db, state }
}

fn worker(app: &TestApp) -> Worker {
    Worker::new(app.db.clone(), app.state.settings.webhooks.clone(), app.state.settings.keyring.clone())
}

/// What the tests store: a tenant's webhook endpoint and an operator's, and a job with a secret value.
struct Stored {
    op: String,
    tenant: String,
    tenant_endpoint: (String, String),
    operator_endpoint: (String, String),
    agent: String,
}

async fn store_secrets(app: &TestApp, url: &str) -> Stored {
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    // Subscribed to an event none of these tests raises: the receiver gets the test events only.
    let tenant_endpoint = crate::support::webhooks::create_endpoint(app, &tenant, url, json!(["queue.stalled"])).await;
    let operator_endpoint = crate::support::webhooks::create_endpoint(app, &op, url, json!(["queue.stalled"])).await;
    let pool = app.pool(&op, "h100-pool", "h100").await;
    let node = app.node(&op, &pool, "node-0", 1).await;
    app.post("/v1/admin/templates", &op, json!({"name": "sleeper", "argv": ["/bin/sleep", "600"]}))
        .await
        .expect(StatusCode::CREATED);
    let lease = app
        .post("/v1/leases", &tenant, json!({ "pool_id": pool, "gpu_count": 1, "duration_hours": 1 }))
        .await
        .expect(StatusCode::CREATED);
    let lease_id = lease.body["id"].as_str().unwrap();
    app.post(
        &format!("/v1/leases/{lease_id}/jobs"),
        &tenant,
        json!({ "template": "sleeper", "secret_env": { "HF_TOKEN": JOB_SECRET } }),
    )
    .await
    .expect(StatusCode::CREATED);
    let agent = app.state.tokens.issue_agent(node.parse().unwrap(), 1).unwrap();
    Stored { op, tenant, tenant_endpoint, operator_endpoint, agent }
}

/// Every table of the database as text, one row a line: what `pg_dump` or a read replica gives away. bytea
/// columns come out as hex.
async fn dump(db: &PgPool) -> String {
    let tables: Vec<(String,)> = sqlx::query_as(
        "SELECT table_name::text FROM information_schema.tables \
         WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1",
    )
    .fetch_all(db)
    .await
    .unwrap();
    assert!(tables.iter().any(|t| t.0 == "webhook_endpoints") && tables.iter().any(|t| t.0 == "job_secrets"));
    let mut text = String::new();
    for (table,) in tables {
        let (rows,): (String,) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT COALESCE(string_agg(t::text, E'\\n'), '') FROM \"{table}\" t"
        )))
        .fetch_one(db)
        .await
        .unwrap();
        text.push_str(&rows);
        text.push('\n');
    }
    text
}

/// Assert that `dump` holds none of `secrets`, in clear, in hex, or (webhook secrets) as their base64 key.
#[track_caller]
fn assert_no_secret_in(dump: &str, secrets: &[&str]) {
    for secret in secrets {
        let hex: String = secret.bytes().map(|b| format!("{b:02x}")).collect();
        let key = secret.strip_prefix("whsec_").unwrap_or(secret);
        for form in [*secret, hex.as_str(), key] {
            assert!(!dump.contains(form), "the dump holds a secret ({form})");
        }
    }
}

/// The job's secret value as the agent of its node receives it.
async fn agent_sees_job_secret(app: &TestApp, agent: &str) -> Value {
    let list = app.get("/v1/agent/assignments", agent).await.expect(StatusCode::OK);
    assert_eq!(list.headers["cache-control"], "no-store", "assignments carry secret values");
    list.body["assignments"][0]["spec"]["env"]["HF_TOKEN"].clone()
}

/// Send a test event to `endpoint` and check that it arrives signed with `secret`.
async fn assert_delivered_signed(app: &TestApp, token: &str, endpoint: &(String, String)) {
    let res = app.post(&format!("/v1/webhooks/{}/test", endpoint.0), token, json!({})).await;
    let delivery = res.expect(StatusCode::ACCEPTED).body["id"].as_str().unwrap().to_string();
    let worker = worker(app);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let (state, code): (String, Option<i32>) =
            sqlx::query_as("SELECT state, last_status_code FROM webhook_deliveries WHERE id = $1::uuid")
                .bind(&delivery)
                .fetch_one(&app.db)
                .await
                .unwrap();
        if state != "pending" {
            assert_eq!((state.as_str(), code), ("succeeded", Some(204)), "delivery {delivery}");
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "not delivered in time");
        if worker.deliver_due(32).await.unwrap() == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[sqlx::test]
async fn a_dump_of_the_database_holds_no_secret_in_clear_and_webhooks_still_sign(db: PgPool) {
    let app = app_with(db.clone(), K1);
    let (receiver, url) = spawn_receiver().await;
    let s = store_secrets(&app, &url).await;
    let secrets = [s.tenant_endpoint.1.as_str(), s.operator_endpoint.1.as_str(), JOB_SECRET];
    assert_no_secret_in(&dump(&db).await, &secrets);
    // Stored sealed under the current key, nothing in the clear columns.
    let (key_id, clear, len): (String, Option<String>, i32) = sqlx::query_as(
        "SELECT secret_key_id, secret, octet_length(secret_sealed) FROM webhook_endpoints WHERE id = $1::uuid",
    )
    .bind(&s.tenant_endpoint.0)
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!((key_id.as_str(), clear, len), ("k1", None, 29 + 50));
    let (key_id, clear): (String, Option<String>) =
        sqlx::query_as("SELECT value_key_id, value FROM job_secrets").fetch_one(&db).await.unwrap();
    assert_eq!((key_id.as_str(), clear), ("k1", None));

    // The service still signs with each endpoint's own secret, and the agent still gets the job's value.
    assert_delivered_signed(&app, &s.tenant, &s.tenant_endpoint).await;
    assert_delivered_signed(&app, &s.op, &s.operator_endpoint).await;
    let requests = receiver.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    assert_signed(&requests[0].0, &requests[0].1, &s.tenant_endpoint.1);
    assert_signed(&requests[1].0, &requests[1].1, &s.operator_endpoint.1);
    assert_eq!(agent_sees_job_secret(&app, &s.agent).await, JOB_SECRET);

    // A sealed secret copied onto another row (the operator's endpoint gets the tenant's) does not open there:
    // the delivery fails without calling the receiver, and the log says only that the service cannot sign.
    sqlx::query(
        "UPDATE webhook_endpoints SET secret_sealed = (SELECT secret_sealed FROM webhook_endpoints WHERE id = $1::uuid) \
         WHERE id = $2::uuid",
    )
    .bind(&s.tenant_endpoint.0)
    .bind(&s.operator_endpoint.0)
    .execute(&db)
    .await
    .unwrap();
    let res = app.post(&format!("/v1/webhooks/{}/test", s.operator_endpoint.0), &s.op, json!({})).await;
    res.expect(StatusCode::ACCEPTED);
    let worker = worker(&app);
    assert_eq!(worker.deliver_due(32).await.unwrap(), 1);
    assert_eq!(receiver.requests.lock().unwrap().len(), 2, "nothing sent unsigned or wrongly signed");
    let (error,): (String,) =
        sqlx::query_as("SELECT error FROM webhook_attempts ORDER BY id DESC LIMIT 1").fetch_one(&db).await.unwrap();
    assert!(error.contains("cannot read this endpoint's signing secret"), "{error}");
}

#[sqlx::test]
async fn rows_stored_in_clear_before_0027_are_sealed_at_start(db: PgPool) {
    let app = app_with(db.clone(), K1);
    let (receiver, url) = spawn_receiver().await;
    let s = store_secrets(&app, &url).await;
    // Put both back into the form a version before 0027 left them in.
    sqlx::query(
        "UPDATE webhook_endpoints SET secret = $2, secret_key_id = NULL, secret_sealed = NULL WHERE id = $1::uuid",
    )
    .bind(&s.tenant_endpoint.0)
    .bind(&s.tenant_endpoint.1)
    .execute(&db)
    .await
    .unwrap();
    sqlx::query("UPDATE job_secrets SET value = $1, value_key_id = NULL, value_sealed = NULL")
        .bind(JOB_SECRET)
        .execute(&db)
        .await
        .unwrap();
    let before = dump(&db).await;
    assert!(before.contains(JOB_SECRET) && before.contains(&s.tenant_endpoint.1), "the dump shows rows in clear");
    // Even before a start seals them, they are read (a replica of the older version may still be writing).
    assert_eq!(agent_sees_job_secret(&app, &s.agent).await, JOB_SECRET);

    let sealed = sealing::prepare(&db, &Keyring::parse(&format!("{K2}\n{K1}")).unwrap()).await.unwrap();
    assert_eq!((sealed.webhook_secrets, sealed.job_secrets, sealed.failures.len()), (1, 1, 0));
    // Only the rows in clear: the other endpoint stays under k1.
    let keys: Vec<(String,)> = sqlx::query_as("SELECT secret_key_id FROM webhook_endpoints ORDER BY secret_key_id")
        .fetch_all(&db)
        .await
        .unwrap();
    assert_eq!(keys, [("k1".to_string(),), ("k2".to_string(),)]);
    assert_no_secret_in(&dump(&db).await, &[s.tenant_endpoint.1.as_str(), JOB_SECRET]);
    // Idempotent: the next start has nothing to seal.
    let again = sealing::prepare(&db, &Keyring::parse(&format!("{K2}\n{K1}")).unwrap()).await.unwrap();
    assert_eq!((again.webhook_secrets, again.job_secrets), (0, 0));

    // The same secret signs; the agent gets the same value.
    let app2 = app_with(db.clone(), &format!("{K2}\n{K1}"));
    assert_delivered_signed(&app2, &s.tenant, &s.tenant_endpoint).await;
    let (headers, body) = receiver.requests.lock().unwrap()[0].clone();
    assert_signed(&headers, &body, &s.tenant_endpoint.1);
    assert_eq!(agent_sees_job_secret(&app2, &s.agent).await, JOB_SECRET);
}

#[sqlx::test(migrations = false)]
async fn migration_0027_keeps_a_secret_stored_in_clear_and_the_first_start_seals_it(db: PgPool) {
    // The schema as it was before 0027, with an endpoint whose secret is in clear.
    let dir = std::env::temp_dir().join(format!("gpuplane-pre-0027-{}", Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    let migrations = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    for entry in std::fs::read_dir(&migrations).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".sql") && name.as_str() < "0027" {
            std::fs::copy(migrations.join(&name), dir.join(&name)).unwrap();
        }
    }
    sqlx::migrate::Migrator::new(dir.as_path()).await.unwrap().run(&db).await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let (receiver, url) = spawn_receiver().await;
    let (tenant, endpoint) = (Uuid::now_v7(), Uuid::now_v7());
    let secret = gpuplane::webhooks::signing::new_secret();
    sqlx::query("INSERT INTO tenants (id, name) VALUES ($1, 'acme')").bind(tenant).execute(&db).await.unwrap();
    sqlx::query(
        "INSERT INTO webhook_endpoints (id, tenant_id, url, event_types, secret) VALUES ($1, $2, $3, '{*}', $4)",
    )
    .bind(endpoint)
    .bind(tenant)
    .bind(&url)
    .bind(&secret)
    .execute(&db)
    .await
    .unwrap();

    gpuplane::db::MIGRATOR.run(&db).await.unwrap();
    let (clear,): (Option<String>,) =
        sqlx::query_as("SELECT secret FROM webhook_endpoints").fetch_one(&db).await.unwrap();
    assert_eq!(clear.as_deref(), Some(secret.as_str()), "the migration keeps it");
    // A replica of the previous release, still running during a rolling upgrade, can still create one.
    let old_release_secret = gpuplane::webhooks::signing::new_secret();
    sqlx::query(
        "INSERT INTO webhook_endpoints (id, tenant_id, url, event_types, secret) VALUES ($1, $2, $3, '{x}', $4)",
    )
    .bind(Uuid::now_v7())
    .bind(tenant)
    .bind(&url)
    .bind(&old_release_secret)
    .execute(&db)
    .await
    .unwrap();
    let keyring = Keyring::parse(K1).unwrap();
    let sealed = sealing::prepare(&db, &keyring).await.unwrap();
    assert_eq!(sealed.webhook_secrets, 2);
    assert_no_secret_in(&dump(&db).await, &[secret.as_str(), old_release_secret.as_str()]);

    let app = app_with(db.clone(), K1);
    let mut tx = db.begin().await.unwrap();
    gpuplane::webhooks::emit(&mut tx, gpuplane::webhooks::Audience::Tenant(tenant), "lease.ended", json!({}))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    deliver_until(&worker(&app), || receiver.requests.lock().unwrap().len() == 1).await;
    let (headers, body) = receiver.requests.lock().unwrap()[0].clone();
    assert_signed(&headers, &body, &secret);
}

#[sqlx::test]
async fn rotation_reseals_every_secret_under_the_new_key_once(db: PgPool) {
    let app = app_with(db.clone(), K1);
    let (receiver, url) = spawn_receiver().await;
    let s = store_secrets(&app, &url).await;
    let both = Keyring::parse(&format!("{K2}\n{K1}")).unwrap();
    let done = sealing::reseal(&db, &both, Scope::NotCurrent).await.unwrap();
    assert_eq!((done.webhook_secrets, done.job_secrets, done.failures.len()), (2, 1, 0));
    let keys: Vec<(String,)> =
        sqlx::query_as("SELECT secret_key_id FROM webhook_endpoints UNION ALL SELECT value_key_id FROM job_secrets")
            .fetch_all(&db)
            .await
            .unwrap();
    assert_eq!(keys, vec![("k2".to_string(),); 3]);
    // Rerun: nothing left to do.
    let again = sealing::reseal(&db, &both, Scope::NotCurrent).await.unwrap();
    assert_eq!((again.webhook_secrets, again.job_secrets), (0, 0));
    assert_no_secret_in(&dump(&db).await, &[s.tenant_endpoint.1.as_str(), s.operator_endpoint.1.as_str(), JOB_SECRET]);

    // The old key can go: a keyring of k2 alone serves, one of k1 alone is refused, naming k2.
    sealing::check_keyring(&db, &Keyring::parse(K2).unwrap()).await.unwrap();
    let refused = sealing::check_keyring(&db, &Keyring::parse(K1).unwrap()).await.unwrap_err().to_string();
    assert!(refused.contains("k2") && refused.contains("GPUPLANE_SECRETS_KEY"), "{refused}");
    let app2 = app_with(db.clone(), K2);
    assert_delivered_signed(&app2, &s.tenant, &s.tenant_endpoint).await;
    let (headers, body) = receiver.requests.lock().unwrap()[0].clone();
    assert_signed(&headers, &body, &s.tenant_endpoint.1);
    assert_eq!(agent_sees_job_secret(&app2, &s.agent).await, JOB_SECRET);

    // A row under a key the keyring lacks is reported and left as it was; the others are still done.
    let stray = Uuid::now_v7();
    let k3 = Keyring::parse(K3).unwrap().seal(Context::WebhookSecret { endpoint_id: stray }, b"whsec_AAAA");
    sqlx::query(
        "INSERT INTO webhook_endpoints (id, url, event_types, secret_key_id, secret_sealed) VALUES ($1, $2, '{*}', $3, $4)",
    )
    .bind(stray)
    .bind(&url)
    .bind(&k3.key_id)
    .bind(&k3.bytes)
    .execute(&db)
    .await
    .unwrap();
    let k1_first = Keyring::parse(&format!("{K1}\n{K2}")).unwrap();
    let back = sealing::reseal(&db, &k1_first, Scope::NotCurrent).await.unwrap();
    assert_eq!((back.webhook_secrets, back.job_secrets), (2, 1));
    assert_eq!(back.failures.len(), 1);
    assert!(back.failures[0].contains(&stray.to_string()) && back.failures[0].contains("k3"), "{:?}", back.failures);
    let (left,): (Vec<u8>,) = sqlx::query_as("SELECT secret_sealed FROM webhook_endpoints WHERE id = $1")
        .bind(stray)
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(left, k3.bytes);
}

/// How to get each response the OpenAPI document marks as carrying a secret. A newly marked response fails the
/// test until it is added here.
async fn call_secret_response(app: &TestApp, f: &SecretFixture, id: &str, status: u16) -> Option<Response> {
    let register_body = |hostname: &str, token: &str| {
        let node = json!({ "hostname": hostname, "address": format!("{hostname}.test"), "intra_link": "nvlink",
            "network_gbps": 400, "rdma": true, "gpus": [{ "index": 0, "uuid": format!("GPU-{hostname}-0"),
            "name": "NVIDIA H100 80GB HBM3", "memory_bytes": 85_520_809_984i64 }] });
        json!({ "join_token": token, "node": node })
    };
    let join_token = || async {
        let res = app.post(&format!("/v1/admin/pools/{}/join-tokens", f.pool), &f.op, json!({})).await;
        res.expect(StatusCode::CREATED).body["join_token"].as_str().unwrap().to_string()
    };
    Some(match (id, status) {
        ("create_token", 200) => {
            app.call(Method::POST, "/v1/auth/token", None, Some(json!({ "api_key": f.tenant_key }))).await
        }
        ("create_console_session", 200) => {
            app.call(Method::POST, "/v1/console/session", None, Some(json!({ "api_key": f.tenant_key }))).await
        }
        ("get_console_session", 200) => app.get("/v1/console/session", &f.tenant).await,
        ("create_operator_api_key", 201) => app.post("/v1/admin/api-keys", &f.op, json!({ "name": "second" })).await,
        ("rotate_operator_api_key", 201) => {
            let key = app.post("/v1/admin/api-keys", &f.op, json!({ "name": "to rotate" })).await;
            let id = key.expect(StatusCode::CREATED).body["id"].as_str().unwrap().to_string();
            app.post(&format!("/v1/admin/api-keys/{id}/rotate"), &f.op, json!({})).await
        }
        ("create_api_key_for_tenant", 201) => {
            let path = format!("/v1/admin/tenants/{}/api-keys", f.tenant_id);
            app.post(&path, &f.op, json!({ "name": "member", "role": "tenant_member" })).await
        }
        ("create_tenant_api_key", 201) => {
            app.post("/v1/tenant/api-keys", &f.tenant, json!({ "name": "member", "role": "tenant_member" })).await
        }
        ("rotate_tenant_api_key", 201) => {
            let key = app
                .post("/v1/tenant/api-keys", &f.tenant, json!({ "name": "to rotate", "role": "tenant_member" }))
                .await;
            let id = key.expect(StatusCode::CREATED).body["id"].as_str().unwrap().to_string();
            app.post(&format!("/v1/tenant/api-keys/{id}/rotate"), &f.tenant, json!({})).await
        }
        ("create_join_token", 201) => {
            app.post(&format!("/v1/admin/pools/{}/join-tokens", f.pool), &f.op, json!({})).await
        }
        ("register_agent", 201) => {
            let token = join_token().await;
            app.call(Method::POST, "/v1/agent/register", None, Some(register_body("fresh-node", &token))).await
        }
        ("register_agent", 200) => {
            // The registered node again, proving itself with its own credential (which this rotates: nothing
            // after this in the sorted list uses it).
            let body = register_body("agent-node", &join_token().await);
            app.call(Method::POST, "/v1/agent/register", Some(&f.agent), Some(body)).await
        }
        ("get_assignments", 200) => app.get("/v1/agent/assignments", &f.agent).await,
        ("create_webhook", 201) => {
            let body = json!({ "url": "https://hooks.example.com/x", "event_types": ["*"] });
            app.post("/v1/webhooks", &f.tenant, body).await
        }
        ("create_service_key", 201) => {
            let template = json!({ "name": "server", "argv": ["/bin/sleep", "600"] });
            app.post("/v1/admin/templates", &f.op, template).await.expect(StatusCode::CREATED);
            let lease = json!({ "pool_id": f.pool, "gpu_count": 1, "duration_hours": 1 });
            let lease = app.post("/v1/leases", &f.tenant, lease).await.expect(StatusCode::CREATED).body;
            let jobs = format!("/v1/leases/{}/jobs", lease["id"].as_str().unwrap());
            let job = json!({ "template": "server", "serve": { "port": 8000 } });
            app.post(&jobs, &f.tenant, job).await.expect(StatusCode::CREATED);
            let services = app.get("/v1/services", &f.tenant).await.expect(StatusCode::OK).body;
            let id = services["items"][0]["id"].as_str().unwrap().to_string();
            app.post(&format!("/v1/services/{id}/keys"), &f.tenant, json!({ "name": "app" })).await
        }
        _ => return None,
    })
}

struct SecretFixture {
    op: String,
    tenant_id: String,
    tenant_key: String,
    tenant: String,
    pool: String,
    agent: String,
}

/// The responses the OpenAPI document marks `x-gpuplane-secret`: (operation id, status).
fn marked_secret_responses(doc: &Value) -> Vec<(String, u16)> {
    let mut marked = Vec::new();
    for item in doc["paths"].as_object().unwrap().values() {
        for op in item.as_object().unwrap().values() {
            for (status, response) in op["responses"].as_object().unwrap() {
                if response.get(gpuplane::openapi::SECRET_EXTENSION) == Some(&Value::Bool(true)) {
                    assert_eq!(
                        response["headers"]["Cache-Control"]["schema"]["enum"],
                        json!(["no-store"]),
                        "{} {status} declares its Cache-Control",
                        op["operationId"]
                    );
                    marked.push((op["operationId"].as_str().unwrap().to_string(), status.parse().unwrap()));
                }
            }
        }
    }
    marked.sort();
    marked
}

#[sqlx::test]
async fn every_response_the_openapi_document_marks_secret_is_sent_no_store(db: PgPool) {
    let doc = serde_json::to_value(gpuplane::router::openapi_document()).unwrap();
    let marked = marked_secret_responses(&doc);
    assert!(marked.len() >= 12, "{marked:?}");
    let app = crate::support::webhooks::app(db);
    let op = app.operator().await;
    let (tenant_id, tenant_key) = app.tenant_key(&op, "acme", gpuplane::auth::Role::TenantAdmin).await;
    let tenant = app.token_for(&tenant_key).await;
    let pool = app.pool(&op, "h100-pool", "h100").await;
    let (_, agent) = app.agent_node(&op, &pool, "agent-node", 1).await;
    let f = SecretFixture { op, tenant_id, tenant_key, tenant, pool, agent };
    for (id, status) in &marked {
        let res = call_secret_response(&app, &f, id, *status)
            .await
            .unwrap_or_else(|| panic!("{id} {status} is marked secret: add a call for it to call_secret_response"));
        assert_eq!(res.status.as_u16(), *status, "{id}: {}", res.body);
        assert_eq!(res.headers.get("cache-control").map(|v| v.to_str().unwrap()), Some("no-store"), "{id} {status}");
    }
}

/// Every response whose body holds a secret-looking field is marked (and so is checked above). The walk follows
/// `$ref`, `allOf`, array items and properties.
#[test]
fn every_response_with_a_secret_field_is_marked_secret() {
    const SECRET_FIELDS: &[&str] = &["secret", "api_key", "access_token", "agent_token", "join_token", "csrf_token"];
    let doc = serde_json::to_value(gpuplane::router::openapi_document()).unwrap();
    fn fields(doc: &Value, schema: &Value, seen: &mut Vec<String>, out: &mut Vec<String>) {
        if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
            if seen.iter().any(|s| s == r) {
                return;
            }
            seen.push(r.to_string());
            let name = r.trim_start_matches("#/components/schemas/");
            return fields(doc, &doc["components"]["schemas"][name], seen, out);
        }
        for key in ["allOf", "oneOf", "anyOf"] {
            for part in schema[key].as_array().into_iter().flatten() {
                fields(doc, part, seen, out);
            }
        }
        if let Some(items) = schema.get("items") {
            fields(doc, items, seen, out);
        }
        for (name, property) in schema["properties"].as_object().into_iter().flatten() {
            out.push(name.clone());
            fields(doc, property, seen, out);
        }
    }
    let mut checked = 0;
    for item in doc["paths"].as_object().unwrap().values() {
        for op in item.as_object().unwrap().values() {
            for (status, response) in op["responses"].as_object().unwrap() {
                for content in response["content"].as_object().into_iter().flatten().map(|(_, c)| c) {
                    let mut names = Vec::new();
                    fields(&doc, &content["schema"], &mut Vec::new(), &mut names);
                    if names.iter().any(|n| SECRET_FIELDS.contains(&n.as_str())) {
                        checked += 1;
                        assert_eq!(
                            response.get(gpuplane::openapi::SECRET_EXTENSION),
                            Some(&Value::Bool(true)),
                            "{} {status} carries a secret field: add its schema to openapi::SECRET_SCHEMAS",
                            op["operationId"]
                        );
                    }
                }
            }
        }
    }
    assert!(checked >= 10, "{checked}");
}
