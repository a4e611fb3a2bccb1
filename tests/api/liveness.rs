//! Liveness through outages: silence counts only while the control plane was there to hear it, and a pool
//! whose nodes go silent together holds its interruptions.

use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use gpuplane::billing::metering::meter_once;
use gpuplane_store::agents::Liveness;
use gpuplane_store::agents::liveness::{self as store, Event as LivenessEvent, Versions};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::app::TestApp;

async fn heartbeat(app: &TestApp, agent_token: &str) {
    app.post("/v1/agent/heartbeat", agent_token, json!({ "samples": [] })).await.expect(StatusCode::OK);
}

async fn lease_on_one_node(app: &TestApp, tenant: &str, pool: &str) -> (String, String) {
    let res = app
        .post(
            "/v1/leases",
            tenant,
            json!({ "pool_id": pool, "gpu_count": 4, "duration_hours": 1, "placement": "single_node" }),
        )
        .await
        .expect(StatusCode::CREATED);
    (res.body["id"].as_str().unwrap().to_string(), res.body["gpus"][0]["node_id"].as_str().unwrap().to_string())
}

async fn event_kinds(app: &TestApp, tenant: &str, lease: &str) -> Vec<String> {
    let events = app.get(&format!("/v1/leases/{lease}/events"), tenant).await.expect(StatusCode::OK);
    events.body.as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap().to_string()).collect()
}

async fn lease_state(app: &TestApp, tenant: &str, lease: &str) -> Value {
    app.get(&format!("/v1/leases/{lease}"), tenant).await.expect(StatusCode::OK).body
}

async fn last_heartbeat(db: &PgPool, node: &str) -> DateTime<Utc> {
    let (at,): (DateTime<Utc>,) = sqlx::query_as("SELECT last_heartbeat_at FROM nodes WHERE id = $1::uuid")
        .bind(node)
        .fetch_one(db)
        .await
        .unwrap();
    at
}

#[sqlx::test]
async fn an_outage_longer_than_the_offline_limit_interrupts_nothing_on_live_nodes(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let pool = app.pool(&op, "h100-a", "h100").await;
    let (alive_node, alive_token) = app.agent_node(&op, &pool, "alive", 4).await;
    let (dead_node, _) = app.agent_node(&op, &pool, "dead", 4).await;
    let (lease_a, node_a) = lease_on_one_node(&app, &tenant, &pool).await;
    let (lease_b, _) = lease_on_one_node(&app, &tenant, &pool).await;
    let (alive_lease, dead_lease) = if node_a == alive_node { (lease_a, lease_b) } else { (lease_b, lease_a) };

    // No replica ran for 10 minutes (twice the offline limit); the nodes were last heard just before.
    sqlx::query(
        "INSERT INTO control_plane_presence (singleton, last_seen_at, resumed_at) \
         VALUES (true, now() - interval '10 minutes', '2000-01-01T00:00:00Z')",
    )
    .execute(&db)
    .await
    .unwrap();
    sqlx::query("UPDATE nodes SET last_heartbeat_at = now() - interval '605 seconds'").execute(&db).await.unwrap();
    let dead_last = last_heartbeat(&db, &dead_node).await;

    // The first sweep after the restart sees the gap: nobody is unreachable, nothing is interrupted.
    app.sweep().await;
    for lease in [&alive_lease, &dead_lease] {
        assert_eq!(lease_state(&app, &tenant, lease).await["state"], "active");
        assert_eq!(event_kinds(&app, &tenant, lease).await, ["allocated"], "no node_unreachable event");
    }
    let nodes = app.get("/v1/admin/nodes", &op).await.expect(StatusCode::OK);
    assert!(nodes.body["items"].as_array().unwrap().iter().all(|n| n["state"] == "ready"), "{}", nodes.body);

    // One agent comes back; the other never does. Ten minutes after the restart, only the dead node's lease
    // is interrupted, at its real last heartbeat (before the outage).
    heartbeat(&app, &alive_token).await;
    sqlx::query("UPDATE control_plane_presence SET resumed_at = now() - interval '10 minutes'")
        .execute(&db)
        .await
        .unwrap();
    app.sweep().await;
    assert_eq!(lease_state(&app, &tenant, &alive_lease).await["state"], "active");
    let dead = lease_state(&app, &tenant, &dead_lease).await;
    assert_eq!(dead["state"], "interrupted");
    let ended = DateTime::parse_from_rfc3339(dead["ended_at"].as_str().unwrap()).unwrap().with_timezone(&Utc);
    let started = DateTime::parse_from_rfc3339(dead["starts_at"].as_str().unwrap()).unwrap().with_timezone(&Utc);
    assert_eq!(ended, dead_last.max(started));
}

#[sqlx::test]
async fn a_pool_whose_nodes_all_go_silent_at_once_holds_its_leases_and_says_so(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let pool = app.pool(&op, "h100-a", "h100").await;
    let mut agents = Vec::new();
    for host in ["n1", "n2", "n3"] {
        agents.push(app.agent_node(&op, &pool, host, 4).await.1);
    }
    let mut leases = Vec::new();
    for _ in 0..3 {
        leases.push(lease_on_one_node(&app, &tenant, &pool).await.0);
    }
    let last: DateTime<Utc> = sqlx::query_as::<_, (DateTime<Utc>,)>(
        "UPDATE nodes SET last_heartbeat_at = now() - interval '10 minutes' RETURNING last_heartbeat_at",
    )
    .fetch_all(&db)
    .await
    .unwrap()[0]
        .0;

    // All three silent at once, past the offline limit: the pool is held, no lease is interrupted.
    app.sweep().await;
    app.sweep().await;
    let holds = app.get("/v1/admin/liveness-holds", &op).await.expect(StatusCode::OK);
    let holds = holds.body.as_array().unwrap().clone();
    assert_eq!(holds.len(), 1, "{holds:?}");
    assert_eq!(
        (holds[0]["pool_id"].as_str(), &holds[0]["silent_nodes"], &holds[0]["total_nodes"]),
        (Some(pool.as_str()), &json!(3), &json!(3))
    );
    assert!(holds[0]["released_at"].is_null());
    for lease in &leases {
        assert_eq!(lease_state(&app, &tenant, lease).await["state"], "active");
        let kinds = event_kinds(&app, &tenant, lease).await;
        assert!(kinds.contains(&"interruption_held".to_string()), "{kinds:?}");
    }
    // Meanwhile metering charges nothing past the last heartbeat (which is before these leases started).
    meter_once(&db).await.unwrap();
    let (charged,): (i64,) =
        sqlx::query_as("SELECT sum(charged_minor)::bigint FROM leases").fetch_one(&db).await.unwrap();
    assert_eq!(charged, 0);

    // Only operators see or release holds; a pool without one is 404, a bad id 4xx.
    app.get("/v1/admin/liveness-holds", &tenant).await.expect_problem(StatusCode::FORBIDDEN, "forbidden");
    let other = app.pool(&op, "h100-b", "h100").await;
    app.post(&format!("/v1/admin/pools/{other}/liveness-hold/release"), &op, json!({}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "not_found");
    let bad = app.post("/v1/admin/pools/not-a-uuid/liveness-hold/release", &op, json!({})).await;
    assert!(bad.status.is_client_error(), "{}", bad.status);

    // The operator decides the hosts are really gone: the next sweep interrupts at the last heartbeat, and
    // no new hold opens while the pool is still silent.
    let released =
        app.post(&format!("/v1/admin/pools/{pool}/liveness-hold/release"), &op, json!({})).await.expect(StatusCode::OK);
    assert!(released.body["released_by"].as_str().unwrap().starts_with("operator:"));
    app.sweep().await;
    app.sweep().await;
    for lease in &leases {
        let body = lease_state(&app, &tenant, lease).await;
        assert_eq!(body["state"], "interrupted");
        let ended = DateTime::parse_from_rfc3339(body["ended_at"].as_str().unwrap()).unwrap().with_timezone(&Utc);
        let started = DateTime::parse_from_rfc3339(body["starts_at"].as_str().unwrap()).unwrap().with_timezone(&Utc);
        assert_eq!(ended, last.max(started));
    }
    let holds = app.get("/v1/admin/liveness-holds", &op).await.expect(StatusCode::OK);
    assert_eq!(holds.body.as_array().unwrap().len(), 1, "still the released hold, no new one");

    // The agents return: the pool has recovered and the hold is cleared.
    for token in &agents {
        heartbeat(&app, token).await;
    }
    app.sweep().await;
    let holds = app.get("/v1/admin/liveness-holds", &op).await.expect(StatusCode::OK);
    assert_eq!(holds.body, json!([]));

    // One node of three going silent is that node's problem: its lease is interrupted, no hold.
    let (lease, node) = lease_on_one_node(&app, &tenant, &pool).await;
    sqlx::query("UPDATE nodes SET last_heartbeat_at = now() - interval '10 minutes' WHERE id = $1::uuid")
        .bind(&node)
        .execute(&db)
        .await
        .unwrap();
    app.sweep().await;
    assert_eq!(lease_state(&app, &tenant, &lease).await["state"], "interrupted");
    assert_eq!(app.get("/v1/admin/liveness-holds", &op).await.body, json!([]));
}

/// The sweeper's statements and the heartbeat move real nodes as the liveness table says (its SQL twin,
/// `node_heard_liveness()`, is checked against the table in the store's own tests).
/// They apply the silence timeouts to nodes in every state (agent nodes long silent) just as
/// the table says, and a heartbeat brings each back as `node_heard_liveness()` and the table say.
#[sqlx::test]
async fn the_sweeper_and_the_heartbeat_move_every_state_as_the_liveness_table_says(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    let pool = app.pool(&op, "h100-a", "h100").await;
    let mut nodes = Vec::new();
    for state in Liveness::ALL {
        let (node, token) = app.agent_node(&op, &pool, &format!("host-{}", state.as_str().replace('_', "-")), 1).await;
        nodes.push((state, node, token));
    }
    let set_states = || async {
        for (state, node, _) in &nodes {
            sqlx::query(
                "UPDATE nodes SET liveness = $2, last_heartbeat_at = now() - interval '1 hour', \
                     not_ready_reason = CASE WHEN $2 = 'not_ready' THEN 'driver too old' END WHERE id = $1::uuid",
            )
            .bind(node)
            .bind(state)
            .execute(&db)
            .await
            .unwrap();
        }
    };
    let liveness_of = |node: String| {
        let db = db.clone();
        async move {
            sqlx::query_scalar::<_, Liveness>("SELECT liveness FROM nodes WHERE id = $1::uuid")
                .bind(node)
                .fetch_one(&db)
                .await
                .unwrap()
        }
    };
    let long_ago: DateTime<Utc> = "2000-01-01T00:00:00Z".parse().unwrap();
    for event in [LivenessEvent::UnreachableTimeout, LivenessEvent::OfflineTimeout] {
        set_states().await;
        let mut conn = db.acquire().await.unwrap();
        match event {
            LivenessEvent::UnreachableTimeout => {
                store::mark_unreachable(&mut conn, 60.0, long_ago).await.unwrap();
            }
            _ => {
                store::mark_offline(&mut conn, 60.0, long_ago).await.unwrap();
            }
        }
        for (state, node, _) in &nodes {
            assert_eq!(liveness_of(node.clone()).await, state.on(event), "{state:?} on {event:?}");
        }
    }
    set_states().await;
    for (state, node, token) in &nodes {
        heartbeat(&app, token).await;
        let versions = if *state == Liveness::NotReady { Versions::TooOld } else { Versions::Sufficient };
        let event = LivenessEvent::Heard(versions);
        assert_eq!(liveness_of(node.clone()).await, state.on(event), "{state:?} on {event:?}");
    }
}
