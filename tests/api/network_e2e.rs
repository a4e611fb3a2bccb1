//! Each lease its own network, across real hosts: two agent hosts, each in a network namespace of its own joined
//! by a bridge (so traffic between them really crosses a network), the control plane on the bridge. Tenant A's
//! lease spans both hosts, tenant B's shares one of them with A. From A's jobs: A's two nodes rendezvous; the
//! host's loopback and address services, the agent's listener, the control plane and B's listening port are
//! all out of reach.

use std::process::{Command, Stdio};

use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::agents::HEARTBEAT_1S;
use crate::support::agents::{Api, agent_command, start_agent, state_dir, wait_until};
use crate::support::binary::{Proc, database_url, spawn_server_on, terminate};
use crate::support::jobs::wait_job;
use crate::support::net::{TestNet, shared_with_jobs};

const BRIDGE_ADDRESS: &str = "10.210.0.254";

const PROBE: &str = r#"import socket, sys
for arg in sys.argv[1:]:
    name, target = arg.split('=')
    host, port = target.rsplit(':', 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
        print(name, 'open', flush=True)
    except OSError as err:
        print(name, 'closed', err, flush=True)
"#;

/// Rank 0 listens at MASTER_ADDR:MASTER_PORT, rank 1 connects across the hosts and says hello.
const RENDEZVOUS: &str = r#"import os, socket, time
rank, addr, port = int(os.environ['NODE_RANK']), os.environ['MASTER_ADDR'], int(os.environ['MASTER_PORT'])
if rank == 0:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(('0.0.0.0', port)); s.listen(1); s.settimeout(30)
    conn, peer = s.accept()
    print('rank 0 heard', conn.recv(64).decode(), 'from', peer[0], flush=True)
else:
    deadline = time.time() + 30
    while True:
        try:
            c = socket.create_connection((addr, port), timeout=2); break
        except OSError:
            if time.time() > deadline: raise
            time.sleep(0.2)
    c.sendall(b'hello-from-rank-1'); print('rank 1 sent to', addr, flush=True)
"#;

/// B's service: listens on its lease's address, says where.
const LISTENER: &str = r#"import os, socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', 7000)); s.listen(8)
print('listening', os.environ['MASTER_ADDR'], flush=True)
time.sleep(120)
"#;

fn lines(job: &Value, node: usize) -> Vec<String> {
    job["nodes"][node]["output_tail"].as_array().unwrap().iter().map(|l| l.as_str().unwrap().to_string()).collect()
}

async fn run_to_end(api: &Api, token: &str, lease: &str, command: &[&str]) -> Value {
    let job =
        api.post(&format!("/v1/leases/{lease}/jobs"), token, json!({ "template": "run", "command": command })).await;
    let id = job["id"].as_str().unwrap().to_string();
    wait_job(api, token, &id, &format!("{command:?} ended"), 60, |j| {
        ["succeeded", "failed", "cancelled"].contains(&j["state"].as_str().unwrap_or(""))
    })
    .await
}

/// The probe, rendezvous and listener scripts.
/// What agents leave on a test host: its nftables tables, veths, host routes to leases' addresses (100.64/10),
/// and the lease directories under the agent's state and jobs directories.
fn footprint(net: &TestNet, host: usize, state: &std::path::Path) -> String {
    let run = |args: &[&str]| {
        let out = net.on(host, Command::new(args[0]).args(&args[1..])).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let tables: Vec<String> = run(&["nft", "list", "tables"]).lines().map(str::to_owned).collect();
    let veths: Vec<String> = run(&["ip", "-o", "link", "show"])
        .lines()
        .filter_map(|l| l.split(": ").nth(1).filter(|name| name.starts_with("gp")).map(str::to_owned))
        .collect();
    let routes: Vec<String> =
        run(&["ip", "route", "show"]).lines().filter(|l| l.starts_with("100.")).map(str::to_owned).collect();
    format!("tables {tables:?} veths {veths:?} routes {routes:?} lease dirs {}", lease_dirs(state))
}

/// The leases whose files the agent of `state` keeps (its state directory's `leases/`, its jobs directory).
fn lease_dirs(state: &std::path::Path) -> usize {
    let jobs = state.with_file_name(format!("{}-jobs", state.file_name().unwrap().to_string_lossy()));
    let leases = |dir: std::path::PathBuf| -> usize {
        std::fs::read_dir(dir)
            .map(|r| {
                r.filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().parse::<uuid::Uuid>().is_ok())
                    .count()
            })
            .unwrap_or(0)
    };
    leases(state.join("leases")) + leases(jobs)
}

fn scripts() -> std::path::PathBuf {
    shared_with_jobs("net-e2e", &[("probe.py", PROBE), ("rendezvous.py", RENDEZVOUS), ("listener.py", LISTENER)])
}

#[sqlx::test]
async fn a_lease_reaches_its_own_nodes_and_nothing_else(db: PgPool) {
    let net = TestNet::new(0, 2);
    let scripts = scripts();
    let script = |name: &str| scripts.join(name).display().to_string();
    let (probe_py, rendezvous_py, listener_py) = (script("probe.py"), script("rendezvous.py"), script("listener.py"));
    let operator_key = gpuplane::cli::bootstrap_operator(&db, "e2e").await.unwrap();
    let (mut server, base) = spawn_server_on(&database_url(&db), &format!("{BRIDGE_ADDRESS}:0"), HEARTBEAT_1S);
    let server_port = base.rsplit(':').next().unwrap().to_string();
    let api = Api { base: base.clone(), client: reqwest::Client::new() };
    let op = api.token(&operator_key).await;
    let (pool, join, token_a) = api.pool_and_funded_tenant(&op, "net-a", 2).await;
    let (_, token_b) = api.funded_tenant(&op, "net-b").await;
    api.post("/v1/admin/templates", &op, json!({ "name": "run", "argv": ["{command}"] })).await;

    let mut agents: Vec<Proc> = Vec::new();
    let mut dirs = Vec::new();
    let mut before = Vec::new();
    for host in 0..2 {
        let dir = state_dir(&format!("net-h{host}"));
        before.push(footprint(&net, host, &dir));
        let address = net.address(host);
        let cmd = agent_command(
            &base,
            Some(&join),
            &format!("net-node-{host}"),
            &dir,
            &["--address", &address, "--insecure-http", "--metrics-listen", "0.0.0.0:9400"],
        );
        let mut inside = net.on(host, &cmd);
        inside.stdout(Stdio::piped()).stderr(Stdio::inherit());
        agents.push(start_agent(inside).0);
        dirs.push(dir);
    }
    let nodes = api.get("/v1/admin/nodes", &op).await;
    let nodes = nodes["items"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{nodes:?}");

    // B first (2 GPUs on one host), then A across both hosts: A shares B's host.
    let body = |gpus: i32| json!({ "pool_id": pool, "gpu_count": gpus, "duration_hours": 1 });
    let lease_b = api.post("/v1/leases", &token_b, body(2)).await;
    let lease_a = api.post("/v1/leases", &token_a, body(6)).await;
    let (lease_a, lease_b) = (lease_a["id"].as_str().unwrap().to_string(), lease_b["id"].as_str().unwrap().to_string());

    // B's service, and B's own job reaching it (so "closed" below is about who asks, not a dead listener).
    let listener = api
        .post(
            &format!("/v1/leases/{lease_b}/jobs"),
            &token_b,
            json!({ "template": "run", "command": ["/usr/bin/python3", listener_py] }),
        )
        .await;
    let listener_id = listener["id"].as_str().unwrap().to_string();
    let listening = wait_job(&api, &token_b, &listener_id, "B's service listens", 30, |j| {
        lines(j, 0).iter().any(|l| l.starts_with("listening "))
    })
    .await;
    let b_address = lines(&listening, 0).iter().find_map(|l| l.strip_prefix("listening ").map(str::to_owned)).unwrap();
    assert!(b_address.starts_with("100."), "B's address comes from its host's lease subnet: {b_address}");
    let own =
        run_to_end(&api, &token_b, &lease_b, &["/usr/bin/python3", &probe_py, &format!("own={b_address}:7000")]).await;
    assert_eq!(lines(&own, 0)[0], "own open", "{own:#}");

    // Services of the host B and A share: one on its loopback, one on its address, and the agent's listener.
    let b_node = {
        let l = api.get(&format!("/v1/leases/{lease_b}"), &token_b).await;
        let node_id = l["gpus"][0]["node_id"].as_str().unwrap().to_string();
        nodes.iter().position(|n| n["id"] == node_id).unwrap()
    };
    let host_address = net.address(b_node);
    let mut services = Vec::new();
    for bind in ["127.0.0.1:7100", "0.0.0.0:7101"] {
        let (addr, port) = bind.split_once(':').unwrap();
        let mut cmd = Command::new("/usr/bin/python3");
        cmd.args(["-m", "http.server", "--bind", addr, port]).stdout(Stdio::null()).stderr(Stdio::null());
        services.push(Proc(net.on(b_node, &cmd).spawn().unwrap()));
    }
    wait_until("the host's services listen", 10, || {
        let target = format!("{host_address}:7101");
        async move { std::net::TcpStream::connect(target).is_ok() }
    })
    .await;

    // From A's job, on both of its nodes: none of it is reachable.
    let targets = [
        "host_loopback=127.0.0.1:7100".to_string(),
        format!("host_address={host_address}:7101"),
        format!("agent={host_address}:9400"),
        format!("control_plane={BRIDGE_ADDRESS}:{server_port}"),
        format!("lease_b={b_address}:7000"),
    ];
    let mut probe = vec!["/usr/bin/python3", probe_py.as_str()];
    probe.extend(targets.iter().map(String::as_str));
    let probed = run_to_end(&api, &token_a, &lease_a, &probe).await;
    assert_eq!(probed["state"], "succeeded", "{probed:#}");
    for node in 0..2 {
        let out = lines(&probed, node);
        assert_eq!(out.len(), targets.len(), "{out:?}");
        for line in &out {
            assert!(line.split(' ').nth(1) == Some("closed"), "A's job reached it: {line} (node {node}: {out:?})");
        }
    }

    // While A's two nodes rendezvous across the hosts at A's own addresses.
    let met = run_to_end(&api, &token_a, &lease_a, &["/usr/bin/python3", &rendezvous_py]).await;
    assert_eq!(met["state"], "succeeded", "{met:#}");
    let heard = lines(&met, 0).join("\n") + &lines(&met, 1).join("\n");
    assert!(heard.contains("rank 0 heard hello-from-rank-1 from 100."), "{heard}");

    for mut service in services {
        let _ = service.kill();
    }
    let lease_namespaces = || -> Vec<String> {
        std::fs::read_dir("/run/netns")
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("gpuplane-") && (name.ends_with(&lease_a) || name.ends_with(&lease_b)))
            .collect()
    };
    assert_eq!(lease_namespaces().len(), 3, "A on both hosts, B on one: {:?}", lease_namespaces());
    assert!(
        (0..2).all(|host| footprint(&net, host, &dirs[host]).contains("gpuplane_")),
        "each agent's table is there while it runs"
    );
    assert!(
        footprint(&net, 0, &dirs[0]).contains("via") || footprint(&net, 1, &dirs[1]).contains("via"),
        "A's nodes route to each other"
    );

    // Host 1's agent stops while the leases run (SIGTERM): it takes back all of it at once.
    let mut agents = agents.into_iter();
    let (mut crashed, mut stopped) = (agents.next().unwrap(), agents.next().unwrap());
    let _ = Command::new("kill").args(["-TERM", &stopped.id().to_string()]).status();
    let _ = stopped.wait();
    // Its leases' files stay: they run on, and a restart takes them up again.
    assert!(lease_dirs(&dirs[1]) > 0, "A's, and B's if it is there");
    let network = |f: String| f.split(" lease dirs").next().unwrap().to_owned();
    assert_eq!(network(footprint(&net, 1, &dirs[1])), network(before[1].clone()), "the stopped agent left its network");
    // Host 0's agent dies (SIGKILL): everything stays until it starts again. Meanwhile the leases end, and a
    // gone agent of another name left a table of its own there (a stand-in, made by hand: the host name of that
    // agent changed, so no start of it will remove it).
    let _ = crashed.kill();
    let _ = crashed.wait();
    assert!(
        !lease_namespaces().is_empty() && footprint(&net, 0, &dirs[0]) != before[0],
        "a killed agent cleans nothing"
    );
    for lease in [&lease_a, &lease_b] {
        api.post(
            &format!("/v1/admin/leases/{lease}/terminate"),
            &op,
            json!({ "reason": "e2e: the hosts' agents are down" }),
        )
        .await;
    }
    let dead =
        "table inet gpuplane_dead {\n comment \"gpuplane-agent pid 1 started 1\"\n set leases { type ipv4_addr; }\n}\n";
    let mut nft = net.on(0, Command::new("nft").args(["-f", "-"]));
    let mut child = nft.stdin(Stdio::piped()).spawn().unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), dead.as_bytes()).unwrap();
    assert!(child.wait().unwrap().success());
    // It starts again: what it left and the gone agent's table go; stopped, the host is as it was.
    let mut inside = net.on(
        0,
        &agent_command(
            &base,
            None,
            "net-node-0",
            &dirs[0],
            &["--address", &net.address(0), "--insecure-http", "--metrics-listen", "0.0.0.0:9400"],
        ),
    );
    inside.stdout(Stdio::piped()).stderr(Stdio::inherit());
    let mut restarted = start_agent(inside).0;
    wait_until("the restarted agent removes what it left", 30, || {
        let (namespaces, now) = (lease_namespaces(), footprint(&net, 0, &dirs[0]));
        async move {
            namespaces.is_empty()
                && now.contains("lease dirs 0")
                && !now.contains("gpuplane_dead")
                && !now.contains(" via ")
        }
    })
    .await;
    let _ = Command::new("kill").args(["-TERM", &restarted.id().to_string()]).status();
    let _ = restarted.wait();
    assert_eq!(footprint(&net, 0, &dirs[0]), before[0], "the restarted and stopped agent left its network");
    terminate(&mut server);
    for dir in dirs {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let _ = std::fs::remove_dir_all(&scripts);
}
