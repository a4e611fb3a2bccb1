//! Tenant volumes through the API and the agent protocol: a volume is placed on a host whose agent reports a
//! store with room for everything promised on it, made, grown and destroyed by that agent's heartbeats; quotas,
//! capacity and bad input are refused with nothing changed; another tenant's volume is 404, and an agent's
//! report of a volume that is not its node's changes nothing. (The images themselves, on real loop mounts, are
//! tested in the agent's `volumes` module.)

use axum::http::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::app::TestApp;

const GIB: i64 = 1 << 30;

/// A heartbeat of an agent offering `stores` ([(kind, free GiB)]) and reporting `volumes`; its answer's orders.
async fn heartbeat(app: &TestApp, agent: &str, stores: &[(&str, i64)], volumes: Value) -> Vec<Value> {
    let stores: Vec<Value> = stores
        .iter()
        .map(|(kind, free)| json!({"kind": kind, "total_bytes": 1000 * GIB, "free_bytes": free * GIB}))
        .collect();
    let body = json!({"samples": [], "volume_stores": stores, "volumes": volumes});
    let res = app.post("/v1/agent/heartbeat", agent, body).await.expect(StatusCode::OK);
    res.body["volumes"].as_array().cloned().unwrap_or_default()
}

/// A pool selling `kinds` at 7 minor units per GiB-month, with two agent nodes; (operator, pool, [node ids],
/// [agent tokens]).
async fn storage_pool(app: &TestApp, kinds: Value) -> (String, String, Vec<String>, Vec<String>) {
    let op = app.operator().await;
    let pool = app.pool(&op, "vol-pool", "h100").await;
    app.put(&format!("/v1/admin/pools/{pool}/storage"), &op, json!({"volume_kinds": kinds}))
        .await
        .expect(StatusCode::OK);
    app.post(&format!("/v1/admin/pools/{pool}/storage-prices"), &op, json!({"price_per_gib_month_minor": 7}))
        .await
        .expect(StatusCode::CREATED);
    let (n1, a1) = app.agent_node(&op, &pool, "vol-host-1", 1).await;
    let (n2, a2) = app.agent_node(&op, &pool, "vol-host-2", 1).await;
    (op, pool, vec![n1, n2], vec![a1, a2])
}

#[sqlx::test]
async fn a_host_volume_is_made_grown_and_destroyed_by_its_hosts_agent(db: PgPool) {
    let app = TestApp::new(db);
    let (op, pool, _nodes, agents) = storage_pool(&app, json!(["host"])).await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    // Host 1 has 100 GiB free, host 2 only 40: a 60 GiB volume goes to host 1.
    heartbeat(&app, &agents[0], &[("host", 100)], json!([])).await;
    heartbeat(&app, &agents[1], &[("host", 40)], json!([])).await;
    let created = app
        .post("/v1/volumes", &tenant, json!({"name": "ckpt", "pool_id": pool, "size_gib": 60}))
        .await
        .expect(StatusCode::CREATED)
        .body;
    let id = created["id"].as_str().unwrap().to_string();
    assert_eq!((created["state"].as_str(), created["kind"].as_str()), (Some("creating"), Some("host")));
    assert_eq!(created["node"], "vol-host-1", "placed where there is room: {created}");
    // Host 1 has 40 GiB left unpromised, host 2 has 40 free: a 50 GiB volume fits neither.
    app.post("/v1/volumes", &tenant, json!({"name": "big", "pool_id": pool, "size_gib": 50}))
        .await
        .expect_problem(StatusCode::CONFLICT, "no_volume_store");

    // Only its host's agent is asked to make it, with every heartbeat until it reports it made.
    assert!(heartbeat(&app, &agents[1], &[("host", 40)], json!([])).await.is_empty());
    let orders = heartbeat(&app, &agents[0], &[("host", 100)], json!([])).await;
    assert_eq!(orders, vec![json!({"volume_id": id, "kind": "host", "action": "hold", "size_bytes": 60 * GIB})]);
    // Another node's agent reporting it made changes nothing.
    let forged = json!([{"volume_id": id, "outcome": "ready", "size_bytes": 60 * GIB, "used_bytes": 1}]);
    heartbeat(&app, &agents[1], &[("host", 40)], forged).await;
    let volume = app.get(&format!("/v1/volumes/{id}"), &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(volume["state"], "creating");
    let made = json!([{"volume_id": id, "outcome": "ready", "size_bytes": 60 * GIB, "used_bytes": 4096}]);
    heartbeat(&app, &agents[0], &[("host", 100)], made).await;
    let volume = app.get(&format!("/v1/volumes/{id}"), &tenant).await.expect(StatusCode::OK).body;
    assert_eq!((volume["state"].as_str(), volume["used_bytes"].as_i64()), (Some("ready"), Some(4096)), "{volume}");
    assert!(volume["ready_at"].is_string() && volume["available"] == true);

    // Grow: never shrink; the order carries the new size; a grow the host cannot hold is refused.
    app.patch(&format!("/v1/volumes/{id}"), &tenant, json!({"size_gib": 59}))
        .await
        .expect(StatusCode::UNPROCESSABLE_ENTITY);
    app.patch(&format!("/v1/volumes/{id}"), &tenant, json!({"size_gib": 101}))
        .await
        .expect_problem(StatusCode::CONFLICT, "no_volume_store");
    let grown = app.patch(&format!("/v1/volumes/{id}"), &tenant, json!({"size_gib": 80})).await.expect(StatusCode::OK);
    assert_eq!(grown.body["size_gib"], 80);
    let orders = heartbeat(&app, &agents[0], &[("host", 100)], json!([])).await;
    assert_eq!(orders[0]["size_bytes"], 80 * GIB);
    // A grow that failed on the host is kept as the volume's reason; the volume stays ready.
    let failed = json!([{"volume_id": id, "outcome": "failed", "message": "resize2fs: no space"}]);
    heartbeat(&app, &agents[0], &[("host", 100)], failed).await;
    let volume = app.get(&format!("/v1/volumes/{id}"), &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(
        (volume["state"].as_str(), volume["state_reason"].as_str()),
        (Some("ready"), Some("resize2fs: no space"))
    );

    // Delete: deleting until its agent destroyed the data, then deleted; the name is free again.
    let deleted = app.delete(&format!("/v1/volumes/{id}"), &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(deleted["state"], "deleting");
    assert!(deleted["deleted_at"].is_string());
    let orders = heartbeat(&app, &agents[0], &[("host", 100)], json!([])).await;
    assert_eq!(orders[0]["action"], "destroy");
    heartbeat(&app, &agents[0], &[("host", 100)], json!([{"volume_id": id, "outcome": "destroyed"}])).await;
    assert!(heartbeat(&app, &agents[0], &[("host", 100)], json!([])).await.is_empty());
    let volume = app.get(&format!("/v1/volumes/{id}"), &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(volume["state"], "deleted");
    let listed = app.get("/v1/volumes", &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(listed, json!([]), "deleted volumes are listed only when asked");
    let all = app.get("/v1/volumes?include_deleted=true", &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(all.as_array().unwrap().len(), 1);
    app.post("/v1/volumes", &tenant, json!({"name": "ckpt", "pool_id": pool, "size_gib": 10}))
        .await
        .expect(StatusCode::CREATED);
}

#[sqlx::test]
async fn a_pool_volume_counts_everything_the_shared_store_promised(db: PgPool) {
    let app = TestApp::new(db);
    let (op, pool, _nodes, agents) = storage_pool(&app, json!(["host", "pool"])).await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    // Both hosts mount the same shared filesystem: 100 GiB free there.
    heartbeat(&app, &agents[0], &[("pool", 100)], json!([])).await;
    heartbeat(&app, &agents[1], &[("pool", 100), ("host", 500)], json!([])).await;
    let a = app.post("/v1/volumes", &tenant, json!({"name": "a", "pool_id": pool, "size_gib": 70})).await;
    assert_eq!(a.expect(StatusCode::CREATED).body["kind"], "pool", "pool is the default where offered");
    // 30 GiB of the shared store are left unpromised, whichever host would make it.
    app.post("/v1/volumes", &tenant, json!({"name": "b", "pool_id": pool, "size_gib": 31}))
        .await
        .expect_problem(StatusCode::CONFLICT, "no_volume_store");
    app.post("/v1/volumes", &tenant, json!({"name": "b", "pool_id": pool, "size_gib": 30}))
        .await
        .expect(StatusCode::CREATED);
    // A host volume asked for explicitly goes to the one host with a host store.
    let h =
        app.post("/v1/volumes", &tenant, json!({"name": "h", "pool_id": pool, "size_gib": 1, "kind": "host"})).await;
    assert_eq!(h.expect(StatusCode::CREATED).body["node"], "vol-host-2");
}

#[sqlx::test]
async fn quotas_capacity_and_bad_input_are_refused_and_change_nothing(db: PgPool) {
    let app = TestApp::new(db);
    let (op, pool, _nodes, agents) = storage_pool(&app, json!(["host"])).await;
    let (tenant_id, tenant) = app.tenant_admin(&op, "acme").await;
    heartbeat(&app, &agents[0], &[("host", 900)], json!([])).await;
    let create = |body: Value| {
        let app = &app;
        let tenant = tenant.clone();
        async move { app.post("/v1/volumes", &tenant, body).await }
    };
    let bad = create(json!({"name": "../etc", "pool_id": pool, "size_gib": 0, "delete_after_idle_days": 0})).await;
    let bad = bad.expect(StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(bad.error_fields(), ["name", "size_gib", "delete_after_idle_days"], "{}", bad.body);
    create(json!({"name": "x", "pool_id": pool, "size_gib": 1, "mount": "/"}))
        .await
        .expect(StatusCode::UNPROCESSABLE_ENTITY);
    create(json!({"name": "x", "pool_id": pool, "size_gib": 65537})).await.expect(StatusCode::UNPROCESSABLE_ENTITY);
    let kind = create(json!({"name": "x", "pool_id": pool, "size_gib": 1, "kind": "pool"})).await;
    assert_eq!(kind.expect(StatusCode::UNPROCESSABLE_ENTITY).error_fields(), ["kind"]);
    create(json!({"name": "x", "pool_id": uuid::Uuid::now_v7(), "size_gib": 1})).await.expect(StatusCode::NOT_FOUND);
    // A pool without a storage price sells no volumes.
    let unpriced = app.pool(&op, "no-price", "h100").await;
    app.put(&format!("/v1/admin/pools/{unpriced}/storage"), &op, json!({"volume_kinds": ["host"]}))
        .await
        .expect(StatusCode::OK);
    create(json!({"name": "x", "pool_id": unpriced, "size_gib": 1}))
        .await
        .expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "volumes_not_offered");

    // A tenant without balance: 402, nothing made.
    let (_, broke) = app.tenant_key_without_balance(&op, "broke", gpuplane::auth::Role::TenantAdmin).await;
    let broke = app.token_for(&broke).await;
    app.post("/v1/volumes", &broke, json!({"name": "x", "pool_id": pool, "size_gib": 1}))
        .await
        .expect_problem(StatusCode::PAYMENT_REQUIRED, "insufficient_balance");
    assert_eq!(app.get("/v1/volumes", &broke).await.expect(StatusCode::OK).body, json!([]));

    // Quotas: 2 volumes, 100 GiB; the pool's capacity: 150 GiB.
    app.put(
        &format!("/v1/admin/tenants/{tenant_id}/volume-quotas"),
        &op,
        json!({"max_volumes": 2, "max_volume_gib": 100}),
    )
    .await
    .expect(StatusCode::OK);
    app.put(&format!("/v1/admin/pools/{pool}/storage"), &op, json!({"volume_kinds": ["host"], "capacity_gib": 150}))
        .await
        .expect(StatusCode::OK);
    create(json!({"name": "a", "pool_id": pool, "size_gib": 101}))
        .await
        .expect_problem(StatusCode::CONFLICT, "volume_quota_exceeded");
    let a = create(json!({"name": "a", "pool_id": pool, "size_gib": 60})).await.expect(StatusCode::CREATED).body;
    create(json!({"name": "a", "pool_id": pool, "size_gib": 1}))
        .await
        .expect_problem(StatusCode::CONFLICT, "volume_name_taken");
    create(json!({"name": "b", "pool_id": pool, "size_gib": 40})).await.expect(StatusCode::CREATED);
    create(json!({"name": "c", "pool_id": pool, "size_gib": 1}))
        .await
        .expect_problem(StatusCode::CONFLICT, "volume_quota_exceeded");
    let grow = format!("/v1/volumes/{}", a["id"].as_str().unwrap());
    app.patch(&grow, &tenant, json!({"size_gib": 61}))
        .await
        .expect_problem(StatusCode::CONFLICT, "volume_quota_exceeded");
    // Another tenant without quotas meets the pool's capacity: 100 of 150 GiB are taken.
    let (_, other) = app.tenant_admin(&op, "globex").await;
    app.post("/v1/volumes", &other, json!({"name": "a", "pool_id": pool, "size_gib": 51}))
        .await
        .expect_problem(StatusCode::CONFLICT, "pool_storage_full");
    let listed = app.get("/v1/volumes", &tenant).await.expect(StatusCode::OK).body;
    let sizes: Vec<i64> = listed.as_array().unwrap().iter().map(|v| v["size_gib"].as_i64().unwrap()).collect();
    assert_eq!(sizes, [40, 60], "only the two volumes that fit were made, unchanged by the refusals");
    assert_eq!(app.get("/v1/volumes", &other).await.expect(StatusCode::OK).body, json!([]));

    // Operators' settings are checked too.
    let bad = app.put(&format!("/v1/admin/pools/{pool}/storage"), &op, json!({"volume_kinds": ["nfs"]})).await;
    bad.expect(StatusCode::UNPROCESSABLE_ENTITY);
    app.post(&format!("/v1/admin/pools/{pool}/storage-prices"), &op, json!({"price_per_gib_month_minor": -1}))
        .await
        .expect(StatusCode::UNPROCESSABLE_ENTITY);
    // An agent's report out of range is refused whole.
    let res = app
        .post(
            "/v1/agent/heartbeat",
            &agents[0],
            json!({"samples": [], "volume_stores": [{"kind": "host", "total_bytes": 1, "free_bytes": 2}]}),
        )
        .await;
    assert_eq!(res.expect(StatusCode::UNPROCESSABLE_ENTITY).error_fields(), ["volume_stores[0]"]);
}

#[sqlx::test]
async fn another_tenants_volume_is_not_found(db: PgPool) {
    let app = TestApp::new(db);
    let (op, pool, _nodes, agents) = storage_pool(&app, json!(["host"])).await;
    heartbeat(&app, &agents[0], &[("host", 100)], json!([])).await;
    let (_, acme) = app.tenant_admin(&op, "acme").await;
    let (_, globex) = app.tenant_admin(&op, "globex").await;
    let id = app
        .post("/v1/volumes", &acme, json!({"name": "data", "pool_id": pool, "size_gib": 5}))
        .await
        .expect(StatusCode::CREATED)
        .body["id"]
        .as_str()
        .unwrap()
        .to_string();
    let path = format!("/v1/volumes/{id}");
    app.get(&path, &globex).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    app.patch(&path, &globex, json!({"size_gib": 6})).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    app.delete(&path, &globex).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    assert_eq!(app.get("/v1/volumes", &globex).await.expect(StatusCode::OK).body, json!([]));
    // Globex may use the same name: names are per tenant.
    app.post("/v1/volumes", &globex, json!({"name": "data", "pool_id": pool, "size_gib": 5}))
        .await
        .expect(StatusCode::CREATED);
    let volume = app.get(&path, &acme).await.expect(StatusCode::OK).body;
    assert_eq!((volume["state"].as_str(), volume["size_gib"].as_i64()), (Some("creating"), Some(5)));
}

/// The real server (heartbeats every second) with a pool selling `kinds` of storage at 7 per GiB-month, a join
/// token for `hosts` agents and a funded tenant: (server, base URL, API, operator token, pool, join token, tenant).
async fn e2e_storage_pool(
    db: &PgPool,
    name: &str,
    kinds: Value,
    hosts: i32,
) -> (crate::support::binary::Proc, String, crate::support::agents::Api, String, String, String, String) {
    use crate::support::agents::{Api, HEARTBEAT_1S};
    use crate::support::binary::{database_url, spawn_server};
    let operator_key = gpuplane::cli::bootstrap_operator(db, "e2e").await.unwrap();
    let (server, base) = spawn_server(&database_url(db), HEARTBEAT_1S);
    let api = Api { base: base.clone(), client: reqwest::Client::new() };
    let op = api.token(&operator_key).await;
    let (pool, join, tenant) = api.pool_and_funded_tenant(&op, name, hosts).await;
    let storage = json!({"volume_kinds": kinds});
    let (status, body) =
        api.call(reqwest::Method::PUT, &format!("/v1/admin/pools/{pool}/storage"), &op, Some(storage)).await;
    assert_eq!(status, 200, "{body}");
    api.post(&format!("/v1/admin/pools/{pool}/storage-prices"), &op, json!({"price_per_gib_month_minor": 7})).await;
    (server, base, api, op, pool, join, tenant)
}

/// Create a 1 GiB volume `name` as soon as an agent has reported a store for it (its first heartbeat); its id.
pub(crate) async fn create_once_stored(
    api: &crate::support::agents::Api,
    tenant: &str,
    pool: &str,
    name: &str,
) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let body = json!({"name": name, "pool_id": pool, "size_gib": 1});
        let (status, body) = api.call(reqwest::Method::POST, "/v1/volumes", tenant, Some(body)).await;
        if status == 201 {
            return body["id"].as_str().unwrap().to_string();
        }
        assert!(std::time::Instant::now() < deadline, "no store known after 30 s: {status} {body}");
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
}

/// The mount options of the mount at `path`, if something is mounted there (this process's mount table).
fn mount_options(path: &std::path::Path) -> Option<String> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let path = path.to_str().unwrap();
    table.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        (fields.get(4) == Some(&path)).then(|| fields[5].to_string())
    })
}

/// End to end, with the real server and a real agent process making real ext4 images on loop devices (root):
/// the volume is made and mounted `nosuid,nodev`, survives the agent's SIGKILL and a lost mount (the restarted
/// agent mounts it again, data intact), and its data is destroyed with it.
#[sqlx::test]
async fn a_real_agent_makes_keeps_and_destroys_a_volume(db: PgPool) {
    use std::os::unix::fs::MetadataExt;

    use crate::support::agents::{spawn_agent, state_dir, wait_until};

    assert_eq!(std::fs::metadata("/proc/self").unwrap().uid(), 0, "volumes are loop mounts: run the tests as root");
    let (_server, base, api, _op, pool, join, tenant) = e2e_storage_pool(&db, "vol", json!(["host"]), 1).await;

    let dir = state_dir("vol-agent");
    let store = dir.with_extension("store");
    let store_flag = format!("host={}", store.display());
    let (mut agent, _) = spawn_agent(&base, Some(&join), "vol-node-1", &dir, &["--volume-store", &store_flag]);
    // Until its first heartbeat reports the store, no host has room.
    let id = create_once_stored(&api, &tenant, &pool, "data").await;
    let volume = format!("/v1/volumes/{id}");
    wait_until("the volume is made", 60, || async { api.get(&volume, &tenant).await["state"] == "ready" }).await;

    let image = store.join("images").join(format!("{id}.img"));
    let mount = dir.join("volume-mounts/host").join(&id);
    let meta = std::fs::metadata(&image).expect("the image is in the store, named by the volume's id");
    assert_eq!(meta.len(), GIB as u64, "the image is the volume's size");
    assert!(meta.blocks() * 512 < GIB as u64 / 4, "sparse: {} bytes allocated", meta.blocks() * 512);
    let options = mount_options(&mount).expect("the volume is mounted");
    assert!(options.contains("nosuid") && options.contains("nodev"), "{options}");
    std::fs::write(mount.join("checkpoint.pt"), b"step 7").unwrap();

    // SIGKILL, and the mount is lost as on a reboot: the restarted agent mounts it again, data intact.
    agent.kill().unwrap();
    agent.wait().unwrap();
    let out = std::process::Command::new("umount").arg(&mount).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (_agent, _) = spawn_agent(&base, None, "vol-node-1", &dir, &["--volume-store", &store_flag]);
    assert!(mount_options(&mount).is_some(), "mounted again at start");
    assert_eq!(std::fs::read(mount.join("checkpoint.pt")).unwrap(), b"step 7");
    wait_until("its use is reported", 30, || async {
        api.get(&volume, &tenant).await["used_bytes"].as_i64() > Some(0)
    })
    .await;

    // Deleted: the agent destroys the image and the mount; the volume is deleted.
    let (status, body) = api.call(reqwest::Method::DELETE, &volume, &tenant, None).await;
    assert_eq!((status, body["state"].as_str()), (200, Some("deleting")), "{body}");
    wait_until("the volume is destroyed", 60, || async { api.get(&volume, &tenant).await["state"] == "deleted" }).await;
    assert!(!image.exists(), "the image is gone with its data");
    assert!(mount_options(&mount).is_none(), "and so is its mount");
    let _ = std::fs::remove_dir_all(&store);
}

/// A made volume (its agent reported it ready) of `tenant` in `pool`: its id.
async fn ready_volume(app: &TestApp, tenant: &str, pool: &str, agent: &str, body: Value) -> String {
    let mut body = body;
    body["pool_id"] = json!(pool);
    let created = app.post("/v1/volumes", tenant, body).await.expect(StatusCode::CREATED).body;
    let id = created["id"].as_str().unwrap().to_string();
    let stores = [("host", 500), ("pool", 500)];
    let made = json!([{"volume_id": id, "outcome": "ready", "size_bytes": GIB, "used_bytes": 0}]);
    heartbeat(app, agent, &stores, made).await;
    id
}

#[sqlx::test]
async fn volumes_attach_read_write_to_one_lease_or_read_only_to_many_and_detach_with_its_end(db: PgPool) {
    let app = TestApp::new(db);
    let (op, pool, nodes, agents) = storage_pool(&app, json!(["host", "pool"])).await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let (_, other) = app.tenant_admin(&op, "globex").await;
    for agent in &agents {
        heartbeat(&app, agent, &[("host", 500), ("pool", 500)], json!([])).await;
    }
    // Two one-GPU leases, one on each host.
    let lease = |body: Value| {
        let (app, tenant) = (&app, tenant.clone());
        async move { app.post("/v1/leases", &tenant, body).await.expect(StatusCode::CREATED).body }
    };
    let one = json!({"pool_id": pool, "gpu_count": 1, "duration_hours": 1});
    let (l1, l2) = (lease(one.clone()).await, lease(one).await);
    let node_of = |l: &Value| l["gpus"][0]["node_id"].as_str().unwrap().to_string();
    assert_ne!(node_of(&l1), node_of(&l2));
    let (l1, l2, host1) =
        (l1["id"].as_str().unwrap().to_string(), l2["id"].as_str().unwrap().to_string(), node_of(&l1));
    let agent1 = &agents[nodes.iter().position(|n| *n == host1).unwrap()];
    let shared =
        ready_volume(&app, &tenant, &pool, agent1, json!({"name": "shared", "size_gib": 1, "kind": "pool"})).await;
    let local =
        ready_volume(&app, &tenant, &pool, agent1, json!({"name": "local", "size_gib": 1, "kind": "host"})).await;
    let attach = |lease: &str, body: Value| {
        let (app, tenant, path) = (&app, tenant.clone(), format!("/v1/leases/{lease}/volumes"));
        async move { app.post(&path, &tenant, body).await }
    };

    // Read-write on lease 1; then neither read-write nor read-only on lease 2.
    let a = attach(&l1, json!({"volume_id": shared, "mount": "ckpt"})).await.expect(StatusCode::CREATED).body;
    assert_eq!((a["mount_path"].as_str(), a["read_only"].as_bool()), (Some("/volumes/ckpt"), Some(false)));
    attach(&l2, json!({"volume_id": shared})).await.expect_problem(StatusCode::CONFLICT, "volume_in_use");
    attach(&l2, json!({"volume_id": shared, "read_only": true}))
        .await
        .expect_problem(StatusCode::CONFLICT, "volume_in_use");
    attach(&l1, json!({"volume_id": local, "mount": "ckpt"}))
        .await
        .expect_problem(StatusCode::CONFLICT, "volume_already_attached");
    // A host volume reaches only leases on its host; bad mounts and other tenants' volumes are refused.
    let far = attach(&l2, json!({"volume_id": local})).await;
    far.expect_problem(StatusCode::UNPROCESSABLE_ENTITY, "volume_out_of_reach");
    let bad =
        attach(&l1, json!({"volume_id": local, "mount": "../etc"})).await.expect(StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(bad.error_fields(), ["mount"]);
    let theirs =
        ready_volume(&app, &other, &pool, agent1, json!({"name": "theirs", "size_gib": 1, "kind": "pool"})).await;
    attach(&l1, json!({"volume_id": theirs})).await.expect_problem(StatusCode::NOT_FOUND, "not_found");
    app.post(&format!("/v1/leases/{l1}/volumes"), &other, json!({"volume_id": theirs}))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "not_found");
    attach(&l1, json!({"volume_id": local, "read_only": true})).await.expect(StatusCode::CREATED);

    // The lease's agent is told; the volume says where it is attached and cannot be deleted meanwhile.
    let list = app.get("/v1/agent/assignments", agent1).await.expect(StatusCode::OK).body;
    let listed = list["leases"].as_array().unwrap().iter().find(|l| l["lease_id"] == l1.as_str()).unwrap().clone();
    let mounts: Vec<(&str, &str, bool)> = listed["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["mount"].as_str().unwrap(), v["kind"].as_str().unwrap(), v["read_only"].as_bool().unwrap()))
        .collect();
    assert_eq!(mounts, [("ckpt", "pool", false), ("local", "host", true)]);
    let volume = app.get(&format!("/v1/volumes/{shared}"), &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(volume["attached_to"], json!([l1]));
    app.delete(&format!("/v1/volumes/{shared}"), &tenant).await.expect_problem(StatusCode::CONFLICT, "volume_attached");

    // A job on the lease checkpoints to its read-write volume unless it says otherwise; while it runs, the
    // lease's volumes cannot change.
    app.post("/v1/admin/templates", &op, json!({"name": "sleeper", "argv": ["/bin/sleep", "600"]}))
        .await
        .expect(StatusCode::CREATED);
    let job = app.post(&format!("/v1/leases/{l1}/jobs"), &tenant, json!({"template": "sleeper"})).await;
    let job_id = job.expect(StatusCode::CREATED).body["id"].as_str().unwrap().to_string();
    let list = app.get("/v1/agent/assignments", agent1).await.expect(StatusCode::OK).body;
    let env = &list["assignments"][0]["spec"]["env"];
    assert_eq!(env["GPUPLANE_CHECKPOINT_DIR"], format!("/volumes/ckpt/checkpoints/{job_id}"), "{env}");
    app.delete(&format!("/v1/leases/{l1}/volumes/{shared}"), &tenant)
        .await
        .expect_problem(StatusCode::CONFLICT, "lease_busy");
    app.post(&format!("/v1/jobs/{job_id}/cancel"), &tenant, json!({})).await.expect(StatusCode::OK);
    let node_id = &list["assignments"][0]["job_node_id"];
    app.post(
        &format!("/v1/agent/assignments/{}/status", node_id.as_str().unwrap()),
        agent1,
        json!({"state": "cancelled"}),
    )
    .await
    .expect(StatusCode::OK);

    // Detached: now read-only on both leases; a read-write attach is refused while anyone reads it.
    app.delete(&format!("/v1/leases/{l1}/volumes/{shared}"), &tenant).await.expect(StatusCode::NO_CONTENT);
    attach(&l1, json!({"volume_id": shared, "read_only": true})).await.expect(StatusCode::CREATED);
    attach(&l2, json!({"volume_id": shared, "read_only": true})).await.expect(StatusCode::CREATED);
    let rw = json!({"volume_id": shared, "mount": "rw"});
    attach(&l2, rw).await.expect_problem(StatusCode::CONFLICT, "volume_in_use");

    // The lease's end detaches its volumes; the data stays.
    app.post(&format!("/v1/leases/{l1}/release"), &tenant, json!({})).await.expect(StatusCode::OK);
    let volume = app.get(&format!("/v1/volumes/{shared}"), &tenant).await.expect(StatusCode::OK).body;
    assert_eq!((volume["attached_to"].clone(), volume["state"].as_str()), (json!([l2]), Some("ready")));
    let local_now = app.get(&format!("/v1/volumes/{local}"), &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(local_now["attached_to"], json!([]));
    app.delete(&format!("/v1/volumes/{local}"), &tenant).await.expect(StatusCode::OK);
    assert_eq!(app.get(&format!("/v1/leases/{l1}/volumes"), &tenant).await.expect(StatusCode::OK).body, json!([]));
}

/// A lease may name its volumes when it is created: a host volume places it on the volume's host (refused, with
/// nothing written, when that host has no room), a pool volume lets it go anywhere in the pool; bad or foreign
/// volumes are refused by field. A lease naming a cached model goes on a host whose model cache holds it.
#[sqlx::test]
async fn a_lease_goes_where_its_volumes_and_its_cached_model_are(db: PgPool) {
    let app = TestApp::new(db);
    let (op, pool, nodes, agents) = storage_pool(&app, json!(["host", "pool"])).await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    let (_, other) = app.tenant_admin(&op, "globex").await;
    for agent in &agents {
        heartbeat(&app, agent, &[("host", 500), ("pool", 500)], json!([])).await;
    }
    let node_of = |l: &Value| l["gpus"][0]["node_id"].as_str().unwrap().to_string();
    let lease = |body: Value| {
        let mut body = body;
        body["pool_id"] = json!(pool);
        body["duration_hours"] = json!(1);
        body["gpu_count"] = json!(1);
        let (app, tenant) = (&app, tenant.clone());
        async move { app.post("/v1/leases", &tenant, body).await }
    };
    let leases_now = || {
        let (app, tenant) = (&app, tenant.clone());
        async move { app.get("/v1/leases", &tenant).await.expect(StatusCode::OK).body["items"].as_array().unwrap().len() }
    };
    let release = |id: String| {
        let (app, tenant) = (&app, tenant.clone());
        async move { app.post(&format!("/v1/leases/{id}/release"), &tenant, json!({})).await.expect(StatusCode::OK) }
    };

    // The model cache: the second host reports a model (a bad report is refused); the pool lists it; a lease that
    // names it goes there although the first host fits as well (both have one free GPU; best fit takes the lower id).
    let second = nodes.iter().max().unwrap().clone();
    let second_agent = &agents[nodes.iter().position(|n| *n == second).unwrap()];
    let bad = json!({"samples": [], "cached_models": ["../etc", "org/m"]});
    let refused = app.post("/v1/agent/heartbeat", second_agent, bad).await.expect(StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(refused.error_fields(), ["cached_models[0]"]);
    let report = json!({"samples": [], "cached_models": ["acme-labs/tiny-llama", "gpt2"]});
    app.post("/v1/agent/heartbeat", second_agent, report).await.expect(StatusCode::OK);
    let models = app.get(&format!("/v1/pools/{pool}/models"), &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(models[0]["model_id"], "acme-labs/tiny-llama");
    assert_eq!((models[0]["hosts"].as_i64(), models[0]["free_gpus"].as_i64()), (Some(1), Some(1)));
    let cached = lease(json!({"cached_model": "acme-labs/tiny-llama"})).await.expect(StatusCode::CREATED).body;
    assert_eq!(node_of(&cached), second, "placed where the model is cached");
    let plain = lease(json!({"cached_model": "nobody/has-this"})).await.expect(StatusCode::CREATED).body;
    assert_ne!(node_of(&plain), second, "an uncached model places the lease as usual");
    lease(json!({"cached_model": "a--b"})).await.expect(StatusCode::UNPROCESSABLE_ENTITY);
    release(cached["id"].as_str().unwrap().into()).await;
    release(plain["id"].as_str().unwrap().into()).await;

    // A host volume (made on the host the service chose) and a pool volume, both reported ready by their agent.
    let made = |name: &str, kind: &str| {
        let (app, tenant, pool, agents) = (&app, tenant.clone(), pool.clone(), agents.clone());
        let body = json!({"name": name, "size_gib": 1, "kind": kind, "pool_id": pool});
        async move {
            let created = app.post("/v1/volumes", &tenant, body).await.expect(StatusCode::CREATED).body;
            let id = created["id"].as_str().unwrap().to_string();
            let ready = json!([{"volume_id": id, "outcome": "ready", "size_bytes": GIB, "used_bytes": 0}]);
            for agent in &agents {
                // Only its own host's report counts.
                heartbeat(app, agent, &[("host", 500), ("pool", 500)], ready.clone()).await;
            }
            let volume = app.get(&format!("/v1/volumes/{id}"), &tenant).await.expect(StatusCode::OK).body;
            assert_eq!(volume["state"], "ready");
            (id, volume["node"].as_str().unwrap().to_string())
        }
    };
    let (local, local_host) = made("local", "host").await;
    let (shared, _) = made("shared", "pool").await;
    let (far, far_host) = made("far", "host").await;
    assert_ne!(far_host, local_host, "the second host volume goes to the host with the most room");

    // Refused by field, with nothing written: too many, with `queue`, a bad mount, another tenant's volume, two
    // host volumes on different hosts.
    let before = leases_now().await;
    let many: Vec<Value> = (0..17).map(|_| json!({"volume_id": shared, "read_only": true})).collect();
    assert_eq!(
        lease(json!({"volumes": many})).await.expect(StatusCode::UNPROCESSABLE_ENTITY).error_fields(),
        ["volumes"]
    );
    let queued = json!({"volumes": [{"volume_id": shared}], "queue": true});
    assert_eq!(lease(queued).await.expect(StatusCode::UNPROCESSABLE_ENTITY).error_fields(), ["volumes"]);
    let bad_mount = json!({"volumes": [{"volume_id": shared, "mount": "../x"}]});
    assert_eq!(lease(bad_mount).await.expect(StatusCode::UNPROCESSABLE_ENTITY).error_fields(), ["volumes[0].mount"]);
    let theirs_body = json!({"name": "theirs", "size_gib": 1, "kind": "pool", "pool_id": pool});
    let theirs = app.post("/v1/volumes", &other, theirs_body).await.expect(StatusCode::CREATED).body["id"].clone();
    let foreign = json!({"volumes": [{"volume_id": shared, "read_only": true}, {"volume_id": theirs}]});
    assert_eq!(lease(foreign).await.expect(StatusCode::UNPROCESSABLE_ENTITY).error_fields(), ["volumes[1].volume_id"]);
    let apart = json!({"volumes": [{"volume_id": local, "read_only": true}, {"volume_id": far, "read_only": true}]});
    assert_eq!(lease(apart).await.expect(StatusCode::UNPROCESSABLE_ENTITY).error_fields(), ["volumes[1].volume_id"]);
    let spread = json!({"pool_id": pool, "duration_hours": 1, "gpu_count": 2, "placement": "spread",
                        "volumes": [{"volume_id": shared}]});
    let spread = app.post("/v1/leases", &tenant, spread).await.expect(StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(spread.error_fields(), ["placement"], "a read-write volume is written on one host");
    let two = json!({"pool_id": pool, "duration_hours": 1, "gpu_count": 2, "volumes": [{"volume_id": shared}]});
    let two = app.post("/v1/leases", &tenant, two).await.expect(StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(two.error_fields(), ["gpu_count"], "one host: no host of the pool has 2 GPUs, so it never fits");
    assert_eq!(leases_now().await, before);

    // The host volume takes its lease to its host; the pool volume's lease then goes to the other one.
    let body = json!({"volumes": [{"volume_id": local, "mount": "ckpt"}, {"volume_id": shared, "read_only": true}]});
    let with_local = lease(body).await.expect(StatusCode::CREATED).body;
    let local_node = node_of(&with_local);
    let hosts = app.get("/v1/admin/nodes", &op).await.expect(StatusCode::OK).body;
    let hostname_of = |id: &str| {
        let items = hosts["items"].as_array().or(hosts.as_array()).unwrap();
        items.iter().find(|n| n["id"] == id).unwrap()["hostname"].as_str().unwrap().to_string()
    };
    assert_eq!(hostname_of(&local_node), local_host, "placed on the host volume's host");
    let with_local_id = with_local["id"].as_str().unwrap().to_string();
    let attached = app.get(&format!("/v1/leases/{with_local_id}/volumes"), &tenant).await.expect(StatusCode::OK).body;
    let mounts: Vec<(&str, bool)> = attached
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["mount_path"].as_str().unwrap(), a["read_only"] == true))
        .collect();
    assert_eq!(mounts, [("/volumes/ckpt", false), ("/volumes/shared", true)]);

    // Its host is full now: another lease with it is refused saying why, and nothing is written. A read-write
    // attach of an attached volume is refused as the attach route refuses it.
    let before = leases_now().await;
    let again = lease(json!({"volumes": [{"volume_id": local, "read_only": true}]})).await;
    let problem = again.expect_problem(StatusCode::CONFLICT, "insufficient_capacity");
    assert!(problem.body["detail"].as_str().unwrap().contains(&local_host), "{}", problem.body);
    lease(json!({"volumes": [{"volume_id": shared}]})).await.expect_problem(StatusCode::CONFLICT, "volume_in_use");
    assert_eq!(leases_now().await, before);
    let with_shared =
        lease(json!({"volumes": [{"volume_id": shared, "read_only": true}]})).await.expect(StatusCode::CREATED).body;
    assert_ne!(node_of(&with_shared), local_node);
    release(with_local_id).await;
    release(with_shared["id"].as_str().unwrap().into()).await;
    let volume = app.get(&format!("/v1/volumes/{local}"), &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(volume["attached_to"], json!([]));
}

/// End to end, two real agents on two "hosts" sharing one pool store (as a pool's shared filesystem), real
/// sandboxed jobs: a pool volume written on one host is read on the other after the first lease lets it go, its
/// files given to the new lease's user; writing past its size gives ENOSPC in the job; a link out of the volume
/// and a hard link to a host file lead nowhere (the agent, root, never follows a tenant's link). With real torch:
/// the runtime checkpoints into the pool volume on one host and the next lease's job, on the other host, resumes
/// from it with the steps and the loss going on; the same with a host volume, each lease placed on its host.
#[sqlx::test]
async fn a_pool_volume_follows_its_tenant_to_another_host(db: PgPool) {
    use std::os::unix::fs::MetadataExt;

    use crate::support::agents::{agent_command_simulating, start_agent, state_dir, wait_until};
    use crate::support::jobs::wait_job;

    let (_server, base, api, op, pool, join, tenant) =
        e2e_storage_pool(&db, "volpool", json!(["pool", "host"]), 2).await;
    api.post("/v1/admin/templates", &op, json!({ "name": "run", "argv": ["{command}"] })).await;

    let shared = state_dir("vol-shared-store");
    let store = format!("pool={}", shared.display());

    let (dir_a, dir_b) = (state_dir("vol-a"), state_dir("vol-b"));
    // Hosts of one GPU each, whose jobs see the runtime's torch environment.
    let (venv, python_root) = crate::support::torch::runtime_venv();
    let example = crate::support::torch::example();
    let path = format!("{}:{}", venv.join("bin").display(), std::env::var("PATH").unwrap_or_default());
    // The pool's model cache (one directory both hosts mount, as a shared filesystem would be), filled by the
    // operator's command with a tiny Llama saved by transformers.
    let (cache, tiny) = (state_dir("vol-model-cache"), state_dir("vol-tiny-llama"));
    let save = "import sys, transformers as t; t.LlamaForCausalLM(t.LlamaConfig(hidden_size=32, intermediate_size=64, \
                num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, vocab_size=64)).save_pretrained(sys.argv[1])";
    let saved = std::process::Command::new(venv.join("bin/python")).args(["-c", save]).arg(&tiny).status().unwrap();
    assert!(saved.success());
    gpuplane_agent::model_cache::fill(&cache, "acme-labs/tiny-llama", &tiny).unwrap();
    // Each host also keeps host volumes on its own disk.
    let host = |subnet: &'static str, dir: &std::path::Path| {
        let host_store = format!("host={}", dir.join("host-volumes").display());
        ["--address", "127.0.0.1", "--lease-subnet", subnet, "--volume-store", &store, "--volume-store", &host_store]
            .map(String::from)
            .into_iter()
            .chain(["--model-cache".into(), cache.display().to_string()])
            .chain(["--job-ro-bind".into(), venv.display().to_string()])
            .chain(["--job-ro-bind".into(), python_root.display().to_string()])
            .collect::<Vec<String>>()
    };
    let (ha, hb) = (host("100.64.11.0/24", &dir_a), host("100.64.12.0/24", &dir_b));
    let (aa, ab): (Vec<&str>, Vec<&str>) =
        (ha.iter().map(String::as_str).collect(), hb.iter().map(String::as_str).collect());
    let agent = |name: &str, dir: &std::path::PathBuf, extra: &[&str]| {
        let mut cmd = agent_command_simulating("h100:1", &base, Some(&join), name, dir, extra);
        cmd.env("PATH", &path);
        start_agent(cmd).0
    };
    let (mut agent_a, mut agent_b) = (agent("vol-node-a", &dir_a, &aa), agent("vol-node-b", &dir_b, &ab));

    // Two leases of a whole host each: one on each host.
    let lease = |_: u8| async {
        let l = api.post("/v1/leases", &tenant, json!({"pool_id": pool, "gpu_count": 1, "duration_hours": 1})).await;
        (l["id"].as_str().unwrap().to_string(), l["gpus"][0]["hostname"].as_str().unwrap().to_string())
    };
    let ((l1, host1), (l2, host2)) = (lease(1).await, lease(2).await);
    assert_ne!(host1, host2);
    let volume = create_once_stored(&api, &tenant, &pool, "ckpt").await;
    let path = format!("/v1/volumes/{volume}");
    wait_until("the volume is made", 60, || async { api.get(&path, &tenant).await["state"] == "ready" }).await;
    // Scripts travel as files (a job's arguments hold no shell); /var is in every sandbox, read-only.
    // A job loads the cached model by its id (the agent sets HF_HOME at the cache and the hub offline), cannot
    // write there, and writes its own /tmp and /dev/shm.
    let cache_sh = format!(
        "{} -c \"import os, transformers as t; m = t.AutoModelForCausalLM.from_pretrained('acme-labs/tiny-llama'); \
         print('loaded', os.environ['HF_HOME'], os.environ['HF_HUB_OFFLINE'], m.config.hidden_size)\"\ntouch /models/mine 2>/dev/null || echo read-only\ntouch /tmp/mine /dev/shm/mine && echo tmp-writable\n",
        venv.join("bin/python").display()
    );
    let scripts = crate::support::net::shared_with_jobs(
        "volumes",
        &[
            (
                "write.sh",
                "echo step-7 > /volumes/ckpt/state && echo dir=$GPUPLANE_CHECKPOINT_DIR && id -u\n\
                 dd if=/dev/zero of=/volumes/ckpt/fill bs=1M count=1200 2>&1; rm -f /volumes/ckpt/fill\n\
                 ln -s /etc/passwd /volumes/ckpt/passwd-link; ln -s / /volumes/ckpt/root-link\n\
                 ln /etc/hostname /volumes/ckpt/hard 2>/dev/null || echo hard-link-refused\n",
            ),
            ("read.sh", "cat /volumes/data/state; id -u; stat -c 'owner=%u' /volumes/data/state; ls /volumes\n"),
            ("cache.sh", &cache_sh),
        ],
    );
    let run = |lease: String, script: &'static str| {
        let (api, tenant, script_path) = (&api, tenant.clone(), scripts.join(script).display().to_string());
        async move {
            let body = json!({"template": "run", "command": ["/bin/sh", script_path]});
            let job = api.post(&format!("/v1/leases/{lease}/jobs"), &tenant, body).await;
            let id = job["id"].as_str().unwrap().to_string();
            let done = wait_job(api, &tenant, &id, script, 90, |j| {
                ["succeeded", "failed", "cancelled"].contains(&j["state"].as_str().unwrap_or(""))
            })
            .await;
            let lines: Vec<String> = done["nodes"][0]["output_tail"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap().to_string())
                .collect();
            assert_eq!(done["state"], "succeeded", "{script}: {lines:?}");
            lines
        }
    };

    // A runtime job (a tiny Llama, one rank, fp32) training to `steps` with its checkpoints in `dir`: the steps
    // it ran, (step, loss), read from its output.
    let script = example.join("train.py").display().to_string();
    let train = |lease: String, dir: &'static str, steps: u32| {
        let (api, tenant, script) = (&api, tenant.clone(), script.clone());
        async move {
            let body = json!({
                "template": "gpuplane-runtime",
                "model": { "architecture": { "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "ffn": 128, "vocab": 128 } },
                "workload": { "kind": "train", "precision": "bf16", "seq_len": 16, "global_batch": 4 },
                "pins": { "tp": 1, "dp": 1, "pp": 1, "micro_batch": 4 },
                "command": [script, "--layers", "2", "--hidden", "64", "--ffn", "128", "--vocab", "128",
                            "--steps", steps.to_string(), "--save-every", "2"],
                "env": { "GPUPLANE_PRECISION": "fp32", "GPUPLANE_CHECKPOINT_DIR": dir },
            });
            let job = api.post(&format!("/v1/leases/{lease}/jobs"), &tenant, body).await;
            let id = job["id"].as_str().unwrap_or_else(|| panic!("{job}")).to_string();
            let done = wait_job(api, &tenant, &id, "training", 300, |j| j["finished_at"].is_string()).await;
            let lines: Vec<&str> =
                done["nodes"][0]["output_tail"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
            assert_eq!(done["state"], "succeeded", "{lines:#?}");
            if steps > 4 {
                assert!(lines.iter().any(|l| l.contains("resumed from checkpoint")), "{lines:#?}");
            }
            lines
                .iter()
                .filter_map(|l| {
                    let rest = l.strip_prefix("step ")?;
                    let (step, loss) = rest.split_once(" loss ")?;
                    Some((step.parse::<i64>().ok()?, loss.parse::<f64>().ok()?))
                })
                .collect::<Vec<(i64, f64)>>()
        }
    };

    // Lease 1 writes, fills the volume (ENOSPC in the job, nowhere else), and plants links.
    api.post(&format!("/v1/leases/{l1}/volumes"), &tenant, json!({"volume_id": volume})).await;
    let out = run(l1.clone(), "write.sh").await;
    assert!(out.iter().any(|l| l.contains("No space left on device")), "{out:?}");
    assert!(out.iter().any(|l| l == "hard-link-refused"), "a hard link to a host file crosses filesystems: {out:?}");
    assert!(out.iter().any(|l| l.starts_with("dir=/volumes/ckpt/checkpoints/")), "{out:?}");
    let uid1: u32 = out.iter().find_map(|l| l.parse().ok()).unwrap();
    // The runtime trains 4 steps there, checkpointing every 2 into the volume.
    let first = train(l1.clone(), "/volumes/ckpt/run", 4).await;
    assert_eq!(first.iter().map(|s| s.0).collect::<Vec<_>>(), [1, 2, 3, 4], "{first:?}");

    // Lease 1 lets it go; once its host has unmounted it, lease 2 on the other host attaches it.
    let (status, body) =
        api.call(reqwest::Method::DELETE, &format!("/v1/leases/{l1}/volumes/{volume}"), &tenant, None).await;
    assert_eq!(status, 204, "{body}");
    let mount_a = |dir: &std::path::Path| dir.join("volume-mounts/pool").join(&volume);
    wait_until("the first host unmounts it", 30, || async {
        mount_options(&mount_a(&dir_a)).is_none() && mount_options(&mount_a(&dir_b)).is_none()
    })
    .await;
    api.post(&format!("/v1/leases/{l2}/volumes"), &tenant, json!({"volume_id": volume, "mount": "data"})).await;
    let out = run(l2.clone(), "read.sh").await;
    assert_eq!(out[0], "step-7", "written on {host1}, read on {host2}: {out:?}");
    let uid2: u32 = out[1].parse().unwrap();
    assert_ne!(uid1, uid2, "another lease, another user");
    assert_eq!(out[2], format!("owner={uid2}"), "its files are the new lease's user's");
    assert_eq!(out[3], "data", "only its own volumes under /volumes");
    let models = api.get(&format!("/v1/pools/{pool}/models"), &tenant).await;
    assert_eq!((models[0]["model_id"].as_str(), models[0]["hosts"].as_i64()), (Some("acme-labs/tiny-llama"), Some(2)));
    let out = run(l2.clone(), "cache.sh").await;
    assert_eq!(
        out,
        ["loaded /models 1 32", "read-only", "tmp-writable"],
        "the cached model by its id; the cache read-only"
    );
    // The training goes on from the volume's checkpoint on the other host: steps 5-8, none run twice, the loss
    // going on from where it was (below the first step's, and close to the last one's).
    let second = train(l2.clone(), "/volumes/data/run", 8).await;
    assert_eq!(second.iter().map(|s| s.0).collect::<Vec<_>>(), [5, 6, 7, 8], "resumed at step 5: {second:?}");
    let (start, before, after) = (first[0].1, first[3].1, second[0].1);
    assert!(after < start && (after - before).abs() < (start - before).abs(), "{first:?} then {second:?}");
    for host_file in ["/etc/passwd", "/"] {
        assert_eq!(std::fs::symlink_metadata(host_file).unwrap().uid(), 0, "{host_file}: the agent followed no link");
    }

    // Detached and deleted: unmounted everywhere, its image destroyed by the host that made it.
    let (status, body) =
        api.call(reqwest::Method::DELETE, &format!("/v1/leases/{l2}/volumes/{volume}"), &tenant, None).await;
    assert_eq!(status, 204, "{body}");
    wait_until("the second host unmounts it", 30, || async {
        mount_options(&mount_a(&dir_a)).is_none() && mount_options(&mount_a(&dir_b)).is_none()
    })
    .await;
    let (status, body) = api.call(reqwest::Method::DELETE, &path, &tenant, None).await;
    assert_eq!(status, 200, "{body}");
    wait_until("the volume is destroyed", 60, || async { api.get(&path, &tenant).await["state"] == "deleted" }).await;
    assert!(!shared.join("images").join(format!("{volume}.img")).exists(), "its image is gone from the shared store");
    for lease in [&l1, &l2] {
        api.post(&format!("/v1/leases/{lease}/release"), &tenant, json!({})).await;
    }

    // The same with a host volume: each lease that names it at its create is placed on its host, and the second
    // resumes the first's training from it.
    let body = json!({"name": "local", "pool_id": pool, "size_gib": 1, "kind": "host"});
    let local = api.post("/v1/volumes", &tenant, body).await["id"].as_str().unwrap().to_string();
    let local_path = format!("/v1/volumes/{local}");
    wait_until("the host volume is made", 60, || async { api.get(&local_path, &tenant).await["state"] == "ready" })
        .await;
    let local_host = api.get(&local_path, &tenant).await["node"].as_str().unwrap().to_string();
    let on_its_host = || async {
        let body = json!({"pool_id": pool, "gpu_count": 1, "duration_hours": 1, "volumes": [{"volume_id": local}]});
        let l = api.post("/v1/leases", &tenant, body).await;
        assert_eq!(l["gpus"][0]["hostname"], local_host.as_str(), "{l}");
        l["id"].as_str().unwrap().to_string()
    };
    let l3 = on_its_host().await;
    let first = train(l3.clone(), "/volumes/local/run", 4).await;
    assert_eq!(first.iter().map(|s| s.0).collect::<Vec<_>>(), [1, 2, 3, 4], "{first:?}");
    api.post(&format!("/v1/leases/{l3}/release"), &tenant, json!({})).await;
    let l4 = on_its_host().await;
    let second = train(l4.clone(), "/volumes/local/run", 8).await;
    assert_eq!(second.iter().map(|s| s.0).collect::<Vec<_>>(), [5, 6, 7, 8], "resumed at step 5: {second:?}");
    api.post(&format!("/v1/leases/{l4}/release"), &tenant, json!({})).await;
    let (status, body) = api.call(reqwest::Method::DELETE, &local_path, &tenant, None).await;
    assert_eq!(status, 200, "{body}");
    wait_until("the host volume is destroyed", 60, || async {
        api.get(&local_path, &tenant).await["state"] == "deleted"
    })
    .await;
    // Every lease ended on its hosts (their namespaces removed) before the hosts stop: an agent stopped while a
    // lease runs leaves that lease's namespace to its own next start.
    let leases = [l1.clone(), l2.clone(), l3.clone(), l4.clone()];
    wait_until("the leases' namespaces are removed", 60, || async {
        let listed = std::process::Command::new("ip").args(["netns", "list"]).output().unwrap();
        !String::from_utf8_lossy(&listed.stdout).lines().any(|l| leases.iter().any(|id| l.contains(id.as_str())))
    })
    .await;
    for agent in [&mut agent_a, &mut agent_b] {
        crate::support::binary::terminate(agent);
    }
    let _ = std::fs::remove_dir_all(&dir_a);
    let _ = std::fs::remove_dir_all(&dir_b);
    let _ = std::fs::remove_dir_all(&shared);
    let _ = std::fs::remove_dir_all(&scripts);
    let _ = std::fs::remove_dir_all(&example);
    let _ = std::fs::remove_dir_all(&cache);
    let _ = std::fs::remove_dir_all(&tiny);
}

/// Storage is billed per whole GiB-second at the price in force when each second begins, exactly to floor(cost)
/// like GPU time: through a price change and a grow (each second at the size it had), stopping at the deletion,
/// one usage record per price and size, the ledger equal to the records, one invoice line per volume. Time is
/// driven by moving the volume's meter back, as the billing tests pin a lease's period.
#[sqlx::test]
async fn storage_is_metered_per_gib_second_through_a_price_change_and_a_grow(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, pool, _nodes, agents) = storage_pool(&app, json!(["pool"])).await;
    let (tenant_id, tenant) = app.tenant_admin(&op, "acme").await;
    // 2,592,000 minor units per GiB and 30-day month: one minor unit per GiB-second.
    sqlx::query(
        "UPDATE pool_storage_prices SET price_per_gib_month_minor = 2592000, effective_from = now() - interval '1 day'",
    )
    .execute(&db)
    .await
    .unwrap();
    heartbeat(&app, &agents[0], &[("pool", 500)], json!([])).await;
    let id = ready_volume(&app, &tenant, &pool, &agents[0], json!({"name": "ckpt", "size_gib": 2})).await;
    let ready_at: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT ready_at FROM volumes WHERE id = $1::uuid").bind(&id).fetch_one(&db).await.unwrap();
    // 100 s ago it became ready; 40 s ago the price doubled.
    let t0 = ready_at - chrono::Duration::seconds(100);
    sqlx::query("UPDATE volumes SET ready_at = $2, metered_until = $2 WHERE id = $1::uuid")
        .bind(&id)
        .bind(t0)
        .execute(&db)
        .await
        .unwrap();
    sqlx::query("INSERT INTO pool_storage_prices (id, pool_id, effective_from, price_per_gib_month_minor) VALUES (gen_random_uuid(), $1::uuid, $2, 5184000)")
        .bind(&pool)
        .bind(t0 + chrono::Duration::seconds(60))
        .execute(&db)
        .await
        .unwrap();
    gpuplane::volumes::metering::meter_once(&db).await.unwrap();
    let records = |db: PgPool| {
        let id = id.clone();
        async move {
            let rows: Vec<(i32, i64, i64, i64, String)> = sqlx::query_as(
                "SELECT gib, gib_seconds, unit_price_minor, amount_minor, term FROM usage_records WHERE volume_id = $1::uuid ORDER BY period_start",
            )
            .bind(&id)
            .fetch_all(&db)
            .await
            .unwrap();
            rows
        }
    };
    let first = records(db.clone()).await;
    assert_eq!(first.len(), 2, "one record per price: {first:?}");
    assert_eq!((first[0].0, first[0].1, first[0].2, first[0].3), (2, 120, 2592000, 120), "60 s x 2 GiB at 1 per GiB-s");
    assert_eq!((first[1].0, first[1].2, first[1].4.as_str()), (2, 5184000, "storage"));
    // The second piece runs to now: 40 s and however long the test took since, at 2 per GiB-second.
    let elapsed = first[1].1 / 2;
    assert!((40..45).contains(&elapsed), "{first:?}");
    assert_eq!(first[1].3, first[1].1 * 2, "exact: 2 per GiB-second");

    // A grow meters what came before at the old size, then the new size runs.
    app.patch(&format!("/v1/volumes/{id}"), &tenant, json!({"size_gib": 3})).await.expect(StatusCode::OK);
    sqlx::query("UPDATE volumes SET metered_until = metered_until - interval '10 seconds' WHERE id = $1::uuid")
        .bind(&id)
        .execute(&db)
        .await
        .unwrap();
    gpuplane::volumes::metering::meter_once(&db).await.unwrap();
    let after = records(db.clone()).await;
    let last = after.last().unwrap();
    assert_eq!((last.0, last.2), (3, 5184000), "{after:?}");
    assert!(last.1 >= 30 && last.1 % 3 == 0, "10 s or more at 3 GiB: {after:?}");

    // Deleted: metered to the deletion, then never again.
    app.delete(&format!("/v1/volumes/{id}"), &tenant).await.expect(StatusCode::OK);
    gpuplane::volumes::metering::meter_once(&db).await.unwrap();
    let at_delete = records(db.clone()).await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    gpuplane::volumes::metering::meter_once(&db).await.unwrap();
    assert_eq!(records(db.clone()).await, at_delete, "nothing after the deletion");

    // The ledger holds exactly the records; the volume says what it was charged; one invoice line for it.
    let charged: i64 = at_delete.iter().map(|r| r.3).sum();
    let (ledger,): (i64,) = sqlx::query_as(
        "SELECT (-sum(e.amount_minor))::bigint FROM ledger_entries e JOIN usage_records r ON r.id = e.usage_record_id WHERE r.volume_id = $1::uuid",
    )
    .bind(&id)
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(ledger, charged);
    let volume = app.get(&format!("/v1/volumes/{id}"), &tenant).await;
    assert_eq!(volume.expect(StatusCode::OK).body["charged_minor"], charged);
    let month = chrono::Utc::now().format("%Y-%m").to_string();
    let invoices = app.post("/v1/admin/invoices", &op, json!({ "month": month })).await.expect(StatusCode::OK).body;
    let invoice = invoices.as_array().unwrap().iter().find(|i| i["tenant_id"] == tenant_id.as_str()).unwrap();
    let lines: Vec<&Value> =
        invoice["lines"].as_array().unwrap().iter().filter(|l| l["volume_id"] == id.as_str()).collect();
    assert_eq!(lines.len(), 2, "a line per volume and unit price: {invoice}");
    assert!(lines.iter().all(|l| l["term"] == "storage" && l["lease_id"].is_null()));
    assert_eq!(lines.iter().map(|l| l["amount_minor"].as_i64().unwrap()).sum::<i64>(), charged);
}

/// Storage runs a tenant's balance down with its leases: the balance rules count it in the burn, so a tenant whose
/// balance covers its lease's next hour but not its lease's and its volume's gets the `balance_low` notice.
#[sqlx::test]
async fn storage_counts_in_the_burn_that_warns_of_a_low_balance(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, pool, _nodes, agents) = storage_pool(&app, json!(["pool"])).await;
    app.patch(&format!("/v1/admin/pools/{pool}"), &op, json!({ "price_per_gpu_hour_minor": 3600 }))
        .await
        .expect(StatusCode::OK);
    sqlx::query("UPDATE pool_prices SET effective_from = effective_from - interval '30 days'")
        .execute(&db)
        .await
        .unwrap();
    let (tenant_id, key) = app.tenant_key_without_balance(&op, "acme", gpuplane::auth::Role::TenantAdmin).await;
    let tenant = app.token_for(&key).await;
    app.top_up(&op, &tenant_id, 5000).await;
    heartbeat(&app, &agents[0], &[("pool", 500)], json!([])).await;
    ready_volume(&app, &tenant, &pool, &agents[0], json!({"name": "ckpt", "size_gib": 1})).await;
    let lease = app.post("/v1/leases", &tenant, json!({"pool_id": pool, "gpu_count": 1, "duration_hours": 5})).await;
    let lease = lease.expect(StatusCode::CREATED).body["id"].as_str().unwrap().to_string();
    let currency: String =
        sqlx::query_scalar("SELECT currency FROM pools WHERE id = $1::uuid").bind(&pool).fetch_one(&db).await.unwrap();
    let tenants = [(uuid::Uuid::parse_str(&tenant_id).unwrap(), currency)];
    let warned = || {
        let (app, tenant, lease) = (&app, tenant.clone(), lease.clone());
        async move {
            let events = app.get(&format!("/v1/leases/{lease}/events"), &tenant).await.expect(StatusCode::OK).body;
            events.as_array().unwrap().iter().any(|e| e["kind"] == "balance_low")
        }
    };
    let round = std::time::Duration::from_secs(15);
    // 5,000 covers the lease's 3,600 an hour and the volume's 7 a month: no notice.
    gpuplane::billing::metering::enforce_balances(&db, &tenants, round).await.unwrap();
    assert!(!warned().await);
    // Storage at 2,592,000 per GiB-month is 3,600 an hour: 7,200 an hour in all, more than the balance.
    sqlx::query("UPDATE pool_storage_prices SET price_per_gib_month_minor = 2592000").execute(&db).await.unwrap();
    gpuplane::billing::metering::enforce_balances(&db, &tenants, round).await.unwrap();
    assert!(warned().await, "the volume's storage counts in the burn");
}

/// The idle policy: a volume detached for its idle days is noticed a day before (`volume.idle`) and deleted after
/// (`volume.deleted`), never sooner than a day after the notice; attaching it again starts over. Time is driven
/// by moving the volume's detachment back.
#[sqlx::test]
async fn an_idle_volume_is_noticed_then_deleted_and_attaching_starts_over(db: PgPool) {
    let app = TestApp::new(db.clone());
    let (op, pool, _nodes, agents) = storage_pool(&app, json!(["pool"])).await;
    let (_, tenant) = app.tenant_admin(&op, "acme").await;
    heartbeat(&app, &agents[0], &[("pool", 500)], json!([])).await;
    let body = json!({"name": "scratch", "size_gib": 1, "delete_after_idle_days": 3});
    let id = ready_volume(&app, &tenant, &pool, &agents[0], body).await;
    let kept = ready_volume(&app, &tenant, &pool, &agents[0], json!({"name": "kept", "size_gib": 1})).await;
    let events = |kind: &'static str| {
        let (db, id) = (db.clone(), id.clone());
        async move {
            let rows: Vec<Value> = sqlx::query_scalar(
                "SELECT data FROM event_log WHERE type = $1 AND data->>'volume_id' = $2 ORDER BY id",
            )
            .bind(kind)
            .bind(&id)
            .fetch_all(&db)
            .await
            .unwrap();
            rows
        }
    };
    let age = |days: i32| {
        let db = db.clone();
        async move {
            sqlx::query("UPDATE volumes SET detached_since = detached_since - make_interval(days => $1), idle_notice_at = idle_notice_at - make_interval(days => $1)")
                .bind(days)
                .execute(&db)
                .await
                .unwrap();
        }
    };
    let sweep = || gpuplane::volumes::idle::sweep_once(&db);
    assert_eq!(sweep().await.unwrap(), (0, 0), "a day short of the policy is not yet");
    age(2).await;
    assert_eq!(sweep().await.unwrap(), (1, 0), "noticed a day before");
    let notice = events("volume.idle").await;
    assert_eq!(notice.len(), 1);
    assert_eq!((notice[0]["name"].as_str(), notice[0]["delete_after_idle_days"].as_i64()), (Some("scratch"), Some(3)));
    assert_eq!(sweep().await.unwrap(), (0, 0), "once");
    age(1).await;
    assert_eq!(sweep().await.unwrap(), (0, 1), "its days are up and the notice is a day old");
    let volume = app.get(&format!("/v1/volumes/{id}"), &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(volume["state"], "deleting", "{volume}");
    assert_eq!(events("volume.deleted").await.len(), 1);
    let other = app.get(&format!("/v1/volumes/{kept}"), &tenant).await.expect(StatusCode::OK).body;
    assert_eq!(other["state"], "ready", "without a policy a volume stays");

    // Attaching starts over: a volume attached, then detached, waits its whole days again.
    let body = json!({"name": "again", "size_gib": 1, "delete_after_idle_days": 1});
    let again = ready_volume(&app, &tenant, &pool, &agents[0], body).await;
    let lease = app.post("/v1/leases", &tenant, json!({"pool_id": pool, "gpu_count": 1, "duration_hours": 1})).await;
    let lease = lease.expect(StatusCode::CREATED).body["id"].as_str().unwrap().to_string();
    app.post(&format!("/v1/leases/{lease}/volumes"), &tenant, json!({"volume_id": again}))
        .await
        .expect(StatusCode::CREATED);
    age(5).await;
    assert_eq!(sweep().await.unwrap(), (0, 0), "attached: never idle");
    app.delete(&format!("/v1/leases/{lease}/volumes/{again}"), &tenant).await.expect(StatusCode::NO_CONTENT);
    assert_eq!(sweep().await.unwrap(), (1, 0), "a one-day policy is noticed at once on detaching");
    assert_eq!(sweep().await.unwrap(), (0, 0), "and deleted no sooner than a day after the notice");
}
