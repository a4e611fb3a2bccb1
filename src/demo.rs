//! `gpuplane demo`: a complete, throwaway gpuplane for a newcomer, in one command.
//!
//! 1. Recreate the demo's own database (`gpuplane_demo`, and only that name, so a typo can never wipe a real one).
//! 2. Start the real service in-process, exactly as `serve` would, with a short heartbeat interval.
//! 3. Seed it through its own HTTP API, the way an operator would: an operator key, a `demo` tenant with an admin
//!    key, and four pools ([`POOLS`]) with a join token each.
//! 4. Start simulated node agents as child processes of this very binary (`gpuplane agent --simulate`), so the
//!    nodes register and heartbeat over the real agent protocol.
//! 5. Print the URLs, the keys and a few curl commands, then serve until SIGINT/SIGTERM; stop the agents, then the
//!    server, and exit 0.
//!
//! When the gpuplane runtime's environment is installed (`scripts/runtime-venv.sh`: torch, transformers and the
//! runtime, in `/opt/gpuplane/venv-runtime` or where `GPUPLANE_RUNTIME_VENV` says), the agents run jobs with it and
//! the welcome ends with a real planned job: a small Llama planned for a lease's GPUs and trained by the runtime
//! (on the CPU, the simulated GPUs being simulated). Without it, the welcome says so and how to install it.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use serde_json::{Value, json};
use sqlx::PgPool;
use sqlx::migrate::MigrateDatabase;
use sqlx::postgres::PgConnectOptions;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

use crate::app::cancel_on_signal;
use crate::config::{DatabaseArgs, Secret, Settings};
use crate::state::AppState;
use crate::workers::spawn_background;

/// The only database name the demo accepts: it is dropped at every start.
pub const DEMO_DATABASE: &str = "gpuplane_demo";
/// Default `--database-url`: the local PostgreSQL of the quick start, database [`DEMO_DATABASE`].
pub const DEFAULT_DEMO_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/gpuplane_demo";
/// The last line of the welcome; scripts and tests wait for it.
pub const READY_PREFIX: &str = "gpuplane demo ready on ";
/// Where `scripts/runtime-venv.sh` installs the runtime's environment, unless `GPUPLANE_RUNTIME_VENV` says.
const DEFAULT_RUNTIME_VENV: &str = "/opt/gpuplane/venv-runtime";
/// The example training script (`examples/llama-parallel/train.py`), written where the demo's jobs read it.
const EXAMPLE_TRAIN_PY: &str = include_str!("../examples/llama-parallel/train.py");
/// How long all agents together may take to register.
const AGENT_START_TIMEOUT: Duration = Duration::from_secs(60);
const REGION: &str = "demo-1";
const CURRENCY: &str = "USD";

/// `gpuplane demo`.
///
/// `DATABASE_URL` is deliberately not read: it usually names a real database, and the demo drops its own.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// PostgreSQL URL of the demo database. Its name must be `gpuplane_demo`: it is dropped and recreated.
    #[arg(long, default_value = DEFAULT_DEMO_DATABASE_URL)]
    pub database_url: String,
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,
    /// Seconds between agent heartbeats (short, so telemetry shows up quickly).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub heartbeat_interval_secs: u32,
}

/// One pool of simulated nodes.
#[derive(Debug)]
pub struct DemoPool {
    pub name: &'static str,
    /// GPU catalog key, also the agent's `--simulate` model.
    pub gpu_model: &'static str,
    /// US cents per GPU-hour.
    pub price_per_gpu_hour_minor: i64,
    pub nodes: u32,
    pub gpus_per_node: u32,
    /// Inter-node network of each node, Gbit/s.
    pub network_gbps: u32,
    /// Data-centre parts get an RDMA fabric, so multi-node plans on them use it.
    pub rdma: bool,
}

/// What the demo seeds: a consumer, an inference and two training pools.
pub const POOLS: [DemoPool; 4] = [
    DemoPool {
        name: "rtx4090-demo",
        gpu_model: "rtx4090",
        price_per_gpu_hour_minor: 69,
        nodes: 2,
        gpus_per_node: 8,
        network_gbps: 100,
        rdma: false,
    },
    DemoPool {
        name: "a100-80g-demo",
        gpu_model: "a100-80g",
        price_per_gpu_hour_minor: 179,
        nodes: 2,
        gpus_per_node: 8,
        network_gbps: 400,
        rdma: true,
    },
    DemoPool {
        name: "a10-demo",
        gpu_model: "a10",
        price_per_gpu_hour_minor: 45,
        nodes: 1,
        gpus_per_node: 4,
        network_gbps: 100,
        rdma: false,
    },
    DemoPool {
        name: "b200-demo",
        gpu_model: "b200",
        price_per_gpu_hour_minor: 599,
        nodes: 1,
        gpus_per_node: 8,
        network_gbps: 400,
        rdma: true,
    },
];

/// A pool as created on the service.
struct SeededPool {
    spec: &'static DemoPool,
    id: String,
    join_token: String,
}

/// What the welcome shows.
struct Welcome<'a> {
    base: &'a str,
    operator_key: &'a str,
    tenant_key: &'a str,
    pools: &'a [SeededPool],
    heartbeat_interval_secs: u32,
    runtime: &'a Runtime,
}

/// Whether the demo's hosts can run a planned job: the runtime's environment, and the example where jobs read it.
enum Runtime {
    Installed { venv: PathBuf, shared: PathBuf },
    Missing { looked_in: PathBuf },
}

impl Runtime {
    /// The environment when its `python3` and `torchrun` are there; the example is written into a directory of its
    /// own that jobs may read (removed when the demo stops).
    fn find() -> anyhow::Result<Self> {
        let venv = std::env::var_os("GPUPLANE_RUNTIME_VENV")
            .map_or_else(|| PathBuf::from(DEFAULT_RUNTIME_VENV), PathBuf::from);
        if !(venv.join("bin/python3").is_file() && venv.join("bin/torchrun").is_file()) {
            return Ok(Runtime::Missing { looked_in: venv });
        }
        use std::os::unix::fs::PermissionsExt;
        let shared = std::env::temp_dir().join(format!("gpuplane-demo-{}-shared", std::process::id()));
        std::fs::create_dir_all(&shared).with_context(|| format!("creating {}", shared.display()))?;
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755))?;
        let script = shared.join("train.py");
        std::fs::write(&script, EXAMPLE_TRAIN_PY)?;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644))?;
        Ok(Runtime::Installed { venv, shared })
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Runtime::Installed { shared, .. } = self {
            let _ = std::fs::remove_dir_all(shared);
        }
    }
}

/// `gpuplane demo`: set everything up, serve until a signal, tear down.
pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    init_demo_logging();
    // A signal only starts the shutdown: the agents stop first, then the server, so no agent sees it vanish.
    // Caught from the start, so that even an early Ctrl-C ends the demo cleanly (and with status 0).
    let signal = CancellationToken::new();
    cancel_on_signal(signal.clone());
    check_demo_database(&args.database_url)?;
    let db = recreate_database(&args.database_url).await?;
    let operator_key = crate::auth::key_lifecycle::bootstrap_operator(&db, "demo").await?;
    let state = AppState::new(db, demo_settings(args.heartbeat_interval_secs))?;
    let listener =
        tokio::net::TcpListener::bind(args.bind).await.with_context(|| format!("cannot listen on {}", args.bind))?;
    let base = format!("http://{}", listener.local_addr()?);

    let shutdown = CancellationToken::new();
    let background = spawn_background(&state, &shutdown);
    let server = tokio::spawn(crate::app::run(listener, state, shutdown.clone()));

    let runtime = Runtime::find()?;
    let setup = async {
        let api = AdminApi::login(&base, &operator_key).await?;
        let tenant_key = api.seed_tenant().await?;
        let pools = seed_pools(&api).await?;
        let agents = start_agents(&base, &pools, &runtime).await?;
        anyhow::Ok((tenant_key, pools, agents))
    };
    let result = tokio::select! {
        ready = setup => match ready {
            Ok((tenant_key, pools, agents)) => {
                let welcome = Welcome {
                    base: &base,
                    operator_key: &operator_key,
                    tenant_key: &tenant_key,
                    pools: &pools,
                    heartbeat_interval_secs: args.heartbeat_interval_secs,
                    runtime: &runtime,
                };
                print!("{}", welcome.render());
                signal.cancelled().await;
                eprintln!("gpuplane demo: stopping the agents and the service");
                drop(agents);
                Ok(())
            }
            Err(err) => Err(err),
        },
        // Interrupted while setting up: the agents started so far were stopped when `setup` was dropped.
        () = signal.cancelled() => Ok(()),
    };
    shutdown.cancel();
    let served = server.await.context("the server task failed")?;
    for task in background {
        let _ = task.await;
    }
    result.and(served)
}

/// Warnings only unless `RUST_LOG` says otherwise, so that the service's info lines do not bury the welcome.
fn init_demo_logging() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn,sqlx=error"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .try_init();
}

/// Refuse any database but [`DEMO_DATABASE`]: the demo drops it. Names are compared as sqlx will resolve them.
pub fn check_demo_database(url: &str) -> anyhow::Result<()> {
    let options = PgConnectOptions::from_str(url).context("--database-url is not a PostgreSQL URL")?;
    let name = options.get_database().unwrap_or(options.get_username());
    if name != DEMO_DATABASE {
        bail!(
            "--database-url names the database `{name}`, but the demo drops and recreates its database, so it only \
             uses one named `{DEMO_DATABASE}` (e.g. postgres://postgres@127.0.0.1:5432/{DEMO_DATABASE})"
        );
    }
    Ok(())
}

/// Every demo starts from an empty database, so the keys and pools printed are the only ones.
async fn recreate_database(url: &str) -> anyhow::Result<PgPool> {
    sqlx::Postgres::drop_database(url).await.with_context(|| {
        format!(
            "cannot drop the old `{DEMO_DATABASE}` database (is PostgreSQL running, and no other `gpuplane demo` \
             using it?)"
        )
    })?;
    sqlx::Postgres::create_database(url).await.with_context(|| format!("cannot create `{DEMO_DATABASE}`"))?;
    crate::db::connect_and_migrate(&DatabaseArgs { database_url: url.to_owned(), db_max_connections: 8 }).await
}

/// A random signing secret (tokens need not survive the demo) and liveness limits well above the heartbeat
/// interval, in the same ratio as the service's defaults, so a node is never marked unreachable by a slow tick.
fn demo_settings(heartbeat_interval_secs: u32) -> Settings {
    let interval = Duration::from_secs(heartbeat_interval_secs.into());
    let mut settings = Settings::new(Secret::new(crate::secrets::random_bytes(32)));
    settings.heartbeat_interval = interval;
    settings.unreachable_after = interval * 4;
    settings.offline_after = interval * 30;
    // A local demo posts webhooks to receivers on this machine (`nc -l`, a local script).
    settings.webhooks.allow_private = true;
    settings
}

/// The in-process service's admin API, with an operator access token.
struct AdminApi {
    client: reqwest::Client,
    base: String,
    token: String,
}

impl AdminApi {
    async fn login(base: &str, operator_key: &str) -> anyhow::Result<Self> {
        let client = reqwest::Client::new();
        let body =
            post_json(&client, &format!("{base}/v1/auth/token"), None, json!({ "api_key": operator_key })).await?;
        Ok(AdminApi { client, base: base.to_owned(), token: text_field(&body, "access_token")? })
    }

    async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        post_json(&self.client, &format!("{}{path}", self.base), Some(&self.token), body).await
    }

    /// The tenant `demo` (no quotas, a prepaid balance of 10,000.00 USD) and its admin key, which may lease.
    async fn seed_tenant(&self) -> anyhow::Result<String> {
        let tenant = self.post("/v1/admin/tenants", json!({ "name": "demo" })).await?;
        let tenant_id = text_field(&tenant, "id")?;
        self.post(
            &format!("/v1/admin/tenants/{tenant_id}/ledger"),
            json!({ "kind": "topup", "amount_minor": 1_000_000, "currency": "USD", "reason": "demo credit" }),
        )
        .await?;
        let key = self
            .post(
                &format!("/v1/admin/tenants/{tenant_id}/api-keys"),
                json!({ "name": "demo admin", "role": "tenant_admin" }),
            )
            .await?;
        text_field(&key, "api_key")
    }
}

/// Every pool of [`POOLS`], each with a join token good for exactly its nodes.
async fn seed_pools(api: &AdminApi) -> anyhow::Result<Vec<SeededPool>> {
    let mut seeded = Vec::new();
    for spec in &POOLS {
        let pool = api
            .post(
                "/v1/admin/pools",
                json!({ "name": spec.name, "gpu_model": spec.gpu_model, "region": REGION,
                    "price_per_gpu_hour_minor": spec.price_per_gpu_hour_minor, "currency": CURRENCY }),
            )
            .await?;
        let id = text_field(&pool, "id")?;
        let token = api
            .post(&format!("/v1/admin/pools/{id}/join-tokens"), json!({ "max_uses": spec.nodes, "ttl_hours": 24 }))
            .await?;
        seeded.push(SeededPool { spec, id, join_token: text_field(&token, "join_token")? });
    }
    Ok(seeded)
}

async fn post_json(client: &reqwest::Client, url: &str, token: Option<&str>, body: Value) -> anyhow::Result<Value> {
    let mut request = client.post(url).json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.with_context(|| format!("POST {url}"))?;
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        bail!("POST {url}: {status}: {body}");
    }
    Ok(body)
}

fn text_field(body: &Value, name: &str) -> anyhow::Result<String> {
    body[name].as_str().map(str::to_owned).ok_or_else(|| anyhow!("no `{name}` in {body}"))
}

/// The running simulated agents. Dropping it kills them and removes their state directories, so the demo leaves
/// nothing behind however it ends (a signal, an error, a panic).
#[derive(Default)]
struct Agents(Vec<AgentProcess>);

struct AgentProcess {
    child: Child,
    state_dir: PathBuf,
}

impl Drop for Agents {
    /// SIGTERM first, so each agent takes back what it made on the host (lease namespaces, its nftables table),
    /// then SIGKILL for one that has not stopped within 10 s.
    fn drop(&mut self) {
        for agent in &self.0 {
            let _ = Command::new("kill").args(["-TERM", &agent.child.id().to_string()]).status();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        for agent in &mut self.0 {
            while matches!(agent.child.try_wait(), Ok(None)) && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = agent.child.kill();
            let _ = agent.child.wait();
            let _ = std::fs::remove_dir_all(&agent.state_dir);
            let mut jobs_dir = agent.state_dir.clone().into_os_string();
            jobs_dir.push("-jobs");
            let _ = std::fs::remove_dir_all(jobs_dir);
        }
    }
}

/// Start every node of every pool at once, then wait until each has registered (its first stdout line).
async fn start_agents(server: &str, pools: &[SeededPool], runtime: &Runtime) -> anyhow::Result<Agents> {
    let exe = std::env::current_exe().context("cannot find this program's path to start the agents")?;
    let mut agents = Agents::default();
    let mut registrations = Vec::new();
    for pool in pools {
        for n in 1..=pool.spec.nodes {
            let hostname = format!("demo-{}-{n}", pool.spec.gpu_model);
            let first_line = spawn_agent(&exe, server, pool, &hostname, runtime, &mut agents)?;
            registrations.push((hostname, first_line));
        }
    }
    let deadline = tokio::time::Instant::now() + AGENT_START_TIMEOUT;
    for (hostname, first_line) in registrations {
        let line = tokio::time::timeout_at(deadline, first_line)
            .await
            .with_context(|| format!("agent {hostname} did not register within {}s", AGENT_START_TIMEOUT.as_secs()))?
            .map_err(|_| anyhow!("agent {hostname} exited before registering (its log is above)"))?;
        if !line.contains(" registered") {
            bail!("agent {hostname} said `{line}` instead of registering");
        }
        tracing::info!(%hostname, "{line}");
    }
    Ok(agents)
}

/// The demo's `n`th agent's job uids: 100 each from 280000, clear of the test suite's agents.
fn demo_job_uids(n: usize) -> String {
    let first = 280_000 + 100 * n as u32;
    format!("{first}-{}", first + 99)
}

/// Spawn one `gpuplane agent --simulate` into `agents` and return its first stdout line, to come.
fn spawn_agent(
    exe: &Path,
    server: &str,
    pool: &SeededPool,
    hostname: &str,
    runtime: &Runtime,
    agents: &mut Agents,
) -> anyhow::Result<oneshot::Receiver<String>> {
    let spec = pool.spec;
    let state_dir = std::env::temp_dir().join(format!("gpuplane-demo-{}-{hostname}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state_dir);
    let mut cmd = Command::new(exe);
    cmd.args(["agent", "--server", server, "--hostname", hostname])
        .arg("--simulate")
        .arg(format!("{}:{}", spec.gpu_model, spec.gpus_per_node))
        .arg("--network-gbps")
        .arg(spec.network_gbps.to_string())
        .arg("--state-dir")
        .arg(&state_dir)
        // Several agents on one machine: each gets job uids of its own, as separate hosts would.
        .arg("--job-uids")
        .arg(demo_job_uids(agents.0.len()))
        // In the environment rather than on the command line, where any local user could read it.
        .env("GPUPLANE_JOIN_TOKEN", &pool.join_token)
        // Agents speak up only when something is wrong; their stdout is read below.
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if spec.rdma {
        cmd.arg("--rdma");
    }
    if let Runtime::Installed { venv, shared } = runtime {
        // The runtime's torchrun and Python first on the PATH jobs see; the example readable by every job.
        let path = std::env::var("PATH").unwrap_or_default();
        cmd.env("PATH", format!("{}:{path}", venv.join("bin").display())).arg("--job-ro-bind").arg(shared);
    }
    let mut child = cmd.spawn().with_context(|| format!("cannot start agent {hostname}"))?;
    let stdout = child.stdout.take().context("agent stdout")?;
    agents.0.push(AgentProcess { child, state_dir });
    let (tx, rx) = oneshot::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
        if let Some(line) = lines.next() {
            let _ = tx.send(line);
        }
        // Keep draining, so that a later line (a re-registration) never meets a closed pipe.
        lines.for_each(drop);
    });
    Ok(rx)
}

impl Welcome<'_> {
    /// The welcome text; its last line is `gpuplane demo ready on <URL>`.
    fn render(&self) -> String {
        let Welcome { base, operator_key, tenant_key, pools, heartbeat_interval_secs, .. } = *self;
        let nodes: u32 = pools.iter().map(|p| p.spec.nodes).sum();
        let gpus: u32 = pools.iter().map(|p| p.spec.nodes * p.spec.gpus_per_node).sum();
        let mut out = String::new();
        out += "\ngpuplane demo: the real service with simulated GPU nodes.\n";
        out += &format!("Its database `{DEMO_DATABASE}` is recreated at every start.\n\n");
        out += &format!("  console      {base}/   (sign in with a key below)\n");
        out += &format!("  API          {base}\n");
        out += &format!("  API docs     {base}/docs\n");
        out += &format!("  heartbeats   every {heartbeat_interval_secs} s\n\n");
        out += &format!("Pools ({nodes} simulated nodes, {gpus} GPUs, region {REGION}):\n");
        for pool in pools {
            let s = pool.spec;
            let price =
                format!("{}.{:02} {CURRENCY}", s.price_per_gpu_hour_minor / 100, s.price_per_gpu_hour_minor % 100);
            out += &format!(
                "  {:<14} {} x {} GPUs   {price} per GPU-hour   {}\n",
                s.name, s.nodes, s.gpus_per_node, pool.id
            );
        }
        out += "\nKeys (shown only here; store them if you want them):\n";
        out += &format!("  operator key      {operator_key}\n");
        out += &format!("  demo tenant key   {tenant_key}   (tenant `demo`, role tenant_admin)\n\n");
        out += &self.curl_commands();
        out += "\nStop with Ctrl-C.\n";
        out += &format!("{READY_PREFIX}{base}\n");
        out
    }

    /// Commands to paste into a shell, as the demo tenant. Each is checked to work against the demo.
    fn curl_commands(&self) -> String {
        let a100 = self.pools.iter().find(|p| p.spec.gpu_model == "a100-80g").map_or("", |p| p.id.as_str());
        let json_field =
            |field: &str| format!("python3 -c 'import sys,json; print(json.load(sys.stdin)[\"{field}\"])'");
        let auth = "-H \"authorization: Bearer $TOKEN\"";
        let ct = "-H 'content-type: application/json'";
        let mut out = String::from("Try (as the demo tenant):\n\n");
        out += &format!("API={}\n", self.base);
        out += &format!("TENANT_KEY={}\n", self.tenant_key);
        if let Runtime::Installed { shared, .. } = self.runtime {
            out +=
                &format!("EXAMPLE={}   # the runtime's example, shared with jobs\n", shared.join("train.py").display());
        }
        out += "\n";
        out += "# 1. exchange the key for an access token (valid 15 minutes)\n";
        out += &format!(
            "TOKEN=$(curl -s $API/v1/auth/token {ct} -d \"{{\\\"api_key\\\": \\\"$TENANT_KEY\\\"}}\" | {})\n\n",
            json_field("access_token")
        );
        out += "# 2. pools: price, free GPUs, largest single-node block\n";
        out += &format!("curl -s $API/v1/pools {auth}\n\n");
        out += "# 3. how to train llama2-7b on 8 x A100 80GB\n";
        out += &format!(
            "curl -s $API/v1/plans {auth} {ct} -d '{{\"model\": {{\"preset\": \"llama2-7b\"}}, \
             \"workload\": {{\"kind\": \"train\", \"seq_len\": 4096, \"global_batch\": 256}}, \
             \"cluster\": {{\"gpu\": \"a100-80g\", \"gpus\": 8, \"gpus_per_node\": 8}}, \"top_n\": 3}}'\n\n"
        );
        out += "# 4. which pool fine-tunes llama2-7b (LoRA) on 1B tokens cheapest, and which fastest\n";
        out += &format!(
            "curl -s $API/v1/advice {auth} {ct} -d '{{\"model\": {{\"preset\": \"llama2-7b\"}}, \
             \"workload\": {{\"kind\": \"lora\", \"seq_len\": 4096, \"global_batch\": 64}}, \
             \"target\": {{\"training_tokens\": 1000000000}}}}'\n\n"
        );
        out += "# 5. lease one whole A100 node (8 GPUs) for an hour\n";
        out += &format!(
            "LEASE=$(curl -s $API/v1/leases {auth} {ct} -d '{{\"pool_id\": \"{a100}\", \"gpu_count\": 8, \
             \"duration_hours\": 1, \"placement\": \"single_node\"}}' | {})\n\n",
            json_field("id")
        );
        out += "# 6. its GPUs' telemetry from the simulated agent (give it a heartbeat or two)\n";
        out += &format!("curl -s \"$API/v1/leases/$LEASE/telemetry?step_s=10\" {auth}\n\n");
        out += &self.job_commands(&json_field, auth, ct);
        out
    }

    /// A real planned job when the hosts have the runtime; else how to give it to them.
    fn job_commands(&self, json_field: &dyn Fn(&str) -> String, auth: &str, ct: &str) -> String {
        if let Runtime::Missing { looked_in } = self.runtime {
            return format!(
                "# 7. a real planned job needs the gpuplane runtime (torch) where the hosts run jobs, and it is not\n\
                 #    in {}: run scripts/runtime-venv.sh once (about 3 GB) and start the demo again. Until then\n\
                 #    a planned job (template auto) is refused with 422 launcher_missing.\n",
                looked_in.display()
            );
        }
        let rtx = self.pools.iter().find(|p| p.spec.gpu_model == "rtx4090").map_or("", |p| p.id.as_str());
        let mut out = String::from(
            "# 7. a real planned job: a small Llama planned for a 2-GPU lease and trained 20 steps by the gpuplane\n\
             #    runtime (torch on the CPU: these GPUs are simulated); it takes a minute or so\n",
        );
        out += &format!(
            "JOB_LEASE=$(curl -s $API/v1/leases {auth} {ct} -d '{{\"pool_id\": \"{rtx}\", \"gpu_count\": 2, \
             \"duration_hours\": 1, \"placement\": \"single_node\"}}' | {})\n",
            json_field("id")
        );
        out += &format!(
            "JOB=$(curl -s $API/v1/leases/$JOB_LEASE/jobs {auth} {ct} -d '{{\"template\": \"auto\", \
             \"command\": [\"'$EXAMPLE'\", \"--steps\", \"20\"], \
             \"model\": {{\"architecture\": {{\"layers\": 4, \"hidden\": 128, \"heads\": 4, \"kv_heads\": 2, \"ffn\": 256, \"vocab\": 256}}}}, \
             \"workload\": {{\"kind\": \"train\", \"seq_len\": 32, \"global_batch\": 8}}, \
             \"env\": {{\"GPUPLANE_PRECISION\": \"fp32\"}}}}' | {})\n",
            json_field("id")
        );
        out += "# its plan in plain words, its state, and the steps it measured against the plan\n";
        out += &format!("curl -s $API/v1/jobs/$JOB {auth}\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_demo_database_is_accepted() {
        assert!(check_demo_database(DEFAULT_DEMO_DATABASE_URL).is_ok());
        assert!(check_demo_database("postgres://u:p@db.example:6543/gpuplane_demo?sslmode=disable").is_ok());
        for url in ["postgres://postgres@127.0.0.1:5432/gpuplane", "postgres://postgres@127.0.0.1:5432/postgres"] {
            let err = check_demo_database(url).unwrap_err().to_string();
            assert!(err.contains("only uses one named `gpuplane_demo`"), "{err}");
        }
        assert!(check_demo_database("mysql://x").is_err());
    }

    #[test]
    fn the_pools_are_the_issues() {
        let shape: Vec<(&str, u32, u32)> = POOLS.iter().map(|p| (p.gpu_model, p.nodes, p.gpus_per_node)).collect();
        assert_eq!(shape, [("rtx4090", 2, 8), ("a100-80g", 2, 8), ("a10", 1, 4), ("b200", 1, 8)]);
        for pool in &POOLS {
            assert!(gpuplane_agent::SimulateSpec::parse(&format!("{}:{}", pool.gpu_model, pool.gpus_per_node)).is_ok());
        }
    }

    #[test]
    fn the_welcome_shows_keys_and_commands_and_ends_with_the_ready_line() {
        let pools: Vec<SeededPool> = POOLS
            .iter()
            .enumerate()
            .map(|(i, spec)| SeededPool { spec, id: format!("pool-{i}"), join_token: String::new() })
            .collect();
        let render = |runtime: &Runtime| {
            Welcome {
                base: "http://127.0.0.1:8080",
                operator_key: "gpk_operator",
                tenant_key: "gpk_tenant",
                pools: &pools,
                heartbeat_interval_secs: 5,
                runtime,
            }
            .render()
        };
        let welcome = render(&Runtime::Missing { looked_in: PathBuf::from("/nowhere/venv") });
        assert!(welcome.ends_with("\ngpuplane demo ready on http://127.0.0.1:8080\n"), "{welcome}");
        for expected in [
            "operator key      gpk_operator",
            "TENANT_KEY=gpk_tenant",
            "http://127.0.0.1:8080/docs",
            "a100-80g-demo  2 x 8 GPUs   1.79 USD per GPU-hour   pool-1",
            "\"pool_id\": \"pool-1\"",
            "$API/v1/plans",
            "$API/v1/advice",
            "/telemetry",
            "needs the gpuplane runtime (torch)",
            "in /nowhere/venv: run scripts/runtime-venv.sh",
        ] {
            assert!(welcome.contains(expected), "missing `{expected}` in:\n{welcome}");
        }
        // With the runtime: the planned job's commands, naming the example where jobs read it.
        let installed =
            Runtime::Installed { venv: PathBuf::from("/opt/venv"), shared: PathBuf::from("/nonexistent-shared") };
        let welcome = render(&installed);
        assert!(welcome.contains("EXAMPLE=/nonexistent-shared/train.py"), "{welcome}");
        assert!(welcome.contains("\"command\": [\"'$EXAMPLE'\", \"--steps\", \"20\"]"), "{welcome}");
        assert!(welcome.contains("JOB=$(curl -s $API/v1/leases/$JOB_LEASE/jobs"), "{welcome}");
    }
}
