//! The `gpuplane` command line: the operator's `serve`, `migrate`, `openapi`, `bootstrap`, `rotate-secrets`,
//! `agent`, `demo`; the planner's `plan` and `advise`; and the tenant's `login`, `run`, `status`, `logs`, `cancel`,
//! `down`, `ssh`, `volumes` and `completion` against a service (`tenant`, docs/cli.md).

mod advise;
mod config_doc;
pub mod task;
pub mod tenant;
mod workload;

pub use workload::WorkloadArgs;
use workload::{choice, lower};

/// The whole of docs/configuration.md, generated from the flags.
pub fn configuration_markdown() -> String {
    use clap::CommandFactory;
    config_doc::markdown(&Cli::command())
}

use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::app::{cancel_on_signal, run};
use crate::config::{DatabaseArgs, LogFormat, SecretsKeyArgs, ServeArgs};
use crate::observability::init_logging;
use crate::router::openapi_document;
use crate::state::AppState;
use crate::workers::spawn_background;

#[derive(Debug, Parser)]
#[command(name = "gpuplane", version, about = "Control plane of a GPU rental platform")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the API server (creates the database if missing and runs migrations first).
    Serve(ServeArgs),
    /// Create the database if missing and run pending migrations, then exit.
    Migrate(DatabaseArgs),
    /// Print the OpenAPI document as JSON.
    Openapi,
    /// Plan how to parallelize a model on a cluster (prints a table, or JSON with --json).
    Plan(Box<PlanArgs>),
    /// Advise what to rent: the cost/time frontier over the platform's pools (from the database, as
    /// `POST /v1/advice` answers) or over pools given with --pool.
    Advise(Box<advise::AdviseArgs>),
    /// Run the node agent on a GPU host: register, then heartbeat with GPU telemetry (NVML or --simulate).
    Agent(gpuplane_agent::AgentArgs),
    /// Try gpuplane in one command: the service on its own `gpuplane_demo` database (recreated), demo keys and
    /// simulated agents for four pools; prints the URLs, the keys and curl commands to try.
    Demo(crate::demo::DemoArgs),
    /// Create the first operator API key and print it once. Refuses when an operator key exists.
    Bootstrap {
        #[command(flatten)]
        database: DatabaseArgs,
        /// A label for the key.
        #[arg(long, default_value = "bootstrap")]
        name: String,
    },
    /// Re-seal every stored secret (webhook signing secrets, job secrets) under the current key of the secrets
    /// keyring: put the new key first in the keyring of every replica, then run this, then drop the old key.
    /// Idempotent: rows already under the current key are skipped, so it is safe to rerun, and to run while the
    /// service serves.
    RotateSecrets(RotateSecretsArgs),
    #[command(flatten)]
    Tenant(tenant::TenantCommand),
    /// Print a shell's completion script: `gpuplane completion bash > /etc/bash_completion.d/gpuplane`.
    Completion { shell: clap_complete::Shell },
}

/// `gpuplane rotate-secrets`.
#[derive(Debug, clap::Args)]
pub struct RotateSecretsArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub secrets: SecretsKeyArgs,
    /// Also open secrets sealed under the development key (made by `serve --dev`), to move them under a real
    /// key. Without a configured keyring, seals under the development key.
    #[arg(long)]
    pub dev: bool,
}

/// Run a command; its exit code (a tenant command's own, 0 for the rest, or the failure's).
pub async fn execute(cli: Cli) -> std::process::ExitCode {
    match operate(cli.command).await {
        Ok(code) => std::process::ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::from(tenant::exit_of(&err))
        }
    }
}

async fn operate(command: Command) -> anyhow::Result<tenant::Exit> {
    match command {
        Command::Serve(args) => serve(args).await.map(|()| 0),
        Command::Migrate(db) => {
            init_logging(LogFormat::Text);
            say_database(&db);
            crate::db::connect_and_migrate(&db).await?;
            println!("database is migrated");
            Ok(0)
        }
        Command::Plan(args) => plan(&args).map(|()| 0),
        Command::Advise(args) => advise::run(&args).await.map(|()| 0),
        Command::Agent(args) => gpuplane_agent::run(args).await.map(|()| 0),
        Command::Demo(args) => crate::demo::run(args).await.map(|()| 0),
        Command::Openapi => {
            println!("{}", serde_json::to_string_pretty(&openapi_document())?);
            Ok(0)
        }
        Command::Bootstrap { database, name } => {
            init_logging(LogFormat::Text);
            say_database(&database);
            let pool = crate::db::connect_and_migrate(&database).await?;
            let key = bootstrap_operator(&pool, &name).await?;
            println!("{key}");
            eprintln!("This is the operator API key. It is shown once: store it now.");
            Ok(0)
        }
        Command::RotateSecrets(args) => {
            init_logging(LogFormat::Text);
            let keyring = args.secrets.keyring(args.dev)?;
            say_database(&args.database);
            let pool = crate::db::connect_and_migrate(&args.database).await?;
            let done =
                crate::secrets::sealing::reseal(&pool, &keyring, crate::secrets::sealing::Scope::NotCurrent).await?;
            println!(
                "re-sealed {} webhook secret(s) and {} job secret(s) under key `{}`",
                done.webhook_secrets,
                done.job_secrets,
                keyring.current_id()
            );
            if !done.failures.is_empty() {
                for failure in done.failures.iter().take(20) {
                    eprintln!("not re-sealed: {failure}");
                }
                anyhow::bail!(
                    "{} secret(s) did not open and were left as they were; add their keys to the keyring and rerun",
                    done.failures.len()
                );
            }
            Ok(0)
        }
        Command::Tenant(command) => tenant::execute(command).await,
        Command::Completion { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "gpuplane", &mut std::io::stdout());
            Ok(0)
        }
    }
}

/// Say on stderr which database a one-off command works on (never the password), and warn when it is the
/// `postgres` maintenance database: what `cargo run` gets from .cargo/config.toml, meant for the tests.
fn say_database(database: &DatabaseArgs) {
    eprintln!("using {}", database_label(&database.database_url));
    if database_name(&database.database_url).as_deref() == Some("postgres") {
        eprintln!(
            "warning: this is the `postgres` database (under `cargo run`, .cargo/config.toml's DATABASE_URL for the \
             tests); the service's is named by --database-url (default {})",
            crate::config::DEFAULT_DATABASE_URL
        );
    }
}

/// `database NAME on HOST:PORT`, from a PostgreSQL URL, without credentials.
pub fn database_label(url: &str) -> String {
    match url.parse::<sqlx::postgres::PgConnectOptions>() {
        Ok(options) => format!(
            "database `{}` on {}:{}",
            options.get_database().unwrap_or("(the user's)"),
            options.get_host(),
            options.get_port()
        ),
        Err(_) => "a database URL that does not parse".to_owned(),
    }
}

fn database_name(url: &str) -> Option<String> {
    url.parse::<sqlx::postgres::PgConnectOptions>().ok()?.get_database().map(str::to_owned)
}

pub use crate::auth::key_lifecycle::bootstrap_operator;

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    init_logging(args.log_format);
    let settings = args.settings()?;
    let pool = crate::db::connect_and_migrate(&args.database).await?;
    // Refuse a keyring that cannot open what is stored; seal what older versions stored in clear.
    crate::secrets::sealing::prepare(&pool, &settings.keyring).await?;
    // Heartbeats need today's telemetry partition: make sure it exists before the first one, even after days down.
    crate::agent_api::rollups::ensure_partitions(&pool, &settings, chrono::Utc::now()).await?;
    let mut settings = settings;
    // The gateway's port is known once bound (port 0): services' URLs name it unless --gateway-url does.
    let gateway = match args.gateway_bind {
        Some(bind) => {
            let listener = tokio::net::TcpListener::bind(bind).await?;
            let addr = listener.local_addr()?;
            if args.gateway_url.is_none() {
                settings.gateway_url = format!("http://{addr}");
            }
            println!("gpuplane gateway listening on http://{addr}");
            tracing::info!(%addr, "gateway listening");
            Some(listener)
        }
        None => None,
    };
    let state = AppState::new(pool, settings)?;
    let listener = tokio::net::TcpListener::bind(args.bind).await?;
    let addr = listener.local_addr()?;
    // Printed on stdout so scripts and tests can read the port when binding to port 0.
    println!("gpuplane listening on http://{addr}");
    tracing::info!(%addr, "listening");
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone());
    let background = spawn_background(&state, &shutdown);
    let gateway =
        gateway.map(|listener| tokio::spawn(crate::app::run_gateway(listener, state.clone(), shutdown.clone())));
    run(listener, state, shutdown).await?;
    if let Some(gateway) = gateway {
        gateway.await??;
    }
    for task in background {
        let _ = task.await;
    }
    tracing::info!("stopped");
    Ok(())
}

/// `gpuplane plan`: a model (preset or architecture), a workload, a cluster, and optional pins.
///
/// Every knob left out is searched: TP, CP, EP, PP (with uneven first/last stages), DP,
/// virtual stages, micro-batch, ZeRO stage, sequence parallelism, recomputation, CPU offload.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  gpuplane plan --model llama3-70b --gpu h100 --gpus 64\n  gpuplane plan --model llama2-7b --gpu rtx4090 --gpus 1 --workload inference --concurrent 2\n  gpuplane plan --model mixtral-8x7b --gpu h100 --gpus 64 --seq 4096 --global-batch 256\n  gpuplane plan --list-models\n  gpuplane plan --list-gpus"
)]
pub struct PlanArgs {
    #[command(flatten)]
    pub what: WorkloadArgs,
    /// List the model presets with their sizes and exit.
    #[arg(long)]
    pub list_models: bool,
    /// List the GPU keys of the built-in catalog and exit.
    #[arg(long)]
    pub list_gpus: bool,
    /// GPU model key, case-insensitive, e.g. h100, a100-80g, rtx4090 (see --list-gpus).
    #[arg(long, value_name = "KEY", required_unless_present_any = ["list_models", "list_gpus"])]
    pub gpu: Option<String>,
    /// Total GPUs of the cluster.
    #[arg(long, value_name = "N", required_unless_present_any = ["list_models", "list_gpus"])]
    pub gpus: Option<u32>,
    /// GPUs per node; --gpus must be a multiple [default: min(--gpus, 8)].
    #[arg(long, value_name = "N")]
    pub gpus_per_node: Option<u32>,
    /// Inter-node bandwidth per node, all NICs together, Gbit/s [default: 100].
    #[arg(long, value_name = "GBIT_S")]
    pub inter_node_gbps: Option<f64>,
    /// No RDMA between nodes (TCP) [default: RDMA, i.e. InfiniBand or RoCE].
    #[arg(long)]
    pub no_rdma: bool,
    /// Host (CPU) memory per node for CPU offload, GB [default: 2 x the node's GPU memory, at least 64].
    #[arg(long, value_name = "GB")]
    pub host_memory_gb: Option<f64>,
    /// Pin the tensor-parallel degree [default: searched].
    #[arg(long, value_name = "N")]
    pub tp: Option<u32>,
    /// Pin the context-parallel degree (ring attention over the sequence) [default: searched].
    #[arg(long, value_name = "N")]
    pub cp: Option<u32>,
    /// Pin the expert-parallel degree (MoE; divides the experts and dp x cp) [default: searched].
    #[arg(long, value_name = "N")]
    pub ep: Option<u32>,
    /// Pin the pipeline-parallel degree [default: searched].
    #[arg(long, value_name = "N")]
    pub pp: Option<u32>,
    /// Pin the data-parallel degree [default: searched].
    #[arg(long, value_name = "N")]
    pub dp: Option<u32>,
    /// Pin the virtual pipeline stages (interleaving chunks) per GPU [default: searched].
    #[arg(long, value_name = "N")]
    pub vp: Option<u32>,
    /// Pin the micro-batch, sequences per GPU per forward pass [default: searched].
    #[arg(long, value_name = "SEQUENCES")]
    pub micro_batch: Option<u32>,
    /// Pin the ZeRO stage: 0, 1, 2 or 3 [default: searched].
    #[arg(long, value_name = "STAGE")]
    pub zero: Option<u8>,
    /// Pin activation recomputation: none, selective or full [default: searched].
    #[arg(long, value_name = "POLICY")]
    pub recompute: Option<String>,
    /// Pin sequence parallelism: true or false [default: searched].
    #[arg(long, value_name = "BOOL")]
    pub sequence_parallel: Option<bool>,
    /// Pin CPU offload: none, optimizer or optimizer_and_params [default: searched, only where needed to fit].
    #[arg(long, value_name = "WHAT")]
    pub offload: Option<String>,
    /// Plans to show.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub top: u32,
    /// Print the full result (or the error) as JSON.
    #[arg(long)]
    pub json: bool,
}

impl PlanArgs {
    /// The same request the API takes, so the CLI and `POST /v1/plans` validate alike.
    pub fn to_request(&self) -> anyhow::Result<crate::planner::PlanRequest> {
        let (model, workload) = self.what.to_json()?;
        let recompute = match &self.recompute {
            Some(r) => Some(choice("--recompute", r, &["none", "selective", "full"])?),
            None => None,
        };
        let offload = match lower(&self.offload) {
            Some(o) => Some(choice("--offload", &o, &["none", "optimizer", "optimizer_and_params"])?),
            None => None,
        };
        let (Some(gpu), Some(gpus)) = (&self.gpu, self.gpus) else {
            anyhow::bail!("give --gpu and --gpus (see --list-gpus)");
        };
        let request = serde_json::json!({
            "model": model,
            "workload": workload,
            "cluster": { "gpu": gpu, "gpus": gpus, "gpus_per_node": self.gpus_per_node,
                "inter_node_gbps": self.inter_node_gbps, "rdma": !self.no_rdma, "host_memory_gb": self.host_memory_gb },
            "pins": { "tp": self.tp, "cp": self.cp, "ep": self.ep, "pp": self.pp, "dp": self.dp, "vp": self.vp,
                "micro_batch": self.micro_batch, "zero_stage": self.zero, "recompute": recompute,
                "sequence_parallel": self.sequence_parallel, "offload": offload },
            "top_n": self.top,
        });
        Ok(serde_json::from_value(request)?)
    }
}

/// `--list-models`: presets with their size.
pub fn list_models() -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "{:<20} {:>10} {:>10} {:>7} {:>7}  kind", "preset", "params", "active", "layers", "hidden");
    for name in crate::planner::preset_names() {
        let Some(a) = crate::planner::preset(name) else { continue };
        let kind = match (&a.moe, &a.diffusion) {
            (_, Some(_)) => "diffusion (inference only)".to_string(),
            (Some(m), _) => format!(
                "MoE, {} experts, top-{}{}",
                m.experts,
                m.experts_per_token,
                if m.shared_experts > 0 { format!(", {} shared", m.shared_experts) } else { String::new() }
            ),
            _ => "dense".to_string(),
        };
        let dim = |v: u32| if a.diffusion.is_some() { "-".to_string() } else { v.to_string() };
        let _ = writeln!(
            s,
            "{:<20} {:>9.1}B {:>9.1}B {:>7} {:>7}  {kind}",
            name,
            a.param_count() as f64 / 1e9,
            a.active_param_count() as f64 / 1e9,
            dim(a.layers),
            dim(a.hidden),
        );
    }
    s
}

/// `--list-gpus`: the built-in catalog.
pub fn list_gpus() -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<10} {:<18} {:>7} {:>10} {:>9} {:>8}  link",
        "key", "name", "mem GB", "HBM GB/s", "BF16 TF", "FP8 TF"
    );
    for g in crate::planner::builtin_gpus() {
        let _ = writeln!(
            s,
            "{:<10} {:<18} {:>7} {:>10.0} {:>9.0} {:>8}  {}",
            g.key,
            g.name,
            g.memory_bytes / 1_000_000_000,
            g.mem_bandwidth_gb_s,
            g.bf16_tflops,
            g.fp8_tflops.map_or("-".to_string(), |x| format!("{x:.0}")),
            match g.link {
                crate::planner::LinkKind::Nvlink => format!("NVLink {:.0} GB/s", g.link_gb_s),
                crate::planner::LinkKind::Pcie => "PCIe only".to_string(),
            }
        );
    }
    s
}

fn plan(args: &PlanArgs) -> anyhow::Result<()> {
    if args.list_models || args.list_gpus {
        if args.list_models {
            print!("{}", list_models());
        }
        if args.list_gpus {
            print!("{}", list_gpus());
        }
        return Ok(());
    }
    let request = args.to_request()?;
    let result = crate::planner::plan_request(&request);
    match result {
        Ok(result) if args.json => println!("{}", serde_json::to_string_pretty(&result)?),
        Ok(result) => print!("{}", crate::planner::render_table(&result)),
        Err(err) if args.json => {
            println!("{}", serde_json::to_string_pretty(&err)?);
            anyhow::bail!("{}", workload::cli_error(&err));
        }
        Err(err) => anyhow::bail!("{}", workload::cli_error(&err)),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_args(argv: &[&str]) -> Result<PlanArgs, clap::Error> {
        let mut full = vec!["gpuplane", "plan"];
        full.extend_from_slice(argv);
        match Cli::try_parse_from(full)?.command {
            Command::Plan(args) => Ok(*args),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn plan_flags_are_case_insensitive_and_listing_needs_no_cluster() {
        let args = plan_args(&[
            "--model",
            "Llama2-7B",
            "--gpu",
            "H100",
            "--gpus",
            "8",
            "--workload",
            "Train",
            "--offload",
            "Optimizer-And-Params",
            "--recompute",
            "FULL",
        ])
        .unwrap();
        let req = args.to_request().unwrap();
        assert_eq!(req.workload.kind, crate::planner::WorkloadKind::Train);
        assert_eq!(req.pins.offload, Some(crate::planner::Offload::OptimizerAndParams));
        assert!(req.resolve().is_ok());
        // Typos get the valid values.
        let bad = plan_args(&["--model", "llama2-7b", "--gpu", "h100", "--gpus", "8", "--workload", "infer"]).unwrap();
        let err = bad.to_request().unwrap_err().to_string();
        assert!(err.contains("did you mean 'inference'") && err.contains("known: train, lora, inference"), "{err}");
        // Listing needs neither --gpu nor --gpus; planning needs both.
        assert!(plan_args(&["--list-models"]).is_ok());
        assert!(plan_args(&["--model", "llama2-7b"]).is_err());
        let models = list_models();
        for name in crate::planner::preset_names() {
            assert!(models.contains(name), "{name}");
        }
        assert!(list_gpus().contains("a100-80g") && list_gpus().contains("PCIe only"));
        // MoE flags build an MoE architecture; without --experts they are an error.
        let moe = plan_args(&[
            "--layers",
            "8",
            "--hidden",
            "1024",
            "--heads",
            "8",
            "--ffn",
            "512",
            "--vocab",
            "1000",
            "--experts",
            "16",
            "--experts-per-token",
            "2",
            "--gpu",
            "h100",
            "--gpus",
            "8",
        ])
        .unwrap();
        let arch = moe.to_request().unwrap().model.architecture.unwrap();
        assert_eq!(arch.moe.unwrap().experts, 16);
        let orphan = plan_args(&["--model", "llama2-7b", "--experts-per-token", "2", "--gpu", "h100", "--gpus", "8"]);
        assert!(orphan.unwrap().to_request().is_err());
    }
}
