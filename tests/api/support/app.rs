//! Test helpers: drive the real router in-process against the test's own PostgreSQL database.

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use gpuplane::auth::Role;
use gpuplane::config::{Secret, Settings};
use gpuplane::{AppState, build_router};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use sqlx::PgPool;
use tower::ServiceExt;

pub const TEST_SECRET: &str = "test-secret-that-is-long-enough-for-hs256-0123456789";

pub struct TestApp {
    pub router: Router,
    pub db: PgPool,
    #[allow(dead_code)]
    pub state: AppState,
}

pub struct Response {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Response {
    /// Assert the status, with the body in the failure message.
    #[track_caller]
    pub fn expect(self, status: StatusCode) -> Self {
        assert_eq!(self.status, status, "unexpected status; body: {}", self.body);
        self
    }

    /// Assert a problem+json error with this status and code.
    #[track_caller]
    pub fn expect_problem(self, status: StatusCode, code: &str) -> Self {
        assert_eq!(self.status, status, "unexpected status; body: {}", self.body);
        assert_eq!(
            self.headers.get("content-type").and_then(|v| v.to_str().ok()),
            Some("application/problem+json"),
            "errors are problem+json"
        );
        assert_eq!(self.body["code"], code, "body: {}", self.body);
        assert_eq!(self.body["status"], status.as_u16());
        self
    }

    /// The field names of a validation failure.
    pub fn error_fields(&self) -> Vec<String> {
        self.body["errors"]
            .as_array()
            .map(|a| a.iter().filter_map(|e| e["field"].as_str().map(String::from)).collect())
            .unwrap_or_default()
    }
}

impl TestApp {
    pub fn new(db: PgPool) -> Self {
        let settings = Settings::new(Secret::new(TEST_SECRET));
        let state = AppState::new(db.clone(), settings).expect("state");
        TestApp { router: build_router(state.clone()), db, state }
    }

    pub async fn send(&self, req: Request<Body>) -> Response {
        let res = self.router.clone().oneshot(req).await.expect("router never fails");
        let status = res.status();
        let headers = res.headers().clone();
        let bytes = res.into_body().collect().await.expect("body").to_bytes();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
        };
        Response { status, headers, body }
    }

    pub async fn call(&self, method: Method, path: &str, token: Option<&str>, body: Option<Value>) -> Response {
        let mut req = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        let req = match body {
            Some(body) => req.header("content-type", "application/json").body(Body::from(body.to_string())),
            None => req.body(Body::empty()),
        };
        self.send(req.expect("request")).await
    }

    pub async fn get(&self, path: &str, token: &str) -> Response {
        self.call(Method::GET, path, Some(token), None).await
    }

    pub async fn post(&self, path: &str, token: &str, body: Value) -> Response {
        self.call(Method::POST, path, Some(token), Some(body)).await
    }

    pub async fn patch(&self, path: &str, token: &str, body: Value) -> Response {
        self.call(Method::PATCH, path, Some(token), Some(body)).await
    }

    pub async fn put(&self, path: &str, token: &str, body: Value) -> Response {
        self.call(Method::PUT, path, Some(token), Some(body)).await
    }

    pub async fn delete(&self, path: &str, token: &str) -> Response {
        self.call(Method::DELETE, path, Some(token), None).await
    }

    /// Exchange an API key for an access token.
    pub async fn token_for(&self, api_key: &str) -> String {
        let res = self.call(Method::POST, "/v1/auth/token", None, Some(json!({ "api_key": api_key }))).await;
        let res = res.expect(StatusCode::OK);
        res.body["access_token"].as_str().expect("token").to_string()
    }

    /// Bootstrap the operator and return an operator access token.
    pub async fn operator(&self) -> String {
        let key = gpuplane::cli::bootstrap_operator(&self.db, "test-operator").await.expect("bootstrap");
        self.token_for(&key).await
    }

    /// Create a tenant (as `operator`) with a prepaid balance of 10,000,000.00 USD, and return (tenant id, API
    /// key) for a key of `role`.
    pub async fn tenant_key(&self, operator: &str, name: &str, role: Role) -> (String, String) {
        let (id, key) = self.tenant_key_without_balance(operator, name, role).await;
        self.top_up(operator, &id, 1_000_000_000).await;
        (id, key)
    }

    /// Create a tenant with no balance and return (tenant id, API key) for a key of `role`.
    pub async fn tenant_key_without_balance(&self, operator: &str, name: &str, role: Role) -> (String, String) {
        let tenant =
            self.post("/v1/admin/tenants", operator, json!({ "name": name })).await.expect(StatusCode::CREATED);
        let id = tenant.body["id"].as_str().unwrap().to_string();
        let key = self.add_key(operator, &id, role).await;
        (id, key)
    }

    /// Post a USD top-up to a tenant's ledger.
    pub async fn top_up(&self, operator: &str, tenant_id: &str, amount_minor: i64) {
        self.post(
            &format!("/v1/admin/tenants/{tenant_id}/ledger"),
            operator,
            json!({ "kind": "topup", "amount_minor": amount_minor, "currency": "USD", "reason": "test top-up" }),
        )
        .await
        .expect(StatusCode::CREATED);
    }

    /// Add a key of `role` to an existing tenant.
    pub async fn add_key(&self, operator: &str, tenant_id: &str, role: Role) -> String {
        let key = self
            .post(
                &format!("/v1/admin/tenants/{tenant_id}/api-keys"),
                operator,
                json!({ "name": "test key", "role": role.as_str() }),
            )
            .await
            .expect(StatusCode::CREATED);
        key.body["api_key"].as_str().unwrap().to_string()
    }

    /// Create a tenant and return (tenant id, admin access token).
    pub async fn tenant_admin(&self, operator: &str, name: &str) -> (String, String) {
        let (id, key) = self.tenant_key(operator, name, Role::TenantAdmin).await;
        (id, self.token_for(&key).await)
    }

    /// Create a pool of `gpu_model` and return its id.
    pub async fn pool(&self, operator: &str, name: &str, gpu_model: &str) -> String {
        let res = self
            .post(
                "/v1/admin/pools",
                operator,
                json!({ "name": name, "gpu_model": gpu_model, "region": "test-1",
                        "price_per_gpu_hour_minor": 200, "currency": "USD" }),
            )
            .await
            .expect(StatusCode::CREATED);
        res.body["id"].as_str().unwrap().to_string()
    }

    /// A join token of the pool, good for one host.
    pub async fn join_token(&self, operator: &str, pool_id: &str) -> String {
        self.post(&format!("/v1/admin/pools/{pool_id}/join-tokens"), operator, json!({ "max_uses": 1 }))
            .await
            .expect(StatusCode::CREATED)
            .body["join_token"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Create a node with `gpus` GPUs in `pool_id` and return its id.
    /// A node of `gpus` GPUs of the pool's model, made as the walkthrough makes one: the operator adds it
    /// (`POST /v1/admin/nodes`, it is then `awaiting_agent` and takes no leases), and its agent registers the host
    /// name with a join token, which makes it `ready`. The agent reports no launchers (as an agent older than
    /// that report), so job creation does not check them. Returns the node id.
    pub async fn node(&self, operator: &str, pool_id: &str, hostname: &str, gpus: usize) -> String {
        let id = self.manual_node(operator, pool_id, hostname, gpus, false).await;
        let token = self.join_token(operator, pool_id).await;
        let (name, memory_bytes): (String, i64) = sqlx::query_as(
            "SELECT m.name, m.memory_bytes FROM pools p JOIN gpu_models m ON m.key = p.gpu_model WHERE p.id = $1::uuid",
        )
        .bind(pool_id)
        .fetch_one(&self.db)
        .await
        .unwrap();
        let gpu_list: Vec<Value> = (0..gpus)
            .map(|i| {
                json!({ "index": i, "uuid": format!("GPU-{hostname}-{i}"), "name": name, "memory_bytes": memory_bytes })
            })
            .collect();
        let node = json!({ "hostname": hostname, "address": format!("{hostname}.test"), "gpus": gpu_list,
                           "intra_link": "nvlink", "network_gbps": 400, "rdma": true });
        let res = self
            .call(Method::POST, "/v1/agent/register", None, Some(json!({ "join_token": token, "node": node })))
            .await
            .expect(StatusCode::OK);
        assert_eq!(res.body["node_id"], id.as_str(), "the agent attached to the operator's node");
        id
    }

    /// An operator's node with no agent (`POST /v1/admin/nodes`): `awaiting_agent`, or `external` when asked.
    #[allow(dead_code)]
    pub async fn manual_node(
        &self,
        operator: &str,
        pool_id: &str,
        hostname: &str,
        gpus: usize,
        external: bool,
    ) -> String {
        let gpu_list: Vec<Value> =
            (0..gpus).map(|i| json!({ "index": i, "uuid": format!("GPU-{hostname}-{i}") })).collect();
        let res = self
            .post(
                "/v1/admin/nodes",
                operator,
                json!({ "pool_id": pool_id, "hostname": hostname, "address": format!("{hostname}.test"),
                        "intra_link": "nvlink", "network_gbps": 400, "rdma": true, "gpus": gpu_list,
                        "external": external }),
            )
            .await
            .expect(StatusCode::CREATED);
        res.body["id"].as_str().unwrap().to_string()
    }

    /// Register an agent node of `gpus` H100s in `pool_id` through a fresh join token; (node id, agent token).
    #[allow(dead_code)]
    pub async fn agent_node(&self, operator: &str, pool_id: &str, hostname: &str, gpus: usize) -> (String, String) {
        let token = self
            .post(&format!("/v1/admin/pools/{pool_id}/join-tokens"), operator, json!({ "max_uses": 1 }))
            .await
            .expect(StatusCode::CREATED)
            .body["join_token"]
            .as_str()
            .unwrap()
            .to_string();
        let gpu_list: Vec<Value> = (0..gpus)
            .map(|i| {
                json!({ "index": i, "uuid": format!("GPU-{hostname}-{i}"), "name": "NVIDIA H100 80GB HBM3",
                             "memory_bytes": 85_520_809_984i64 })
            })
            .collect();
        let node = json!({ "hostname": hostname, "address": format!("{hostname}.test"), "gpus": gpu_list,
                           "intra_link": "nvlink", "network_gbps": 400, "rdma": true });
        let res = self
            .call(Method::POST, "/v1/agent/register", None, Some(json!({ "join_token": token, "node": node })))
            .await
            .expect(StatusCode::CREATED);
        (res.body["node_id"].as_str().unwrap().to_string(), res.body["agent_token"].as_str().unwrap().to_string())
    }

    /// One liveness sweep. Unless the test set the control plane's presence itself, it has been present all
    /// along (no outage grace).
    #[allow(dead_code)]
    pub async fn sweep(&self) {
        sqlx::query(
            "INSERT INTO control_plane_presence (singleton, last_seen_at, resumed_at) VALUES (true, now(), '2000-01-01T00:00:00Z') \
             ON CONFLICT (singleton) DO NOTHING",
        )
        .execute(&self.db)
        .await
        .unwrap();
        gpuplane::agent_api::liveness::sweep(&self.db, &self.state.settings).await.unwrap();
    }
}

/// Telemetry for a lease's GPUs at `gpu_util` percent, every 10 s over the last 5 minutes, packed into
/// `telemetry_raw` as the heartbeat path packs it.
pub async fn write_lease_samples(db: &PgPool, lease_id: uuid::Uuid, gpu_util: f64) {
    write_lease_gpu_samples(db, lease_id, |_| gpu_util).await;
}

/// As [`write_lease_samples`], each GPU at `gpu_util(i)` percent: `i` counts the lease's GPUs by node and index.
pub async fn write_lease_gpu_samples(db: &PgPool, lease_id: uuid::Uuid, gpu_util: impl Fn(usize) -> f64) {
    let leased: Vec<(i32, i32)> = sqlx::query_as(
        "SELECT n.telemetry_key, g.idx FROM leases l JOIN gpus g ON g.id = ANY(l.gpu_ids) \
         JOIN nodes n ON n.id = g.node_id WHERE l.id = $1 ORDER BY n.hostname, g.idx",
    )
    .bind(lease_id)
    .fetch_all(db)
    .await
    .unwrap();
    let samples: Vec<gpuplane::agent_api::protocol::GpuSample> = (0..leased.len())
        .map(|i| {
            serde_json::from_value(json!({
                "gpu_index": 0, "at": chrono::Utc::now(), "gpu_util": gpu_util(i), "mem_copy_util": 10.0,
                "fb_used_mib": 1000, "fb_free_mib": 70000, "power_w": 300.0, "energy_mj": 0, "gpu_temp_c": 60.0,
                "sm_clock_mhz": 1800
            }))
            .unwrap()
        })
        .collect();
    let mut by_node: std::collections::BTreeMap<i32, Vec<(i32, &gpuplane::agent_api::protocol::GpuSample)>> =
        Default::default();
    for ((key, idx), sample) in leased.iter().zip(&samples) {
        by_node.entry(*key).or_default().push((*idx, sample));
    }
    let (keys, packed): (Vec<i32>, Vec<Vec<u8>>) =
        by_node.into_iter().map(|(k, mut gpus)| (k, gpuplane::agent_api::codec::encode_instant(&mut gpus))).unzip();
    sqlx::query(
        "INSERT INTO telemetry_raw (node_key, at, samples) \
         SELECT u.k, now() - make_interval(secs => s), u.b \
         FROM UNNEST($1::int[], $2::bytea[]) AS u(k, b), generate_series(10, 290, 10) AS s",
    )
    .bind(keys)
    .bind(packed)
    .execute(db)
    .await
    .unwrap();
}
