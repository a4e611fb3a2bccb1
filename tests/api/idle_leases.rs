//! Idle leases: the verdict from the GPUs' samples (every GPU reporting, the busiest under the threshold), one
//! announcement per idle spell, never for a lease without samples; the opt-in release after the configured time
//! with its reason, event, webhook and billing end; running jobs given their notice first; the setting's bounds
//! and tenancy.

use std::time::Duration;

use axum::http::{HeaderMap, Method, StatusCode};
use gpuplane::auth::Role;
use gpuplane::config::Settings;
use gpuplane::leases::idle::{Round, sweep_once};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::app::{TestApp, write_lease_gpu_samples, write_lease_samples};

struct Fixture {
    app: TestApp,
    op: String,
    tenant: String,
    pool: String,
    node: String,
    /// The service's settings with a 5-minute idle window: the samples `write_lease_samples` writes cover it.
    settings: Settings,
}

async fn fixture(db: PgPool) -> Fixture {
    let app = TestApp::new(db);
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let pool = app.pool(&op, "h100-a", "h100").await;
    let node = app.node(&op, &pool, "node-a", 4).await;
    let mut settings = (*app.state.settings).clone();
    settings.idle.window = Duration::from_secs(300);
    Fixture { app, op, tenant, pool, node, settings }
}

impl Fixture {
    /// A lease of `gpus` GPUs (with `extra` fields), active for the last hour (so a whole window), metered from then.
    async fn lease(&self, gpus: i32, extra: Value) -> Uuid {
        let mut body = json!({ "pool_id": self.pool, "gpu_count": gpus, "duration_hours": 4 });
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let lease = self.app.post("/v1/leases", &self.tenant, body).await.expect(StatusCode::CREATED).body;
        let id: Uuid = lease["id"].as_str().unwrap().parse().unwrap();
        sqlx::query(
            "UPDATE leases SET starts_at = now() - interval '1 hour', metered_until = now() - interval '1 hour' \
             WHERE id = $1",
        )
        .bind(id)
        .execute(&self.app.db)
        .await
        .unwrap();
        id
    }

    async fn sweep(&self) -> Round {
        sweep_once(&self.app.db, &self.settings).await.unwrap()
    }

    async fn get(&self, lease: Uuid) -> Value {
        self.app.get(&format!("/v1/leases/{lease}"), &self.tenant).await.expect(StatusCode::OK).body
    }

    /// The lease's event kinds, oldest first.
    async fn event_kinds(&self, lease: Uuid) -> Vec<String> {
        let events = self.app.get(&format!("/v1/leases/{lease}/events"), &self.tenant).await.expect(StatusCode::OK);
        events.body.as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap().to_string()).collect()
    }

    /// The webhook events of `type` about `lease`, oldest first.
    async fn webhooks(&self, event_type: &str, lease: Uuid) -> Vec<Value> {
        sqlx::query_scalar("SELECT data FROM event_log WHERE type = $1 AND data->>'lease_id' = $2 ORDER BY id")
            .bind(event_type)
            .bind(lease.to_string())
            .fetch_all(&self.app.db)
            .await
            .unwrap()
    }

    /// Move the lease's idle spell `minutes` further back, as if it had been idle that much longer.
    async fn age_spell(&self, lease: Uuid, minutes: i32) {
        sqlx::query("UPDATE leases SET idle_since = idle_since - make_interval(mins => $2) WHERE id = $1")
            .bind(lease)
            .bind(minutes)
            .execute(&self.app.db)
            .await
            .unwrap();
    }
}

async fn clear_samples(db: &PgPool) {
    sqlx::query("DELETE FROM telemetry_raw").execute(db).await.unwrap();
}

#[sqlx::test]
async fn an_idle_lease_is_announced_once_per_spell_and_a_busy_one_or_one_without_samples_never(db: PgPool) {
    let f = fixture(db.clone()).await;
    let lease = f.lease(2, json!({})).await;
    let busy = f.lease(2, json!({})).await;

    // No samples at all (an agent that sends none, like a node without one): never idle.
    assert_eq!(f.sweep().await, Round::default());
    assert!(f.get(lease).await["idle_since"].is_null());

    // Under 5% on every GPU for the whole window: idle, announced once, even by two replicas judging at once.
    write_lease_samples(&db, lease, 2.0).await;
    write_lease_samples(&db, busy, 60.0).await;
    let (a, b) = tokio::join!(f.sweep(), f.sweep());
    assert_eq!([a.idle.clone(), b.idle.clone()].concat(), [lease], "{a:?} {b:?}");
    assert!(a.active_again.is_empty() && a.releasing.is_empty() && a.released.is_empty());
    let read = f.get(lease).await;
    let since: chrono::DateTime<chrono::Utc> = serde_json::from_value(read["idle_since"].clone()).unwrap();
    let ago = (chrono::Utc::now() - since).num_seconds();
    assert!((295..330).contains(&ago), "the spell starts at the start of the window found idle: {ago} s ago");
    assert_eq!(read["state"], "active");
    assert!(f.get(busy).await["idle_since"].is_null(), "busy all along");
    let announced = f.webhooks("lease.idle", lease).await;
    assert_eq!(announced.len(), 1);
    let message = announced[0]["message"].as_str().unwrap();
    assert!(message.contains("under 5% utilization over the last 5 minutes"), "{message}");
    assert_eq!(announced[0]["detail"]["gpus_reporting"], 2);
    assert_eq!(announced[0]["detail"]["threshold_percent"], 5.0);
    assert_eq!(f.event_kinds(lease).await, ["allocated", "idle"]);
    assert!(f.webhooks("lease.idle", busy).await.is_empty());

    // Still idle: nothing new.
    assert_eq!(f.sweep().await, Round::default());
    assert_eq!(f.webhooks("lease.idle", lease).await.len(), 1, "once per spell");

    // One GPU at 9% and one at 0%: the mean is under 5%, but the busiest GPU is not: busy again, announced.
    clear_samples(&db).await;
    write_lease_gpu_samples(&db, lease, |i| if i == 0 { 0.0 } else { 9.0 }).await;
    let round = f.sweep().await;
    assert_eq!(round.active_again, [lease], "{round:?}");
    assert!(f.get(lease).await["idle_since"].is_null());
    let again = f.webhooks("lease.active_again", lease).await;
    assert_eq!(again.len(), 1);
    assert!(again[0]["message"].as_str().unwrap().contains("9.0%"), "{}", again[0]);
    assert_eq!(f.sweep().await, Round::default(), "announced once");

    // Idle again after being busy: a new spell, announced again.
    clear_samples(&db).await;
    write_lease_samples(&db, lease, 0.0).await;
    assert_eq!(f.sweep().await.idle, [lease]);
    assert_eq!(f.webhooks("lease.idle", lease).await.len(), 2);

    // Its samples stop: no longer known to be idle; the spell ends.
    clear_samples(&db).await;
    assert_eq!(f.sweep().await.active_again, [lease]);
    let again = f.webhooks("lease.active_again", lease).await;
    assert!(again[1]["message"].as_str().unwrap().contains("0 of its 2 GPUs reported"), "{}", again[1]);
    assert_eq!(f.event_kinds(lease).await, ["allocated", "idle", "active_again", "idle", "active_again"]);
}

#[sqlx::test]
async fn a_lease_is_judged_only_once_active_a_whole_window_and_never_on_an_external_node(db: PgPool) {
    let f = fixture(db.clone()).await;
    // Fresh: idle samples, but it has not been active for a whole window yet.
    let body = json!({ "pool_id": f.pool, "gpu_count": 1, "duration_hours": 1 });
    let young = f.app.post("/v1/leases", &f.tenant, body).await.expect(StatusCode::CREATED).body;
    let young: Uuid = young["id"].as_str().unwrap().parse().unwrap();
    write_lease_samples(&db, young, 0.0).await;
    assert_eq!(f.sweep().await, Round::default());
    sqlx::query("UPDATE leases SET starts_at = now() - interval '6 minutes' WHERE id = $1")
        .bind(young)
        .execute(&db)
        .await
        .unwrap();
    assert_eq!(f.sweep().await.idle, [young], "a whole window later");

    // External nodes have no agent, so no samples: their leases are never idle, even opted in. (Best fit puts
    // two GPUs on the external node's two free ones rather than on the agent node's three.)
    f.app.manual_node(&f.op, &f.pool, "ext-0", 2, true).await;
    let external = f.lease(2, json!({ "idle_release_after_minutes": 10 })).await;
    assert_eq!(f.get(external).await["external"], true);
    let round = f.sweep().await;
    assert!(!round.idle.contains(&external) && round.released.is_empty(), "{round:?}");
    let read = f.get(external).await;
    assert_eq!((read["state"].as_str(), read["idle_since"].is_null()), (Some("active"), true));
}

#[sqlx::test]
async fn an_opted_in_lease_is_released_once_idle_that_long_and_not_before(db: PgPool) {
    let f = fixture(db.clone()).await;
    let lease = f.lease(2, json!({ "idle_release_after_minutes": 10 })).await;
    let kept = f.lease(2, json!({})).await;
    assert_eq!(f.get(lease).await["idle_release_after_minutes"], 10);
    write_lease_samples(&db, lease, 1.0).await;
    write_lease_samples(&db, kept, 1.0).await;
    sqlx::query("UPDATE pool_prices SET effective_from = effective_from - interval '1 day'")
        .execute(&db)
        .await
        .unwrap();

    // Idle for 5 minutes (the window): announced, not released.
    let round = f.sweep().await;
    assert_eq!((round.idle.len(), round.released.len()), (2, 0), "{round:?}");
    // 9 minutes: still not.
    f.age_spell(lease, 4).await;
    assert_eq!(f.sweep().await, Round::default());
    assert_eq!(f.get(lease).await["state"], "active");

    // 11 minutes: released at once (no job runs), with the reason, the events and the webhook; once, with two
    // replicas at it.
    f.age_spell(lease, 2).await;
    f.age_spell(kept, 60).await;
    let (a, b) = tokio::join!(f.sweep(), f.sweep());
    let (releasing, released) = ([a.releasing, b.releasing].concat(), [a.released, b.released].concat());
    assert_eq!((releasing.as_slice(), released.as_slice()), ([lease].as_slice(), [lease].as_slice()));
    let released = f.get(lease).await;
    assert_eq!(released["state"], "released");
    let reason = "released: idle for 11 minutes under 5% GPU utilization";
    assert_eq!(released["end_reason"], reason);
    assert!(released["release_deadline"].is_string());
    assert_eq!(f.get(kept).await["state"], "active", "not opted in: only announced");
    assert_eq!(f.event_kinds(lease).await, ["allocated", "idle", "idle_release", "released"]);
    let events = f.app.get(&format!("/v1/leases/{lease}/events"), &f.tenant).await.body;
    assert_eq!((events[3]["actor"].as_str(), events[3]["reason"].as_str()), (Some("system"), Some(reason)));
    let ended = f.webhooks("lease.ended", lease).await;
    assert_eq!(ended.len(), 1);
    assert_eq!((ended[0]["reason"].as_str(), ended[0]["message"].as_str()), (Some("released"), Some(reason)));
    // Its GPUs are free again: 4 on the node, 2 held by the other lease.
    let free: i32 = sqlx::query_scalar("SELECT free_gpus FROM nodes WHERE id = $1::uuid")
        .bind(&f.node)
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(free, 2);
    assert_eq!(f.sweep().await, Round::default(), "released once");

    // Billing stops at the release: the lease is metered to its `ended_at` (its whole seconds), at 2 GPUs.
    gpuplane::billing::metering::meter_once(&db).await.unwrap();
    let (ended_at, metered_until, gpu_seconds, last_period): (
        chrono::DateTime<chrono::Utc>,
        chrono::DateTime<chrono::Utc>,
        i64,
        chrono::DateTime<chrono::Utc>,
    ) = sqlx::query_as(
        "SELECT l.ended_at, l.metered_until, sum(u.gpu_seconds)::bigint, max(u.period_end) \
         FROM leases l JOIN usage_records u ON u.lease_id = l.id WHERE l.id = $1 GROUP BY l.id",
    )
    .bind(lease)
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(metered_until, ended_at, "metered to the release, not past it");
    assert!(last_period <= ended_at && ended_at - last_period < chrono::Duration::seconds(1), "{last_period}");
    let starts_at: chrono::DateTime<chrono::Utc> = serde_json::from_value(released["starts_at"].clone()).unwrap();
    assert_eq!(gpu_seconds, 2 * (ended_at - starts_at).num_seconds());
}

/// A lease with a `sleeper` job of `stop_grace_s` 30 running on its GPU, opted in to the idle release and idle
/// for 11 minutes; the agent's credential and the job's part.
async fn idle_lease_with_a_running_job(f: &Fixture) -> (Uuid, String, String, String) {
    f.app
        .post("/v1/admin/templates", &f.op, json!({"name": "sleeper", "argv": ["/bin/sleep", "600"]}))
        .await
        .expect(StatusCode::CREATED);
    let lease = f.lease(1, json!({ "idle_release_after_minutes": 10 })).await;
    let job = f
        .app
        .post(&format!("/v1/leases/{lease}/jobs"), &f.tenant, json!({ "template": "sleeper", "stop_grace_s": 30 }))
        .await
        .expect(StatusCode::CREATED)
        .body;
    let job_path = format!("/v1/jobs/{}", job["id"].as_str().unwrap());
    let agent = f.app.state.tokens.issue_agent(f.node.parse().unwrap(), 1).unwrap();
    let part =
        f.app.get("/v1/agent/assignments", &agent).await.expect(StatusCode::OK).body["assignments"][0]["job_node_id"]
            .as_str()
            .unwrap()
            .to_string();
    f.app
        .post(&format!("/v1/agent/assignments/{part}/status"), &agent, json!({"state": "running"}))
        .await
        .expect(StatusCode::OK);
    assert_eq!(f.app.get(&job_path, &f.tenant).await.body["state"], "running");
    write_lease_samples(&f.app.db, lease, 0.5).await;
    assert_eq!(f.sweep().await.idle, [lease]);
    f.age_spell(lease, 6).await;
    (lease, agent, part, job_path)
}

#[sqlx::test]
async fn a_running_job_is_given_its_notice_first_and_the_lease_ends_when_it_stops(db: PgPool) {
    let f = fixture(db.clone()).await;
    let (lease, agent, part, job_path) = idle_lease_with_a_running_job(&f).await;
    let notice = "lease released: idle for 11 minutes under 5% GPU utilization";

    // Due: the job's part gets its notice with the job's grace; the lease stays until it stops.
    let round = f.sweep().await;
    assert_eq!((round.releasing.as_slice(), round.released.len()), ([lease].as_slice(), 0), "{round:?}");
    let listed = f.app.get("/v1/agent/assignments", &agent).await.expect(StatusCode::OK).body;
    assert_eq!(listed["assignments"][0]["notice"], json!({ "reason": notice, "grace_s": 30 }), "{listed}");
    let read = f.get(lease).await;
    assert_eq!(read["state"], "active");
    let deadline: chrono::DateTime<chrono::Utc> = serde_json::from_value(read["release_deadline"].clone()).unwrap();
    let left = (deadline - chrono::Utc::now()).num_seconds();
    assert!((30..=40).contains(&left), "the grace and a heartbeat: {left} s");
    assert_eq!(f.event_kinds(lease).await, ["allocated", "idle", "idle_release"]);
    // The release is under way: its setting cannot be changed, and the next round waits for the job.
    let off = json!({ "idle_release_after_minutes": null });
    let changed = f.app.patch(&format!("/v1/leases/{lease}"), &f.tenant, off).await;
    changed.expect_problem(StatusCode::CONFLICT, "release_under_way");
    assert_eq!(f.sweep().await, Round::default());
    assert_eq!(f.get(lease).await["state"], "active");

    // The process checkpointed and exited on its notice: the job is cancelled with why, and the lease released.
    let stopped =
        json!({"state": "cancelled", "exit_code": 0, "reason": format!("stopped on its stop notice ({notice})")});
    f.app.post(&format!("/v1/agent/assignments/{part}/status"), &agent, stopped).await.expect(StatusCode::OK);
    let job = f.app.get(&job_path, &f.tenant).await.body;
    assert_eq!(job["state"], "cancelled");
    assert!(job["reason"].as_str().unwrap().ends_with(&format!("stopped on its stop notice ({notice})")), "{job}");
    assert_eq!(f.sweep().await.released, [lease]);
    let released = f.get(lease).await;
    assert_eq!(released["state"], "released");
    assert_eq!(released["end_reason"], "released: idle for 11 minutes under 5% GPU utilization");
    let ended_at: chrono::DateTime<chrono::Utc> = serde_json::from_value(released["ended_at"].clone()).unwrap();
    assert!(ended_at < deadline, "before the grace ran out");
    assert_eq!(f.webhooks("lease.ended", lease).await.len(), 1);
}

#[sqlx::test]
async fn a_job_that_does_not_stop_is_ended_with_the_lease_when_its_grace_has_passed(db: PgPool) {
    let f = fixture(db.clone()).await;
    let (lease, agent, part, job_path) = idle_lease_with_a_running_job(&f).await;
    assert_eq!(f.sweep().await.releasing, [lease]);
    assert_eq!(f.get(lease).await["state"], "active");
    // The grace (and the heartbeat after it) has passed, the process still runs.
    sqlx::query("UPDATE leases SET release_deadline = now() - interval '1 second' WHERE id = $1")
        .bind(lease)
        .execute(&db)
        .await
        .unwrap();
    assert_eq!(f.sweep().await.released, [lease]);
    let released = f.get(lease).await;
    assert_eq!(released["end_reason"], "released: idle for 11 minutes under 5% GPU utilization");
    let job = f.app.get(&job_path, &f.tenant).await.body;
    assert_eq!(job["state"], "cancelled", "{job}");
    assert!(job["reason"].as_str().unwrap().contains("idle for 11 minutes"), "{job}");
    // The agent is told to stop it: the assignment is gone.
    let listed = f.app.get("/v1/agent/assignments", &agent).await.expect(StatusCode::OK).body;
    assert!(listed["assignments"].as_array().unwrap().iter().all(|a| a["job_node_id"] != part.as_str()), "{listed}");
}

#[sqlx::test]
async fn idle_release_after_minutes_is_bounded_tenant_admin_only_and_scoped_to_the_tenant(db: PgPool) {
    let f = fixture(db.clone()).await;
    let leases = || async {
        let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM leases").fetch_one(&db).await.unwrap();
        n
    };
    // Out of bounds, or not a number, at creation: 422 on the field, no lease.
    for bad in [json!(9), json!(10_081), json!(-1), json!(0), json!("ten"), json!(1e12)] {
        let body = json!({ "pool_id": f.pool, "gpu_count": 1, "duration_hours": 1, "idle_release_after_minutes": bad });
        let refused = f.app.post("/v1/leases", &f.tenant, body).await;
        let refused = refused.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
        assert_eq!(refused.error_fields(), ["idle_release_after_minutes"], "{bad}: {}", refused.body);
    }
    assert_eq!(leases().await, 0, "nothing created");

    let lease = f.lease(1, json!({ "idle_release_after_minutes": 10_080 })).await;
    let path = format!("/v1/leases/{lease}");
    let before = f.get(lease).await;
    assert_eq!(before["idle_release_after_minutes"], 10_080);
    for (body, field) in [
        (json!({ "idle_release_after_minutes": 9 }), "idle_release_after_minutes"),
        (json!({ "idle_release_after_minutes": 100_000 }), "idle_release_after_minutes"),
        (json!({ "idle_release_after_minutes": "1h" }), "idle_release_after_minutes"),
        (json!({}), "idle_release_after_minutes"),
    ] {
        let refused = f.app.patch(&path, &f.tenant, body.clone()).await;
        let refused = refused.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
        assert_eq!(refused.error_fields(), [field], "{body}: {}", refused.body);
    }
    let unknown = f.app.patch(&path, &f.tenant, json!({ "gpu_count": 8 })).await;
    assert_eq!(unknown.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", unknown.body);
    // Another tenant's admin: 404; a member of the tenant: 403. Nothing changed.
    let (_, other) = f.app.tenant_admin(&f.op, "globex").await;
    let change = json!({ "idle_release_after_minutes": 30 });
    f.app.patch(&path, &other, change.clone()).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    let tenant_id = before["tenant_id"].as_str().unwrap();
    let member_key = f.app.add_key(&f.op, tenant_id, Role::TenantMember).await;
    let member = f.app.token_for(&member_key).await;
    f.app.patch(&path, &member, change.clone()).await.expect_problem(StatusCode::FORBIDDEN, "forbidden");
    assert_eq!(f.get(lease).await, before, "nothing changed");

    // The tenant's admin: changed, with its generation and an event; a stale If-Match is 412; null turns it off.
    let changed = f.app.patch(&path, &f.tenant, change.clone()).await.expect(StatusCode::OK).body;
    assert_eq!(changed["idle_release_after_minutes"], 30);
    assert_eq!(changed["generation"], before["generation"].as_i64().unwrap() + 1);
    let events = f.app.get(&format!("{path}/events"), &f.tenant).await.body;
    let updated = events.as_array().unwrap().last().unwrap().clone();
    assert_eq!(updated["kind"], "updated");
    assert_eq!(updated["detail"], json!({ "idle_release_after_minutes": { "from": 10_080, "to": 30 } }));
    let mut headers = HeaderMap::new();
    headers.insert("if-match", before["generation"].to_string().parse().unwrap());
    let stale = if_match(&f, &path, &headers, json!({ "idle_release_after_minutes": 60 })).await;
    assert_eq!((stale.0, stale.1["code"].as_str()), (StatusCode::PRECONDITION_FAILED, Some("generation_mismatch")));
    let off = f.app.patch(&path, &f.tenant, json!({ "idle_release_after_minutes": null })).await.expect(StatusCode::OK);
    assert!(off.body["idle_release_after_minutes"].is_null());

    // An ended lease cannot be changed.
    f.app.post(&format!("{path}/release"), &f.tenant, json!({})).await.expect(StatusCode::OK);
    f.app.patch(&path, &f.tenant, change).await.expect_problem(StatusCode::CONFLICT, "lease_not_active");
}

/// A PATCH with extra headers.
async fn if_match(f: &Fixture, path: &str, headers: &HeaderMap, body: Value) -> (StatusCode, Value) {
    let mut req = axum::http::Request::builder()
        .method(Method::PATCH)
        .uri(path)
        .header("authorization", format!("Bearer {}", f.tenant))
        .header("content-type", "application/json");
    for (name, value) in headers {
        req = req.header(name, value);
    }
    let res = f.app.send(req.body(axum::body::Body::from(body.to_string())).unwrap()).await;
    (res.status, res.body)
}
