//! Deployability: PostgreSQL over TLS with the real binary, and the Prometheus page's fleet figures.

use std::process::Command;

use axum::http::{Method, StatusCode};
use serde_json::json;
use sqlx::PgPool;

use crate::support::app::TestApp;
use crate::support::binary::{database_url, spawn_server, terminate};

/// The test database's URL with extra query parameters.
fn with_params(db: &PgPool, params: &str) -> String {
    let url = database_url(db);
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{params}")
}

fn migrate(url: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gpuplane"))
        .args(["migrate", "--database-url", url])
        .env("RUST_LOG", "warn")
        .output()
        .expect("run gpuplane migrate")
}

#[sqlx::test]
async fn migrate_and_serve_with_sslmode_require(db: PgPool) {
    let url = with_params(&db, "sslmode=require&application_name=gpuplane-tls-test");
    let out = migrate(&url);
    assert!(out.status.success(), "migrate over TLS: {}", String::from_utf8_lossy(&out.stderr));

    let (mut child, base) = spawn_server(&url, &[]);
    let ready = reqwest::get(format!("{base}/readyz")).await.unwrap();
    assert_eq!(ready.status(), 200);
    // The server's own connections (named by application_name) are encrypted, as the server reports them.
    let (tls, plain): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE s.ssl), count(*) FILTER (WHERE NOT s.ssl) \
           FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.application_name = 'gpuplane-tls-test' \
            AND a.datname = current_database()",
    )
    .fetch_one(&db)
    .await
    .unwrap();
    assert!(tls >= 1 && plain == 0, "server connections over TLS: {tls} encrypted, {plain} plain");
    assert!(terminate(&mut child).success());
}

/// The local server presents the Debian snakeoil certificate (self-signed, CN and SAN `localhost`). Used as the
/// root, verify-full accepts it for `localhost`; it refuses another root and a name the certificate lacks.
#[sqlx::test]
async fn verify_full_checks_the_root_and_the_host_name(db: PgPool) {
    let snakeoil = "/etc/ssl/certs/ssl-cert-snakeoil.pem";
    let base = database_url(&db);
    let dir = std::env::temp_dir().join(format!("gpuplane-ca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let wrong_ca = dir.join("wrong-ca.pem");
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1"])
        .args(["-subj", "/CN=not-the-postgres-ca", "-keyout"])
        .arg(dir.join("wrong-ca.key"))
        .arg("-out")
        .arg(&wrong_ca)
        .output()
        .expect("openssl");
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));

    let refused = migrate(&format!("{base}?sslmode=verify-full&sslrootcert={}", wrong_ca.display()));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && err.contains("invalid peer certificate: UnknownIssuer"), "{err}");

    if std::path::Path::new(snakeoil).exists() {
        let on_localhost = base.replacen("@127.0.0.1:", "@localhost:", 1);
        let ok = migrate(&format!("{on_localhost}?sslmode=verify-full&sslrootcert={snakeoil}"));
        assert!(ok.status.success(), "verify-full with the server's root: {}", String::from_utf8_lossy(&ok.stderr));
        let wrong_name = migrate(&format!("{base}?sslmode=verify-full&sslrootcert={snakeoil}"));
        let err = String::from_utf8_lossy(&wrong_name.stderr);
        assert!(!wrong_name.status.success() && err.contains("not valid for name"), "{err}");
    } else {
        eprintln!("skipping the verify-full success case: {snakeoil} is absent");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The value of one sample line (`name{labels} value`) on the page.
#[track_caller]
fn sample(page: &str, series: &str) -> f64 {
    let line = page
        .lines()
        .find(|l| l.strip_prefix(series).is_some_and(|rest| rest.starts_with(' ')))
        .unwrap_or_else(|| panic!("no series {series} in:\n{page}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[sqlx::test]
async fn metrics_report_the_fleet_by_pool_and_state(db: PgPool) {
    let app = TestApp::new(db.clone());
    let op = app.operator().await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let pool_a = app.pool(&op, "alpha", "h100").await;
    let pool_b = app.pool(&op, "beta", "h100").await;
    let a0 = app.node(&op, &pool_a, "a-0", 4).await;
    let a1 = app.node(&op, &pool_a, "a-1", 2).await;
    app.node(&op, &pool_b, "b-0", 1).await;
    app.post(&format!("/v1/admin/nodes/{a1}/cordon"), &op, json!({})).await.expect(StatusCode::OK);
    let lease = json!({ "pool_id": pool_a, "gpu_count": 2, "duration_hours": 1 });
    app.post("/v1/leases", &tenant, lease).await.expect(StatusCode::CREATED);
    let queued = json!({ "pool_id": pool_a, "gpu_count": 3, "duration_hours": 1, "queue": true });
    let q = app.post("/v1/leases", &tenant, queued).await.expect(StatusCode::CREATED);
    assert_eq!(q.body["state"], "queued");
    // One of a-0's two unallocated GPUs fails; b-0 goes offline.
    sqlx::query(
        "UPDATE gpus SET healthy = false WHERE id = (SELECT g.id FROM gpus g WHERE g.node_id = $1::uuid \
           AND g.held_by IS NULL \
           ORDER BY g.idx DESC LIMIT 1)",
    )
    .bind(&a0)
    .execute(&db)
    .await
    .unwrap();
    sqlx::query("UPDATE nodes SET liveness = 'offline' WHERE hostname = 'b-0'").execute(&db).await.unwrap();

    let res = app.call(Method::GET, "/metrics", None, None).await.expect(StatusCode::OK);
    let page = res.body.as_str().unwrap();
    let expect = [
        (r#"gpuplane_gpus{pool="alpha",state="allocated"}"#, 2.0),
        (r#"gpuplane_gpus{pool="alpha",state="unhealthy"}"#, 1.0),
        (r#"gpuplane_gpus{pool="alpha",state="unavailable"}"#, 2.0),
        (r#"gpuplane_gpus{pool="alpha",state="free"}"#, 1.0),
        (r#"gpuplane_gpus{pool="beta",state="unavailable"}"#, 1.0),
        (r#"gpuplane_gpus{pool="beta",state="free"}"#, 0.0),
        (r#"gpuplane_nodes{pool="alpha",state="ready"}"#, 2.0),
        (r#"gpuplane_nodes{pool="beta",state="offline"}"#, 1.0),
        (r#"gpuplane_nodes{pool="beta",state="ready"}"#, 0.0),
        (r#"gpuplane_nodes_admin{pool="alpha",admin_state="active"}"#, 1.0),
        (r#"gpuplane_nodes_admin{pool="alpha",admin_state="cordoned"}"#, 1.0),
        (r#"gpuplane_leases{pool="alpha",state="active"}"#, 1.0),
        (r#"gpuplane_leases{pool="alpha",state="queued"}"#, 1.0),
        (r#"gpuplane_leases{pool="beta",state="queued"}"#, 0.0),
        (r#"gpuplane_queue_oldest_age_seconds{pool="beta"}"#, 0.0),
        ("gpuplane_fleet_scrape_success", 1.0),
    ];
    for (series, value) in expect {
        assert_eq!(sample(page, series), value, "{series}");
    }
    let oldest = sample(page, r#"gpuplane_queue_oldest_age_seconds{pool="alpha"}"#);
    assert!((0.0..60.0).contains(&oldest), "{oldest}");
    // The pool's nodes were registered by their agents moments ago (their first heartbeat).
    let heard = sample(page, r#"gpuplane_heartbeat_age_max_seconds{pool="alpha"}"#);
    assert!((0.0..60.0).contains(&heard), "{heard}");
    let lag = sample(page, "gpuplane_metering_lag_seconds");
    assert!((0.0..60.0).contains(&lag), "{lag}");
    assert!(sample(page, "process_resident_memory_bytes") > 1e6);
    assert!(sample(page, "process_open_fds") >= 3.0);
    assert!(sample(page, "process_cpu_seconds_total") >= 0.0);
    assert!(sample(page, "gpuplane_db_pool_max_connections") >= 1.0);
    // Every family is described and typed, and every name is conventional.
    for family in page.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let name = family.split(['{', ' ']).next().unwrap();
        let base = name.trim_end_matches("_bucket").trim_end_matches("_sum").trim_end_matches("_count");
        assert!(base.starts_with("gpuplane_") || base.starts_with("process_"), "{name}");
        assert!(page.contains(&format!("# TYPE {base} ")), "no TYPE for {base}");
        assert!(page.contains(&format!("# HELP {base} ")), "no HELP for {base}");
    }
    assert!(page.contains(r#"gpuplane_http_requests_total{method="POST",route="/v1/leases",status="201"}"#));
}

/// A real agent with `--metrics-listen` serves its GPUs in dcgm-exporter's names, and the service's page shows
/// the node's heartbeats and its GPUs.
#[sqlx::test]
async fn the_agent_exports_dcgm_named_gpu_metrics_and_the_service_counts_heartbeats(db: PgPool) {
    use crate::support::agents::{Api, spawn_agent, state_dir, wait_until};
    let operator_key = gpuplane::cli::bootstrap_operator(&db, "deploy").await.unwrap();
    let (mut server, base) = spawn_server(&database_url(&db), &[("GPUPLANE_HEARTBEAT_INTERVAL_SECS", "1")]);
    let api = Api { base: base.clone(), client: reqwest::Client::new() };
    let op = api.token(&operator_key).await;
    let (_, join, _) = api.pool_and_funded_tenant(&op, "metrics", 1).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listen = format!("127.0.0.1:{port}");
    let dir = state_dir("metrics-agent");
    let (mut agent, _) = spawn_agent(&base, Some(&join), "gpu-host-7", &dir, &["--metrics-listen", &listen]);

    let exporter = format!("http://{listen}/metrics");
    let page = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    wait_until("the agent's GPU metrics", 20, || {
        let (exporter, page) = (exporter.clone(), page.clone());
        async move {
            let Ok(res) = reqwest::get(&exporter).await else { return false };
            let text = res.text().await.unwrap_or_default();
            let ready = text.lines().filter(|l| l.starts_with("DCGM_FI_DEV_GPU_UTIL{")).count() == 4;
            *page.lock().unwrap() = text;
            ready
        }
    })
    .await;
    let page = page.lock().unwrap().clone();
    assert!(page.contains("# TYPE DCGM_FI_DEV_GPU_UTIL gauge"), "{page}");
    let first = page.lines().find(|l| l.starts_with("DCGM_FI_DEV_FB_USED{gpu=\"0\"")).expect("FB_USED of GPU 0");
    for label in [r#"UUID="GPU-"#, r#"device="nvidia0""#, r#"modelName="NVIDIA H100"#, r#"Hostname="gpu-host-7""#] {
        assert!(first.contains(label), "{label} in {first}");
    }

    wait_until("the service's heartbeat figures", 20, || {
        let base = base.clone();
        async move {
            let text = reqwest::get(format!("{base}/metrics")).await.unwrap().text().await.unwrap();
            text.lines().any(|l| l.starts_with("gpuplane_heartbeats_total") && !l.ends_with(" 0"))
                && text.contains(r#"gpuplane_gpus{pool="h100-metrics",state="free"} 4"#)
                && text.contains(r#"gpuplane_nodes{pool="h100-metrics",state="ready"} 1"#)
        }
    })
    .await;
    terminate(&mut agent);
    terminate(&mut server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Text logs written to a pipe or a file carry no ANSI colour codes.
#[sqlx::test]
async fn text_logs_off_a_terminal_have_no_colour_codes(db: PgPool) {
    use std::io::Read;
    let (mut child, base) = crate::support::binary::spawn_server_with(
        &database_url(&db),
        "127.0.0.1:0",
        &[("RUST_LOG", "info"), ("GPUPLANE_LOG_FORMAT", "text")],
        std::process::Stdio::piped(),
    );
    let mut stderr = child.stderr.take().unwrap();
    assert_eq!(reqwest::get(format!("{base}/readyz")).await.unwrap().status(), 200);
    assert!(terminate(&mut child).success());
    let mut log = String::new();
    stderr.read_to_string(&mut log).unwrap();
    assert!(log.contains("listening"), "{log}");
    assert!(!log.contains('\u{1b}'), "no escape codes: {log:?}");
}
