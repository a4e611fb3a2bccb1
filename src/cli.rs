//! The `gpuplane` command line: `serve`, `migrate`, `openapi`, `bootstrap`, `plan`, `agent`, `demo`.

use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::app::{AppState, cancel_on_signal, openapi_document, run, spawn_background};
use crate::auth::Role;
use crate::config::{DatabaseArgs, LogFormat, ServeArgs};
use crate::telemetry::init_logging;

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
    /// Run the node agent on a GPU host: register, then heartbeat with GPU telemetry (NVML or --simulate).
    Agent(crate::agent::AgentArgs),
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
}

pub async fn execute(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => serve(args).await,
        Command::Migrate(db) => {
            init_logging(LogFormat::Text);
            crate::db::connect_and_migrate(&db).await?;
            println!("database is migrated");
            Ok(())
        }
        Command::Plan(args) => plan(&args),
        Command::Agent(args) => crate::agent::run(args).await,
        Command::Demo(args) => crate::demo::run(args).await,
        Command::Openapi => {
            println!("{}", serde_json::to_string_pretty(&openapi_document())?);
            Ok(())
        }
        Command::Bootstrap { database, name } => {
            init_logging(LogFormat::Text);
            let pool = crate::db::connect_and_migrate(&database).await?;
            let key = bootstrap_operator(&pool, &name).await?;
            println!("{key}");
            eprintln!("This is the operator API key. It is shown once: store it now.");
            Ok(())
        }
    }
}

/// Create the first operator key. Serialized with an advisory lock so two concurrent bootstraps cannot both win.
pub async fn bootstrap_operator(pool: &sqlx::PgPool, name: &str) -> anyhow::Result<String> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('gpuplane.bootstrap'))").execute(&mut *tx).await?;
    let (exists,): (bool,) =
        sqlx::query_as("SELECT EXISTS (SELECT 1 FROM api_keys WHERE role = 'operator')").fetch_one(&mut *tx).await?;
    if exists {
        anyhow::bail!("an operator already exists; create further keys with the API");
    }
    let created = crate::auth::routes::insert_api_key(&mut tx, None, name, Role::Operator).await?;
    tx.commit().await?;
    Ok(created.api_key)
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    init_logging(args.log_format);
    let settings = args.settings()?;
    let pool = crate::db::connect_and_migrate(&args.database).await?;
    // Heartbeats need today's telemetry partition: make sure it exists before the first one, even after days down.
    crate::agents::rollups::ensure_partitions(&pool, &settings, chrono::Utc::now()).await?;
    let state = AppState::new(pool, settings)?;
    let listener = tokio::net::TcpListener::bind(args.bind).await?;
    let addr = listener.local_addr()?;
    // Printed on stdout so scripts and tests can read the port when binding to port 0.
    println!("gpuplane listening on http://{addr}");
    tracing::info!(%addr, "listening");
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone());
    let background = spawn_background(&state, &shutdown);
    run(listener, state, shutdown).await?;
    for task in background {
        let _ = task.await;
    }
    tracing::info!("stopped");
    Ok(())
}

/// `gpuplane plan`: a model (preset or architecture), a workload, a cluster, and optional pins.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// Model preset, e.g. llama3-70b (see the README for the list). Or give the architecture flags.
    #[arg(long)]
    pub model: Option<String>,
    #[arg(long)]
    pub layers: Option<u32>,
    #[arg(long)]
    pub hidden: Option<u32>,
    #[arg(long)]
    pub heads: Option<u32>,
    #[arg(long)]
    pub kv_heads: Option<u32>,
    #[arg(long)]
    pub ffn: Option<u32>,
    #[arg(long)]
    pub vocab: Option<u32>,
    /// train (pre-training / full fine-tune), lora, or inference.
    #[arg(long, default_value = "train")]
    pub workload: String,
    /// bf16, fp16 or fp8.
    #[arg(long, default_value = "bf16")]
    pub precision: String,
    #[arg(long)]
    pub seq: Option<u32>,
    #[arg(long)]
    pub global_batch: Option<u32>,
    #[arg(long)]
    pub lora_rank: Option<u32>,
    /// Inference: context tokens per sequence.
    #[arg(long)]
    pub context: Option<u32>,
    /// Inference: concurrent sequences per replica.
    #[arg(long)]
    pub concurrent: Option<u32>,
    /// GPU model key, e.g. a100-80g.
    #[arg(long)]
    pub gpu: String,
    /// Total GPUs.
    #[arg(long)]
    pub gpus: u32,
    #[arg(long)]
    pub gpus_per_node: Option<u32>,
    /// Inter-node bandwidth per node, Gbit/s.
    #[arg(long)]
    pub inter_node_gbps: Option<f64>,
    /// No RDMA between nodes (TCP).
    #[arg(long)]
    pub no_rdma: bool,
    #[arg(long)]
    pub tp: Option<u32>,
    #[arg(long)]
    pub pp: Option<u32>,
    #[arg(long)]
    pub dp: Option<u32>,
    #[arg(long)]
    pub vp: Option<u32>,
    #[arg(long)]
    pub micro_batch: Option<u32>,
    #[arg(long)]
    pub zero: Option<u8>,
    /// none, selective or full.
    #[arg(long)]
    pub recompute: Option<String>,
    #[arg(long)]
    pub sequence_parallel: Option<bool>,
    /// Plans to show.
    #[arg(long, default_value_t = 10)]
    pub top: u32,
    /// Print the full result as JSON.
    #[arg(long)]
    pub json: bool,
}

impl PlanArgs {
    /// The same request the API takes, so the CLI and `POST /v1/plans` validate alike.
    pub fn to_request(&self) -> anyhow::Result<crate::planner::PlanRequest> {
        let architecture = match (self.layers, self.hidden, self.heads, self.ffn, self.vocab) {
            (Some(layers), Some(hidden), Some(heads), Some(ffn), Some(vocab)) => Some(serde_json::json!({
                "layers": layers, "hidden": hidden, "heads": heads, "kv_heads": self.kv_heads.unwrap_or(heads),
                "ffn": ffn, "vocab": vocab })),
            (None, None, None, None, None) => None,
            _ => anyhow::bail!(
                "an explicit architecture needs --layers --hidden --heads --ffn --vocab (and optionally --kv-heads)"
            ),
        };
        let request = serde_json::json!({
            "model": { "preset": self.model, "architecture": architecture },
            "workload": { "kind": self.workload, "precision": self.precision, "seq_len": self.seq,
                "global_batch": self.global_batch, "lora_rank": self.lora_rank, "context_len": self.context,
                "concurrent_seqs": self.concurrent },
            "cluster": { "gpu": self.gpu, "gpus": self.gpus, "gpus_per_node": self.gpus_per_node,
                "inter_node_gbps": self.inter_node_gbps, "rdma": !self.no_rdma },
            "pins": { "tp": self.tp, "pp": self.pp, "dp": self.dp, "vp": self.vp, "micro_batch": self.micro_batch,
                "zero_stage": self.zero, "recompute": self.recompute, "sequence_parallel": self.sequence_parallel },
            "top_n": self.top,
        });
        Ok(serde_json::from_value(request)?)
    }
}

fn plan(args: &PlanArgs) -> anyhow::Result<()> {
    let request = args.to_request()?;
    let result = request.resolve().and_then(|input| crate::planner::plan(&input));
    match result {
        Ok(result) if args.json => println!("{}", serde_json::to_string_pretty(&result)?),
        Ok(result) => print!("{}", crate::planner::render_table(&result)),
        Err(err) if args.json => {
            println!("{}", serde_json::to_string_pretty(&err)?);
            anyhow::bail!("{err}");
        }
        Err(err) => anyhow::bail!("{err}"),
    }
    Ok(())
}
