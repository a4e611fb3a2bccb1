//! Uploaded working directories in-process: kept once per tenant under their digest, hostile archives refused with
//! nothing stored, named by jobs of the same tenant only, and handed to an agent only while a part of its node
//! names one. (A real agent unpacking one for a real job: `jobs_e2e`.)

use axum::body::Body;
use axum::http::{Request, StatusCode};
use gpuplane::config::{Secret, Settings};
use gpuplane::{AppState, build_router};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::app::{TEST_SECRET, TestApp};

/// A cap small enough to pass in a test: 256 KiB.
const CAP_BYTES: usize = 256 * 1024;

/// A gzip'd tar of (path, kind, content): kind `f` file, `d` directory, `l` symlink to content, `c` a character
/// device. Paths are written into the header raw, as a hostile client would.
pub fn archive(entries: &[(&str, char, &str)]) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    for (path, kind, content) in entries {
        let mut header = tar::Header::new_gnu();
        header.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
        header.set_mode(0o755);
        let (kind, body) = match kind {
            'f' => (tar::EntryType::Regular, content.as_bytes()),
            'd' => (tar::EntryType::Directory, &b""[..]),
            'l' => {
                header.set_link_name(content).unwrap();
                (tar::EntryType::Symlink, &b""[..])
            }
            _ => (tar::EntryType::Char, &b""[..]),
        };
        header.set_entry_type(kind);
        header.set_size(body.len() as u64);
        header.set_cksum();
        tar.append(&header, body).unwrap();
    }
    gzip(&tar.into_inner().unwrap())
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

struct Fixture {
    app: TestApp,
    op: String,
    tenant: String,
    other: String,
}

async fn fixture(db: PgPool) -> Fixture {
    let mut settings = Settings::new(Secret::new(TEST_SECRET));
    settings.upload_cap_bytes = CAP_BYTES;
    let state = AppState::new(db.clone(), settings).expect("state");
    let app = TestApp { router: build_router(state.clone()), db, state };
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let (_, other) = app.tenant_admin(&op, "globex").await;
    Fixture { app, op, tenant, other }
}

impl Fixture {
    async fn upload(&self, token: &str, bytes: Vec<u8>, content_type: &str) -> (StatusCode, Value) {
        let request = Request::post("/v1/uploads")
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", content_type)
            .body(Body::from(bytes))
            .unwrap();
        let response = tower::ServiceExt::oneshot(self.app.router.clone(), request).await.unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }

    /// The jobs path of a new 2-GPU lease of the tenant's in `pool`, with the operator's template `run` (its
    /// `command` as the argv) in place.
    async fn jobs_on_a_lease(&self, pool: &str) -> String {
        self.app
            .post("/v1/admin/templates", &self.op, json!({"name": "run", "argv": ["{command}"]}))
            .await
            .expect(StatusCode::CREATED);
        let lease = self
            .app
            .post(
                "/v1/leases",
                &self.tenant,
                json!({"pool_id": pool, "gpu_count": 2, "duration_hours": 1, "placement": "pack"}),
            )
            .await
            .expect(StatusCode::CREATED)
            .body;
        format!("/v1/leases/{}/jobs", lease["id"].as_str().unwrap())
    }

    async fn stored(&self) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM uploads").fetch_one(&self.app.db).await.unwrap()
    }
}

const OCTETS: &str = "application/octet-stream";

/// A job of the template `run` that runs the upload's `train.sh`.
fn job(workdir: &str) -> Value {
    json!({"template": "run", "command": ["/bin/sh", "train.sh"], "workdir": workdir})
}

#[sqlx::test]
async fn archives_are_kept_once_per_tenant_and_hostile_ones_are_refused_with_nothing_stored(db: PgPool) {
    let f = fixture(db).await;
    let good =
        archive(&[("./", 'd', ""), ("src/", 'd', ""), ("src/train.sh", 'f', "echo hi\n"), ("data.txt", 'f', "42\n")]);
    let (status, first) = f.upload(&f.tenant, good.clone(), OCTETS).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert_eq!((first["files"].clone(), first["unpacked_bytes"].clone()), (json!(2), json!(11)));
    assert_eq!(first["size_bytes"], good.len());
    let digest = first["digest"].as_str().unwrap().to_string();
    let (status, again) = f.upload(&f.tenant, good.clone(), "application/octet-stream; charset=binary").await;
    assert_eq!(status, StatusCode::OK);
    for field in ["digest", "created_at", "size_bytes", "files", "unpacked_bytes"] {
        assert_eq!(again[field], first[field], "the same archive again is the same upload");
    }
    assert_eq!(f.app.get(&format!("/v1/uploads/{digest}"), &f.tenant).await.expect(StatusCode::OK).body, again);
    // Another tenant sees none of it; its own upload of the same bytes is its own.
    f.app.get(&format!("/v1/uploads/{digest}"), &f.other).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    assert_eq!(f.upload(&f.other, good.clone(), OCTETS).await.0, StatusCode::CREATED);
    assert_eq!(f.stored().await, 2);

    let bomb = {
        // 64 MiB of zeros in one file: about 64 KiB compressed, past the 200x ratio.
        let mut header = tar::Header::new_gnu();
        header.set_path("zeros").unwrap();
        header.set_size(64 << 20);
        header.set_cksum();
        let mut tar = header.as_bytes().to_vec();
        tar.resize(tar.len() + (64 << 20) + 1024, 0);
        gzip(&tar)
    };
    assert!(bomb.len() < CAP_BYTES, "{}", bomb.len());
    for (bytes, entry, rule) in [
        (
            archive(&[("../../etc/cron.d/x", 'f', "* * * * * root sh")]),
            Some("../../etc/cron.d/x"),
            "plain relative path",
        ),
        (
            archive(&[("/root/.ssh/authorized_keys", 'f', "ssh-ed25519 AAAA")]),
            Some("/root/.ssh/authorized_keys"),
            "plain relative path",
        ),
        (archive(&[("data", 'l', "/etc")]), Some("data"), "links are not allowed"),
        (archive(&[("nvidia0", 'c', "")]), Some("nvidia0"), "device files"),
        (archive(&[("a.txt", 'f', "1"), ("a.txt", 'f', "2")]), Some("a.txt"), "twice"),
        (bomb, None, "more than"),
        (b"#!/bin/sh\necho not an archive\n".to_vec(), None, "gzip"),
    ] {
        let (status, problem) = f.upload(&f.tenant, bytes, OCTETS).await;
        assert_eq!(
            (status, problem["code"].as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some("archive_refused")),
            "{problem}"
        );
        assert_eq!(problem["context"]["entry"].as_str(), entry, "{problem}");
        assert!(problem["context"]["rule"].as_str().unwrap().contains(rule), "{problem}");
    }
    let over = vec![0x1f; CAP_BYTES + 1];
    let (status, problem) = f.upload(&f.tenant, over, OCTETS).await;
    assert_eq!((status, problem["code"].as_str()), (StatusCode::PAYLOAD_TOO_LARGE, Some("payload_too_large")));
    let (status, problem) = f.upload(&f.tenant, good.clone(), "application/json").await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (StatusCode::UNSUPPORTED_MEDIA_TYPE, Some("unsupported_media_type"))
    );
    let (status, problem) = f.upload(&f.tenant, Vec::new(), OCTETS).await;
    assert_eq!((status, problem["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("archive_refused")));
    assert_eq!(f.stored().await, 2, "nothing refused was stored");
    // A member may look but not upload.
    let tenant_id: Uuid =
        sqlx::query_scalar("SELECT id FROM tenants WHERE name = 'acme'").fetch_one(&f.app.db).await.unwrap();
    let member = f.app.add_key(&f.op, &tenant_id.to_string(), gpuplane::auth::Role::TenantMember).await;
    let member = f.app.token_for(&member).await;
    assert_eq!(f.upload(&member, good, OCTETS).await.0, StatusCode::FORBIDDEN);
    f.app.get(&format!("/v1/uploads/{digest}"), &member).await.expect(StatusCode::OK);
}

#[sqlx::test]
async fn a_job_names_its_tenants_upload_and_only_its_nodes_agents_get_it_while_it_runs(db: PgPool) {
    let f = fixture(db).await;
    let pool = f.app.pool(&f.op, "h100-pool", "h100").await;
    let nodes = [f.app.node(&f.op, &pool, "node-0", 2).await, f.app.node(&f.op, &pool, "node-1", 2).await];
    let agents: Vec<String> =
        nodes.iter().map(|n| f.app.state.tokens.issue_agent(n.parse::<Uuid>().unwrap(), 1).unwrap()).collect();
    let jobs = f.jobs_on_a_lease(&pool).await;
    let bytes = archive(&[("train.sh", 'f', "echo hi\n")]);
    let digest = f.upload(&f.tenant, bytes.clone(), OCTETS).await.1["digest"].as_str().unwrap().to_string();
    let theirs =
        f.upload(&f.other, archive(&[("x", 'f', "theirs")]), OCTETS).await.1["digest"].as_str().unwrap().to_string();

    let bad = f.app.post(&jobs, &f.tenant, job("sha256:abc")).await;
    assert_eq!(bad.expect(StatusCode::UNPROCESSABLE_ENTITY).error_fields(), ["workdir"]);
    for unknown in [theirs.as_str(), "sha256:0000000000000000000000000000000000000000000000000000000000000000"] {
        let refused = f.app.post(&jobs, &f.tenant, job(unknown)).await.expect(StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(refused.error_fields(), ["workdir"], "{unknown}");
    }
    let created = f.app.post(&jobs, &f.tenant, job(&digest)).await.expect(StatusCode::CREATED).body;
    assert_eq!(created["nodes"][0]["spec"]["workdir"], digest.as_str());

    // The node running a part gets the archive; the other node, and anyone who is not an agent, do not.
    let which: usize = if created["nodes"][0]["node_id"] == nodes[0].as_str() { 0 } else { 1 };
    let fetch = |token: String| {
        let (router, path) = (f.app.router.clone(), format!("/v1/agent/uploads/{digest}"));
        async move {
            let request =
                Request::get(path).header("authorization", format!("Bearer {token}")).body(Body::empty()).unwrap();
            let response = tower::ServiceExt::oneshot(router, request).await.unwrap();
            let status = response.status();
            (status, response.into_body().collect().await.unwrap().to_bytes().to_vec())
        }
    };
    assert_eq!(fetch(agents[which].clone()).await, (StatusCode::OK, bytes));
    assert_eq!(fetch(agents[1 - which].clone()).await.0, StatusCode::NOT_FOUND);
    assert_eq!(fetch(f.tenant.clone()).await.0, StatusCode::UNAUTHORIZED);
    let job_path = format!("/v1/jobs/{}", created["id"].as_str().unwrap());
    f.app.post(&format!("{job_path}/cancel"), &f.tenant, json!({})).await.expect(StatusCode::OK);
    assert_eq!(
        f.app.get(&job_path, &f.tenant).await.body["state"],
        "cancelled",
        "a part no agent had fetched ends at once"
    );
    assert_eq!(fetch(agents[which].clone()).await.0, StatusCode::NOT_FOUND, "not once the part has ended");
}

#[sqlx::test]
async fn an_upload_unused_past_the_retention_is_deleted_unless_a_job_that_has_not_ended_names_it(db: PgPool) {
    let f = fixture(db.clone()).await;
    let pool = f.app.pool(&f.op, "h100-pool", "h100").await;
    f.app.node(&f.op, &pool, "node-0", 2).await;
    let jobs = f.jobs_on_a_lease(&pool).await;
    let mut digests = Vec::new();
    for name in ["ended", "running", "idle", "recent"] {
        let (status, body) = f.upload(&f.tenant, archive(&[("train.sh", 'f', name)]), OCTETS).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        digests.push(body["digest"].as_str().unwrap().to_string());
    }
    let [ended, running, idle, recent] = [0, 1, 2, 3].map(|i| digests[i].clone());
    let first = f.app.post(&jobs, &f.tenant, job(&ended)).await.expect(StatusCode::CREATED).body;
    let first_id = first["id"].as_str().unwrap();
    f.app.post(&format!("/v1/jobs/{first_id}/cancel"), &f.tenant, json!({})).await.expect(StatusCode::OK);
    let second = f.app.post(&jobs, &f.tenant, job(&running)).await.expect(StatusCode::CREATED).body;
    let second_id = second["id"].as_str().unwrap();

    sqlx::query("UPDATE uploads SET last_used_at = now() - interval '31 days' WHERE digest <> $1")
        .bind(&recent)
        .execute(&db)
        .await
        .unwrap();
    let retention = Some(std::time::Duration::from_secs(30 * 86_400));
    assert!(!gpuplane::uploads::expire(&db, retention).await.unwrap(), "not a full batch");
    let found = |digest: String| {
        let f = &f;
        async move { f.app.get(&format!("/v1/uploads/{digest}"), &f.tenant).await.status }
    };
    assert_eq!(found(ended.clone()).await, StatusCode::NOT_FOUND, "named only by an ended job");
    assert_eq!(found(idle.clone()).await, StatusCode::NOT_FOUND, "named by none");
    assert_eq!(found(running.clone()).await, StatusCode::OK, "a job that has not ended names it");
    assert_eq!(found(recent.clone()).await, StatusCode::OK, "used within the retention");
    let workdirs: Vec<(String, Option<String>)> =
        sqlx::query_as("SELECT id::text, workdir FROM jobs ORDER BY created_at").fetch_all(&db).await.unwrap();
    assert_eq!(workdirs, [(first_id.to_string(), None), (second_id.to_string(), Some(running.clone()))]);

    // A job naming an expired upload is refused on `workdir`; sending it again brings it back.
    let refused = f.app.post(&jobs, &f.tenant, job(&idle)).await.expect(StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(refused.error_fields(), ["workdir"]);
    assert_eq!(f.upload(&f.tenant, archive(&[("train.sh", 'f', "idle")]), OCTETS).await.0, StatusCode::CREATED);
    // Sent again, an upload is used anew: its last use moves, and it outlives the next round.
    sqlx::query("UPDATE uploads SET last_used_at = now() - interval '31 days' WHERE digest = $1")
        .bind(&recent)
        .execute(&db)
        .await
        .unwrap();
    let (status, again) = f.upload(&f.tenant, archive(&[("train.sh", 'f', "recent")]), OCTETS).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert!(again["last_used_at"].as_str().unwrap() > again["created_at"].as_str().unwrap(), "{again}");
    gpuplane::uploads::expire(&db, retention).await.unwrap();
    assert_eq!(found(recent).await, StatusCode::OK);
    assert!(!gpuplane::uploads::expire(&db, None).await.unwrap());
}
