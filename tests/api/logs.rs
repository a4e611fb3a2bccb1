//! Jobs' full output in-process: what agents ship is stored once per line however often it is sent, masked,
//! capped from the oldest, and read back by page, from the end, by node and rank, as a download and followed;
//! another tenant gets 404. (The real agent's shipping, through an outage, is in `jobs_e2e`.)

use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::Utc;
use gpuplane::config::{Secret, Settings};
use gpuplane::state::log_wakeups::LogWakeups;
use gpuplane::{AppState, build_router};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::app::{TEST_SECRET, TestApp};

/// A cap small enough to pass in a test: 64 KiB.
const CAP_BYTES: i64 = 64 * 1024;

struct Fixture {
    app: TestApp,
    tenant: String,
    other: String,
    job_id: String,
    /// (agent credential, job_node_id) per node.
    parts: Vec<(String, String)>,
}

async fn fixture(db: PgPool) -> Fixture {
    fixture_with(db, LogWakeups::default()).await
}

async fn fixture_with(db: PgPool, log_wakeups: LogWakeups) -> Fixture {
    let mut settings = Settings::new(Secret::new(TEST_SECRET));
    settings.job_log_cap_bytes = CAP_BYTES;
    let state = AppState { log_wakeups, ..AppState::new(db.clone(), settings).expect("state") };
    let app = TestApp { router: build_router(state.clone()), db, state };
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let (_, other) = app.tenant_admin(&op, "globex").await;
    let pool = app.pool(&op, "h100-pool", "h100").await;
    let nodes = [app.node(&op, &pool, "node-0", 2).await, app.node(&op, &pool, "node-1", 2).await];
    let lease = app
        .post(
            "/v1/leases",
            &tenant,
            json!({"pool_id": pool, "gpu_count": 4, "duration_hours": 1, "placement": "spread"}),
        )
        .await
        .expect(StatusCode::CREATED)
        .body;
    app.post("/v1/admin/templates", &op, json!({"name": "sleeper", "argv": ["/bin/sleep", "600"]}))
        .await
        .expect(StatusCode::CREATED);
    let job = app
        .post(
            &format!("/v1/leases/{}/jobs", lease["id"].as_str().unwrap()),
            &tenant,
            json!({"template": "sleeper", "secret_env": {"HF_TOKEN": "hf_sEcReTvAlUe123"}}),
        )
        .await
        .expect(StatusCode::CREATED)
        .body;
    let mut parts = Vec::new();
    for node in &nodes {
        let agent = app.state.tokens.issue_agent(node.parse::<Uuid>().unwrap(), 1).unwrap();
        let list = app.get("/v1/agent/assignments", &agent).await.expect(StatusCode::OK).body;
        let part = list["assignments"][0]["job_node_id"].as_str().unwrap().to_string();
        parts.push((agent, part));
    }
    Fixture { app, tenant, other, job_id: job["id"].as_str().unwrap().to_string(), parts }
}

fn line(seq: i64, rank: Option<i32>, text: &str) -> Value {
    let mut line = json!({"seq": seq, "at": Utc::now(), "stream": "stdout", "text": text});
    if let Some(rank) = rank {
        line["rank"] = json!(rank);
    }
    line
}

impl Fixture {
    async fn ship(&self, node: usize, lines: Vec<Value>, last: bool) -> Value {
        let (agent, part) = &self.parts[node];
        self.app
            .post(&format!("/v1/agent/assignments/{part}/logs"), agent, json!({"lines": lines, "last": last}))
            .await
            .expect(StatusCode::OK)
            .body
    }

    async fn logs(&self, query: &str) -> Value {
        self.app.get(&format!("/v1/jobs/{}/logs?{query}", self.job_id), &self.tenant).await.expect(StatusCode::OK).body
    }

    /// The raw response of a logs request (text or events), read whole.
    async fn raw(&self, query: &str, last_event_id: Option<&str>) -> (StatusCode, String, String) {
        let mut request = Request::get(format!("/v1/jobs/{}/logs?{query}", self.job_id))
            .header("authorization", format!("Bearer {}", self.tenant));
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        let response =
            tower::ServiceExt::oneshot(self.app.router.clone(), request.body(Body::empty()).unwrap()).await.unwrap();
        let status = response.status();
        let content_type =
            response.headers().get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
        let body = tokio::time::timeout(std::time::Duration::from_secs(20), response.into_body().collect())
            .await
            .expect("the response ends")
            .unwrap()
            .to_bytes();
        (status, content_type, String::from_utf8(body.to_vec()).unwrap())
    }
}

fn texts(page: &Value) -> Vec<String> {
    page["lines"].as_array().unwrap().iter().map(|l| l["text"].as_str().unwrap().to_string()).collect()
}

#[sqlx::test]
async fn shipped_lines_are_stored_once_masked_and_read_by_page_tail_node_and_rank(db: PgPool) {
    let f = fixture(db).await;
    let empty = f.logs("").await;
    assert_eq!((empty["lines"].as_array().unwrap().len(), empty["complete"].clone()), (0, json!(false)));

    let first = vec![
        line(1, None, "W torchrun starting"),
        line(2, Some(0), "step 1 loss 2.5"),
        line(3, Some(1), "token hf_sEcReTvAlUe123 used"),
    ];
    assert_eq!(f.ship(0, first.clone(), false).await, json!({"acked_seq": 3}));
    // The same report again (its answer was lost), and one that overlaps: each seq is stored once.
    assert_eq!(f.ship(0, first.clone(), false).await, json!({"acked_seq": 3}));
    let overlapping = vec![first[2].clone(), line(4, Some(0), "step 2 loss 2.1")];
    assert_eq!(f.ship(0, overlapping, false).await, json!({"acked_seq": 4}));
    // Node 1 ships with a gap: seq 2 and 3 were dropped by its agent.
    f.ship(1, vec![line(1, Some(2), "rank 2 up"), line(4, Some(3), "rank 3 after a gap")], false).await;

    let all = f.logs("").await;
    assert_eq!(
        texts(&all),
        [
            "W torchrun starting",
            "step 1 loss 2.5",
            "token *** used",
            "step 2 loss 2.1",
            "rank 2 up",
            "rank 3 after a gap"
        ]
    );
    let numbers: Vec<i64> = all["lines"].as_array().unwrap().iter().map(|l| l["line"].as_i64().unwrap()).collect();
    assert_eq!(numbers, [1, 2, 3, 4, 5, 6]);
    assert_eq!(
        (all["next_after"].clone(), all["first_line"].clone(), all["lost_lines"].clone()),
        (json!(6), json!(1), json!(2))
    );
    assert_eq!(all["lines"][5]["node"], 1);
    assert_eq!(all["lines"][0].get("rank"), None);
    assert!(!serde_json::to_string(&all).unwrap().contains("sEcReT"));

    assert_eq!(texts(&f.logs("node=1").await), ["rank 2 up", "rank 3 after a gap"]);
    assert_eq!(texts(&f.logs("rank=0").await), ["step 1 loss 2.5", "step 2 loss 2.1"]);
    assert_eq!(texts(&f.logs("tail=2").await), ["rank 2 up", "rank 3 after a gap"]);
    assert_eq!(texts(&f.logs("tail=1&node=0").await), ["step 2 loss 2.1"]);
    assert_eq!(texts(&f.logs("tail=5&limit=1").await).len(), 5, "a tail is whole, whatever the page size");
    let page = f.logs("limit=4").await;
    assert_eq!((page["lines"].as_array().unwrap().len(), page["next_after"].clone()), (4, json!(4)));
    assert_eq!(texts(&f.logs("after=4").await), ["rank 2 up", "rank 3 after a gap"]);

    // The download: every line, rendered with its node and rank.
    let (status, content_type, text) = f.raw("format=text&after=1", None).await;
    assert_eq!((status, content_type.as_str()), (StatusCode::OK, "text/plain; charset=utf-8"));
    assert_eq!(
        text,
        "[node 0 rank 0] step 1 loss 2.5\n[node 0 rank 1] token *** used\n[node 0 rank 0] step 2 loss 2.1\n\
         [node 1 rank 2] rank 2 up\n[node 1 rank 3] rank 3 after a gap\n"
    );

    // Another tenant, and a bad query.
    f.app
        .get(&format!("/v1/jobs/{}/logs", f.job_id), &f.other)
        .await
        .expect_problem(StatusCode::NOT_FOUND, "not_found");
    let (other_agent, _) = &f.parts[1];
    f.app
        .post(&format!("/v1/agent/assignments/{}/logs", f.parts[0].1), other_agent, json!({"lines": [], "last": false}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "not_found");
    let bad = f.app.get(&format!("/v1/jobs/{}/logs?tail=0&after=2&rank=-1&node=99999999", f.job_id), &f.tenant).await;
    assert_eq!(bad.expect(StatusCode::UNPROCESSABLE_ENTITY).error_fields(), ["tail", "tail", "node", "rank"]);
    let path = format!("/v1/agent/assignments/{}/logs", f.parts[0].1);
    let bad = f
        .app
        .post(&path, &f.parts[0].0, json!({"lines": [line(9, None, "a"), line(9, None, "b")], "last": false}))
        .await;
    assert_eq!(bad.expect(StatusCode::UNPROCESSABLE_ENTITY).error_fields(), ["lines[1].seq"]);
}

#[sqlx::test]
async fn past_the_cap_the_oldest_lines_go_and_a_follow_ends_with_the_job(db: PgPool) {
    let f = fixture(db).await;
    // 120 lines of 1 KiB: about twice the 64 KiB cap.
    for batch in 0..6 {
        let lines = (1..=20)
            .map(|i| line(batch * 20 + i, Some(0), &format!("{:04} {}", batch * 20 + i, "x".repeat(1019))))
            .collect();
        f.ship(0, lines, false).await;
    }
    let page = f.logs("limit=10000").await;
    let stored: i64 = page["lines"].as_array().unwrap().iter().map(|l| l["text"].as_str().unwrap().len() as i64).sum();
    assert!(stored <= CAP_BYTES, "{stored} bytes kept");
    assert!(stored >= CAP_BYTES * 8 / 10, "no more than needed went: {stored} bytes kept");
    let first = page["first_line"].as_i64().unwrap();
    assert!(first > 1, "the oldest went");
    assert_eq!(page["lines"][0]["line"].as_i64().unwrap(), first);
    assert_eq!(page["lines"].as_array().unwrap().last().unwrap()["line"], 120, "the newest stay");

    // A follower from line 117 gets the rest, then waits; the job ends and both parts send their last: `end`.
    let follower = {
        let (router, job_id, tenant) = (f.app.router.clone(), f.job_id.clone(), f.tenant.clone());
        tokio::spawn(async move {
            let request = Request::get(format!("/v1/jobs/{job_id}/logs?follow=true"))
                .header("authorization", format!("Bearer {tenant}"))
                .header("last-event-id", "117")
                .body(Body::empty())
                .unwrap();
            let response = tower::ServiceExt::oneshot(router, request).await.unwrap();
            assert_eq!(response.headers()["content-type"], "text/event-stream");
            let body = tokio::time::timeout(std::time::Duration::from_secs(30), response.into_body().collect())
                .await
                .expect("the follow ends with the job")
                .unwrap()
                .to_bytes();
            String::from_utf8(body.to_vec()).unwrap()
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    f.ship(0, vec![line(121, Some(1), "final words")], true).await;
    f.ship(1, vec![], true).await;
    for (agent, part) in &f.parts {
        let body = json!({"state": "succeeded", "exit_code": 0});
        f.app.post(&format!("/v1/agent/assignments/{part}/status"), agent, body).await.expect(StatusCode::OK);
    }
    let events = follower.await.unwrap();
    let ids: Vec<&str> = events.lines().filter_map(|l| l.strip_prefix("id: ")).collect();
    assert_eq!(ids, ["118", "119", "120", "121"], "{events}");
    assert!(events.contains("final words"));
    assert!(events.contains("event: end"), "{events}");
    assert_eq!(f.logs("after=121").await["complete"], true);
}

#[sqlx::test]
async fn an_ended_jobs_lines_are_deleted_after_the_retention_and_readers_are_told(db: PgPool) {
    let f = fixture(db.clone()).await;
    f.ship(0, vec![line(1, Some(0), "one"), line(2, Some(0), "two")], true).await;
    f.ship(1, vec![line(1, Some(1), "three")], true).await;
    let retention = Some(std::time::Duration::from_secs(30 * 86_400));
    let expire = || gpuplane::jobs::logs::expire(&db, retention);

    // Running: kept, however old the job.
    sqlx::query("UPDATE jobs SET created_at = now() - interval '90 days'").execute(&db).await.unwrap();
    assert!(!expire().await.unwrap());
    assert_eq!(texts(&f.logs("").await), ["one", "two", "three"]);
    for (agent, part) in &f.parts {
        let body = json!({"state": "succeeded", "exit_code": 0});
        f.app.post(&format!("/v1/agent/assignments/{part}/status"), agent, body).await.expect(StatusCode::OK);
    }
    // Ended 29 days ago: kept.
    sqlx::query("UPDATE jobs SET finished_at = now() - interval '29 days'").execute(&db).await.unwrap();
    expire().await.unwrap();
    assert_eq!(texts(&f.logs("").await), ["one", "two", "three"]);
    assert!(f.logs("").await.get("expired_at").is_none());
    // Ended 31 days ago: its lines go; the page says when, and where its log would start.
    sqlx::query("UPDATE jobs SET finished_at = now() - interval '31 days'").execute(&db).await.unwrap();
    expire().await.unwrap();
    let page = f.logs("").await;
    assert!(texts(&page).is_empty(), "{page}");
    assert!(page["expired_at"].is_string(), "{page}");
    assert_eq!((page["first_line"].as_i64(), page["complete"].as_bool()), (Some(4), Some(true)), "{page}");
    let (left,): (i64,) = sqlx::query_as("SELECT count(*) FROM job_log_lines").fetch_one(&db).await.unwrap();
    assert_eq!(left, 0);
    // A follow ends at once; no retention keeps everything.
    let (status, _, events) = f.raw("follow=true", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(events.contains("event: end"), "{events}");
    assert!(!gpuplane::jobs::logs::expire(&db, None).await.unwrap());
}

/// Woken, not polled: with a fallback of a minute, a follower still gets each line as it is stored and its end
/// as the job ends (PostgreSQL's NOTIFY from the log's triggers, migration 0050).
#[sqlx::test]
async fn a_follower_is_woken_by_each_report_and_by_the_jobs_end(db: PgPool) {
    let f = fixture_with(db, LogWakeups::listening(std::time::Duration::from_secs(60))).await;
    let request = Request::get(format!("/v1/jobs/{}/logs?follow=true", f.job_id))
        .header("authorization", format!("Bearer {}", f.tenant))
        .body(Body::empty())
        .unwrap();
    let response = tower::ServiceExt::oneshot(f.app.router.clone(), request).await.unwrap();
    // Read as it comes, beside the reports below: the follower is waiting when each one is stored.
    let (sender, mut chunks) = tokio::sync::mpsc::unbounded_channel::<String>();
    let mut body = response.into_body();
    tokio::spawn(async move {
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(data) = frame.into_data() {
                let _ = sender.send(String::from_utf8(data.to_vec()).unwrap());
            }
        }
    });
    let mut seen = String::new();
    let mut read_until = async |words: &str| {
        while !seen.contains(words) {
            let chunk = tokio::time::timeout(std::time::Duration::from_secs(30), chunks.recv())
                .await
                .unwrap_or_else(|_| panic!("not woken for {words:?}: {seen}"))
                .expect("the stream goes on");
            seen.push_str(&chunk);
        }
    };
    // Each report is stored while the follower waits (it looked, found nothing, and sleeps on its wake-ups).
    for (node, words) in [(0, "first words"), (1, "second words")] {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        f.ship(node, vec![line(1, Some(node as i32), words)], false).await;
        read_until(words).await;
    }
    f.ship(0, vec![], true).await;
    f.ship(1, vec![], true).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    for (agent, part) in &f.parts {
        let body = json!({"state": "succeeded", "exit_code": 0});
        f.app.post(&format!("/v1/agent/assignments/{part}/status"), agent, body).await.expect(StatusCode::OK);
    }
    read_until("event: end").await;
}
