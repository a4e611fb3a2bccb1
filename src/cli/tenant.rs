//! The tenant's commands of `gpuplane` (docs/cli.md): `login`, `run TASK.yaml`, `status`, `logs`, `cancel`, `down`,
//! `ssh`, `volumes`, `completion`. They talk to a gpuplane service over its public API only, with the key `login`
//! kept (mode 0600), exchanged for a short-lived token on each run. What a task file says is checked in
//! [`super::task`] (pure); here it becomes API calls.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use super::task::{self, Task};

/// What a tenant command ends with: the process's exit code.
pub type Exit = u8;
/// A request the service refused, or a task file with faults.
pub const EXIT_REFUSED: Exit = 2;
/// Interrupted (Ctrl-C), the job left running or cancelled as asked.
pub const EXIT_INTERRUPTED: Exit = 130;

#[derive(Debug, clap::Args)]
pub struct LoginArgs {
    /// The service's base URL, e.g. https://api.gpuplane.example.
    #[arg(long, env = "GPUPLANE_URL")]
    pub url: String,
    /// Read the API key from standard input (one line) instead of `GPUPLANE_API_KEY` or a prompt.
    #[arg(long)]
    pub api_key_stdin: bool,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "The exit code is the job's: 0 when it succeeded; a failed job's first failed node's exit \
code (1 when it has none); 130 when interrupted; 2 when the task file or a request was refused.\n\
Ctrl-C detaches (the job runs on; `gpuplane logs -f JOB` follows it again), or cancels the job with \
--cancel-on-interrupt.")]
pub struct RunArgs {
    /// The task file (YAML; docs/cli.md).
    pub task: PathBuf,
    /// Start the job and return at once (its id on stdout), without following its logs.
    #[arg(long)]
    pub detach: bool,
    /// On Ctrl-C, cancel the job instead of detaching from it.
    #[arg(long)]
    pub cancel_on_interrupt: bool,
    /// Release the lease once the job has ended (a lease the run made, or the task's `lease`).
    #[arg(long)]
    pub down: bool,
    /// Print the job's lines, and at the end the job, as JSON (one object per line).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// A job; without one, every active lease and its jobs.
    pub job: Option<Uuid>,
    /// As the API answers, in JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct LogsArgs {
    pub job: Uuid,
    /// Keep following as lines arrive, until the job has ended.
    #[arg(short, long)]
    pub follow: bool,
    /// Only the last N lines (then, with --follow, what comes).
    #[arg(long, value_name = "N")]
    pub tail: Option<u32>,
    /// Only this node's lines (its rank in the job).
    #[arg(long)]
    pub node: Option<u32>,
    /// Only this global rank's lines.
    #[arg(long)]
    pub rank: Option<u32>,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct CancelArgs {
    pub job: Uuid,
}

#[derive(Debug, clap::Args)]
pub struct DownArgs {
    pub lease: Uuid,
}

#[derive(Debug, clap::Args)]
pub struct SshArgs {
    pub lease: Uuid,
    /// The node's host name (default: the lease's first node).
    #[arg(long)]
    pub node: Option<String>,
    /// Arguments for `ssh` itself, after `--`.
    #[arg(last = true)]
    pub ssh_args: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct VolumesArgs {
    #[arg(long)]
    pub json: bool,
}

/// The tenant's commands.
#[derive(Debug, clap::Subcommand)]
pub enum TenantCommand {
    /// Keep an API key for the tenant commands (in ~/.config/gpuplane/config.json, mode 0600).
    Login(LoginArgs),
    /// Run a task file: rent its GPUs (or use its lease), upload its working directory, start its job and follow
    /// its logs; the exit code is the job's.
    Run(RunArgs),
    /// A job's state, or every active lease and its jobs.
    Status(StatusArgs),
    /// A job's logs: every line, the last ones, by node or rank; `-f` follows them.
    Logs(LogsArgs),
    /// Cancel a job.
    Cancel(CancelArgs),
    /// Release a lease.
    Down(DownArgs),
    /// SSH into a lease's environment (started when it is not running).
    Ssh(SshArgs),
    /// The tenant's volumes.
    Volumes(VolumesArgs),
}

pub async fn execute(command: TenantCommand) -> anyhow::Result<Exit> {
    match command {
        TenantCommand::Login(args) => login(&args).await,
        TenantCommand::Run(args) => run(&args).await,
        TenantCommand::Status(args) => status(&args).await,
        TenantCommand::Logs(args) => logs(&args).await,
        TenantCommand::Cancel(args) => cancel(&args).await,
        TenantCommand::Down(args) => down(&args).await,
        TenantCommand::Ssh(args) => ssh(&args).await,
        TenantCommand::Volumes(args) => volumes(&args).await,
    }
}

// ---------------------------------------------------------------------------------------------------------------
// The key `login` keeps

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Profile {
    url: String,
    api_key: String,
}

/// `$GPUPLANE_CONFIG`, else `$XDG_CONFIG_HOME/gpuplane/config.json`, else `~/.config/gpuplane/config.json`.
fn config_path() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("GPUPLANE_CONFIG") {
        return Ok(path.into());
    }
    let base = match std::env::var_os("XDG_CONFIG_HOME") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(std::env::var_os("HOME").context("no HOME to keep the configuration in")?).join(".config"),
    };
    Ok(base.join("gpuplane").join("config.json"))
}

/// `GPUPLANE_URL` and `GPUPLANE_API_KEY` when both are set (scripts, CI), else what `login` kept.
fn load_profile() -> anyhow::Result<Profile> {
    if let (Ok(url), Ok(api_key)) = (std::env::var("GPUPLANE_URL"), std::env::var("GPUPLANE_API_KEY")) {
        return Ok(Profile { url, api_key });
    }
    let path = config_path()?;
    let text = std::fs::read_to_string(&path)
        .map_err(|_| anyhow::anyhow!("not logged in: run `gpuplane login --url URL` ({} not found)", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not a gpuplane configuration", path.display()))
}

/// Written whole (a temporary file, then a rename), readable by its owner only: it holds an API key.
fn save_profile(profile: &Profile) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let path = config_path()?;
    let dir = path.parent().context("the configuration's directory")?;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
    file.write_all(serde_json::to_string_pretty(profile)?.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

// ---------------------------------------------------------------------------------------------------------------
// The service

/// A refusal from the service, with its problem's code and words.
#[derive(Debug)]
pub struct Refused {
    pub status: u16,
    pub problem: Value,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let code = self.problem["code"].as_str().unwrap_or("error");
        let detail = self.problem["detail"].as_str().unwrap_or("");
        write!(f, "the service refused it ({} {code}): {detail}", self.status)?;
        for error in self.problem["errors"].as_array().into_iter().flatten() {
            write!(f, "\n  {}: {}", error["field"].as_str().unwrap_or("?"), error["message"].as_str().unwrap_or("?"))?;
        }
        if let Some(context) = self.problem.get("context").filter(|c| !c.is_null()) {
            write!(f, "\n  {context}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Refused {}

struct Service {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Service {
    async fn connect() -> anyhow::Result<Self> {
        let profile = load_profile()?;
        Self::with_key(&profile.url, &profile.api_key).await
    }

    async fn with_key(url: &str, api_key: &str) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder().connect_timeout(Duration::from_secs(10)).build()?;
        let base = url.trim_end_matches('/').to_string();
        let mut service = Service { http, base, token: String::new() };
        let answer = service.send(reqwest::Method::POST, "/v1/auth/token", Some(json!({"api_key": api_key}))).await?;
        service.token = answer["access_token"].as_str().context("the service gave no access token")?.to_string();
        Ok(service)
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.base);
        let mut request = self.http.request(method.clone(), &url).timeout(Duration::from_secs(120));
        if !self.token.is_empty() {
            request = request.bearer_auth(&self.token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.with_context(|| format!("{method} {url}"))?;
        answer(response).await
    }

    async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.send(reqwest::Method::GET, path, None).await
    }

    async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }
}

async fn answer(response: reqwest::Response) -> anyhow::Result<Value> {
    let status = response.status();
    let bytes = response.bytes().await?;
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if status.is_success() { Ok(body) } else { Err(Refused { status: status.as_u16(), problem: body }.into()) }
}

/// Whether an error is the service's refusal (exit 2) rather than a failure to reach it.
pub fn exit_of(err: &anyhow::Error) -> Exit {
    if err.downcast_ref::<Refused>().is_some() || err.downcast_ref::<TaskFaults>().is_some() { EXIT_REFUSED } else { 1 }
}

/// A task file's faults, one per line.
#[derive(Debug)]
struct TaskFaults(String);

impl std::fmt::Display for TaskFaults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TaskFaults {}

/// A line on stderr that redraws itself on a terminal (progress), and is said once otherwise.
struct Progress {
    tty: bool,
    last: String,
}

impl Progress {
    fn new() -> Self {
        Progress { tty: std::io::stderr().is_terminal(), last: String::new() }
    }

    fn say(&mut self, text: &str) {
        if self.tty {
            eprint!("\r\x1b[2K{text}");
            let _ = std::io::stderr().flush();
        } else if text != self.last {
            eprintln!("{text}");
        }
        self.last = text.to_string();
    }

    fn done(&mut self, text: &str) {
        if self.tty {
            eprintln!("\r\x1b[2K{text}");
        } else {
            eprintln!("{text}");
        }
        self.last.clear();
    }
}

fn bar(done: u64, total: u64) -> String {
    let filled = (done * 20).checked_div(total).map_or(20, |f| f as usize);
    format!("[{}{}] {:>3}%", "#".repeat(filled), ".".repeat(20 - filled.min(20)), done * 100 / total.max(1))
}

// ---------------------------------------------------------------------------------------------------------------
// Commands

pub async fn login(args: &LoginArgs) -> anyhow::Result<Exit> {
    let api_key = if args.api_key_stdin {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line)?;
        line.trim().to_string()
    } else if let Ok(key) = std::env::var("GPUPLANE_API_KEY") {
        key
    } else {
        eprint!("API key (from the console's API keys page): ");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        std::io::stdin().read_line(&mut line)?;
        line.trim().to_string()
    };
    if api_key.is_empty() {
        bail!("no API key given");
    }
    let service = Service::with_key(&args.url, &api_key).await?;
    let tenant = service.get("/v1/tenant").await.unwrap_or(Value::Null);
    let path = save_profile(&Profile { url: args.url.trim_end_matches('/').to_string(), api_key })?;
    match tenant["name"].as_str() {
        Some(name) => {
            eprintln!("logged in to {} as tenant {name}; the key is kept in {} (mode 0600)", args.url, path.display())
        }
        None => eprintln!("logged in to {}; the key is kept in {} (mode 0600)", args.url, path.display()),
    }
    Ok(0)
}

pub async fn run(args: &RunArgs) -> anyhow::Result<Exit> {
    let text = std::fs::read_to_string(&args.task).with_context(|| format!("reading {}", args.task.display()))?;
    let task = task::parse(&text).map_err(|faults| {
        let lines: Vec<String> = faults.iter().map(|f| format!("{}: {f}", args.task.display())).collect();
        TaskFaults(lines.join("\n"))
    })?;
    let secrets = secret_values(&task)?;
    let base = args.task.parent().unwrap_or(Path::new("."));
    let service = Service::connect().await?;
    let mut progress = Progress::new();

    let (lease_id, made_lease) = match &task.lease {
        Some(id) => (id.clone(), false),
        None => (rent(&service, &task, &mut progress).await?, true),
    };
    let started = start_job(&service, &task, secrets, base, &lease_id, &mut progress).await;
    let created = match started {
        Ok(created) => created,
        Err(err) => {
            // A lease made for a job that could not start is not left running (and billing) behind the error.
            if made_lease {
                let released = service.post(&format!("/v1/leases/{lease_id}/release"), json!({})).await;
                eprintln!("lease {lease_id} {}", if released.is_ok() { "released" } else { "could not be released" });
            }
            return Err(err);
        }
    };
    let job_id = created["id"].as_str().context("the job's id")?.to_string();
    let plan = created["plan"].as_object().map(|p| {
        let get = |k: &str| p.get(k).and_then(Value::as_u64).unwrap_or(1);
        format!(" (plan: tp {} x pp {} x dp {})", get("tp"), get("pp"), get("dp"))
    });
    eprintln!("job {job_id} started on lease {lease_id}{}", plan.unwrap_or_default());
    if args.detach {
        println!("{job_id}");
        return Ok(0);
    }
    let filter = LogQuery { tail: None, node: None, rank: None };
    let followed = tokio::select! {
        done = follow(&service, &job_id, &filter, args.json) => Some(done?),
        _ = tokio::signal::ctrl_c() => None,
    };
    if followed.is_none() {
        if args.cancel_on_interrupt {
            service.post(&format!("/v1/jobs/{job_id}/cancel"), json!({})).await?;
            eprintln!("\ninterrupted: job {job_id} is being cancelled");
        } else {
            eprintln!("\ndetached: job {job_id} runs on; `gpuplane logs -f {job_id}` follows it again");
        }
        return Ok(EXIT_INTERRUPTED);
    }
    let job = settle(&service, &job_id).await?;
    if args.down {
        service.post(&format!("/v1/leases/{lease_id}/release"), json!({})).await?;
        eprintln!("lease {lease_id} released{}", if made_lease { "" } else { " (it was the task's)" });
    } else if made_lease {
        eprintln!("lease {lease_id} stays until it ends: `gpuplane down {lease_id}` releases it");
    }
    if args.json {
        println!("{job}");
    }
    Ok(job_exit(&job))
}

/// Once the lease is active: upload the working directory and start the job; returns the job.
async fn start_job(
    service: &Service,
    task: &Task,
    secrets: serde_json::Map<String, Value>,
    base: &Path,
    lease_id: &str,
    progress: &mut Progress,
) -> anyhow::Result<Value> {
    wait_active(service, lease_id, progress).await?;

    let workdir = match &task.workdir {
        Some(dir) => Some(upload(service, &base.join(dir), progress).await?),
        None => None,
    };
    let mut job = json!({
        "template": task.template.clone().unwrap_or_else(|| "auto".into()),
        "command": task.run,
        "args": task.args,
        "env": task.env,
        "secret_env": secrets,
    });
    let fields = [
        ("model", &task.model),
        ("workload", &task.workload),
        ("pins", &task.pins),
        ("parameters", &task.parameters),
        ("restart", &task.restart),
    ];
    for (key, value) in fields {
        if let Some(value) = value {
            job[key] = value.clone();
        }
    }
    if let Some(digest) = workdir {
        job["workdir"] = json!(digest);
    }
    if let Some(setup) = &task.setup {
        job["setup"] = json!(setup);
    }
    service.post(&format!("/v1/leases/{lease_id}/jobs"), job).await
}

/// The values of the task's secret names, from the environment `gpuplane run` runs in.
fn secret_values(task: &Task) -> anyhow::Result<serde_json::Map<String, Value>> {
    task.secrets
        .iter()
        .map(|name| {
            let value = std::env::var(name)
                .map_err(|_| TaskFaults(format!("secret `{name}` is not set in this environment")))?;
            Ok((name.clone(), Value::String(value)))
        })
        .collect()
}

/// Make the lease the task asks for; returns its id.
async fn rent(service: &Service, task: &Task, progress: &mut Progress) -> anyhow::Result<String> {
    let resources = task.resources.clone().unwrap_or_default();
    let mut lease = match &resources.cheapest {
        Some(cheapest) => {
            progress.say("asking for advice: the cheapest option that meets the deadline and the budget");
            let mut query = json!({"model": task.model, "workload": task.workload,
                "target": {"training_tokens": cheapest.tokens}});
            if let Some(hours) = cheapest.deadline_hours {
                query["deadline_hours"] = json!(hours);
            }
            if let Some(budget) = cheapest.budget_minor {
                query["budget_minor"] = json!(budget);
            }
            let advice = service.post("/v1/advice", query).await?;
            let options = advice["options"].as_array().cloned().unwrap_or_default();
            let chosen = options
                .iter()
                .filter(|o| o["meets_deadline"] == true && o["meets_budget"] == true)
                .min_by_key(|o| o["cost_minor"].as_i64().unwrap_or(i64::MAX))
                .with_context(|| {
                    format!(
                        "no option finishes by the deadline within the budget ({} options looked at)",
                        options.len()
                    )
                })?;
            let hours = chosen["hours"].as_f64().unwrap_or(1.0).ceil().max(1.0) as u32;
            progress.done(&format!(
                "advice: {} x {} in pool {} for {hours} h, about {} {}",
                chosen["gpu_count"],
                chosen["gpu_key"].as_str().unwrap_or("?"),
                chosen["pool_id"].as_str().unwrap_or("?"),
                chosen["cost_minor"],
                chosen["currency"].as_str().unwrap_or("")
            ));
            json!({"pool_id": chosen["pool_id"], "gpu_count": chosen["gpu_count"], "duration_hours": hours})
        }
        None => {
            let mut lease = json!({"gpu_count": resources.gpus, "duration_hours": resources.hours});
            match (&resources.gpu, &resources.pool) {
                (_, Some(pool)) => lease["pool_id"] = json!(pool),
                (Some(gpu), None) => lease["gpu_model"] = json!(gpu),
                (None, None) => {}
            }
            lease
        }
    };
    if let Some(placement) = &resources.placement {
        lease["placement"] = json!(placement);
    }
    if resources.queue {
        lease["queue"] = json!(true);
    }
    if !task.volumes.is_empty() {
        let volumes = service.get("/v1/volumes").await?;
        let items = volumes.as_array().cloned().unwrap_or_default();
        let mut attach = Vec::new();
        for mount in &task.volumes {
            let found = items
                .iter()
                .find(|v| v["name"] == mount.name.as_str() && v["deleted_at"].is_null())
                .with_context(|| format!("no volume named `{}` (`gpuplane volumes` lists them)", mount.name))?;
            attach.push(
                json!({"volume_id": found["id"], "mount": mount.mount.clone().unwrap_or_else(|| mount.name.clone()),
                "read_only": mount.read_only}),
            );
        }
        lease["volumes"] = json!(attach);
    }
    let made = service.post("/v1/leases", lease).await?;
    let id = made["id"].as_str().context("the lease's id")?.to_string();
    eprintln!("lease {id}: {} GPUs, {}", made["gpu_count"], made["state"].as_str().unwrap_or("?"));
    Ok(id)
}

/// Wait until the lease is active (a queued lease waits its turn), saying so.
async fn wait_active(service: &Service, lease_id: &str, progress: &mut Progress) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        let lease = service.get(&format!("/v1/leases/{lease_id}")).await?;
        match lease["state"].as_str().unwrap_or("") {
            "active" => {
                if started.elapsed() > Duration::from_secs(1) {
                    progress.done(&format!("lease {lease_id} is active"));
                }
                return Ok(());
            }
            "queued" | "pending" => {
                let waited = started.elapsed().as_secs();
                let spinner = ["|", "/", "-", "\\"][(waited as usize) % 4];
                progress.say(&format!("{spinner} waiting for the lease's GPUs (queued {waited} s)"));
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            other => bail!("lease {lease_id} is {other}: {}", lease["end_reason"].as_str().unwrap_or("")),
        }
    }
}

/// Pack the directory as the API takes it (a gzip'd tar of its files and directories; links and special files
/// are left out, said on stderr), send it unless the tenant has it already, and return its digest.
async fn upload(service: &Service, dir: &Path, progress: &mut Progress) -> anyhow::Result<String> {
    use futures_util::StreamExt as _;
    let dir = dir.canonicalize().with_context(|| format!("the working directory {}", dir.display()))?;
    let archive = tokio::task::spawn_blocking({
        let dir = dir.clone();
        move || pack(&dir)
    })
    .await??;
    let digest = crate::uploads::digest_of(&archive);
    if service.get(&format!("/v1/uploads/{digest}")).await.is_ok() {
        eprintln!("working directory {} unchanged since its upload ({digest})", dir.display());
        return Ok(digest);
    }
    let total = archive.len() as u64;
    let started = Instant::now();
    progress.say(&format!("uploading {} {}", dir.display(), bar(0, total)));
    // The archive goes out in 256 KiB chunks; on a terminal the bar is redrawn as the connection takes each one
    // (elsewhere, the line above is said once).
    let mut sending = Progress::new();
    let shown = dir.display().to_string();
    let body = futures_util::stream::iter((0..archive.len()).step_by(UPLOAD_CHUNK)).map(move |start| {
        if sending.tty {
            sending.say(&format!("uploading {shown} {}", bar(start as u64, total)));
        }
        let chunk = archive[start..archive.len().min(start + UPLOAD_CHUNK)].to_vec();
        Ok::<_, std::io::Error>(http_body::Frame::data(axum::body::Bytes::from(chunk)))
    });
    let response = service
        .http
        .post(format!("{}/v1/uploads", service.base))
        .bearer_auth(&service.token)
        .header("content-type", "application/octet-stream")
        .header("content-length", total)
        .timeout(Duration::from_secs(600))
        .body(reqwest::Body::wrap(http_body_util::StreamBody::new(body)))
        .send()
        .await?;
    let uploaded = answer(response).await?;
    progress.done(&format!(
        "uploaded {} {} ({} files, {:.1} MiB compressed, {:.1} s)",
        dir.display(),
        bar(total, total),
        uploaded["files"],
        total as f64 / 1048576.0,
        started.elapsed().as_secs_f64()
    ));
    Ok(digest)
}

/// Bytes of an upload sent between two redraws of its progress bar.
const UPLOAD_CHUNK: usize = 256 * 1024;

/// Directories skipped when packing a working directory.
const SKIPPED_DIRS: &[&str] = &[".git", "__pycache__", ".venv", "node_modules"];

fn pack(dir: &Path) -> anyhow::Result<Vec<u8>> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    tar.follow_symlinks(false);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&current)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            let relative = path.strip_prefix(dir)?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                if SKIPPED_DIRS.iter().any(|s| entry.file_name() == *s) {
                    continue;
                }
                tar.append_dir(relative, &path)?;
                stack.push(path);
            } else if kind.is_file() {
                tar.append_path_with_name(&path, relative)?;
            } else {
                eprintln!("left out of the upload (not a file or a directory): {}", relative.display());
            }
        }
    }
    Ok(tar.into_inner()?.finish()?)
}

/// Which lines to show.
#[derive(Debug, Clone, Copy)]
struct LogQuery {
    tail: Option<u32>,
    node: Option<u32>,
    rank: Option<u32>,
}

impl LogQuery {
    fn query(&self) -> String {
        let mut parts = Vec::new();
        if let Some(node) = self.node {
            parts.push(format!("node={node}"));
        }
        if let Some(rank) = self.rank {
            parts.push(format!("rank={rank}"));
        }
        if let Some(tail) = self.tail {
            parts.push(format!("tail={tail}"));
        }
        parts.join("&")
    }
}

fn print_line(line: &Value, json: bool) {
    let mut out = std::io::stdout().lock();
    if json {
        let _ = writeln!(out, "{line}");
        return;
    }
    let text = line["text"].as_str().unwrap_or("");
    let _ = match line["rank"].as_i64() {
        Some(rank) => writeln!(out, "[node {} rank {rank}] {text}", line["node"]),
        None => writeln!(out, "[node {}] {text}", line["node"]),
    };
}

/// Print the job's lines as they arrive (server-sent events), reconnecting after a break where it stopped, until
/// the job has ended and its last line is out.
async fn follow(service: &Service, job_id: &str, filter: &LogQuery, json: bool) -> anyhow::Result<()> {
    let mut last: Option<i64> = None;
    let mut failures = 0;
    loop {
        let mut query = format!(
            "follow=true&{}",
            LogQuery { tail: if last.is_none() { filter.tail } else { None }, ..*filter }.query()
        );
        if let Some(after) = last {
            query.push_str(&format!("&after={after}"));
        }
        let url = format!("{}/v1/jobs/{job_id}/logs?{}", service.base, query.trim_end_matches('&'));
        let response = match service.http.get(&url).bearer_auth(&service.token).send().await {
            Ok(response) if response.status().is_success() => response,
            Ok(response) => return answer(response).await.map(|_| ()),
            Err(err) => {
                failures += 1;
                if failures > 30 {
                    return Err(err).context("following the job's logs");
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
                continue;
            }
        };
        failures = 0;
        let mut response = response;
        let (mut pending, mut event, mut id) = (String::new(), String::new(), None::<i64>);
        while let Ok(Some(chunk)) = response.chunk().await {
            pending.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = pending.find('\n') {
                let field: String = pending.drain(..=end).collect();
                let field = field.trim_end_matches(['\n', '\r']);
                if field.is_empty() {
                    event.clear();
                } else if let Some(value) = field.strip_prefix("event: ") {
                    event = value.to_string();
                } else if let Some(value) = field.strip_prefix("id: ") {
                    id = value.parse().ok();
                } else if let Some(data) = field.strip_prefix("data: ") {
                    match event.as_str() {
                        "line" => {
                            print_line(&serde_json::from_str(data).unwrap_or(Value::Null), json);
                            last = id.or(last);
                        }
                        "end" => return Ok(()),
                        "error" => eprintln!("the service: {data}; reconnecting"),
                        _ => {}
                    }
                }
            }
        }
        // The stream broke (the service restarted, the network): resume after the last line.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The job once it has ended (its state can trail its last line by a moment).
async fn settle(service: &Service, job_id: &str) -> anyhow::Result<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let job = service.get(&format!("/v1/jobs/{job_id}")).await?;
        if ["succeeded", "failed", "cancelled"].contains(&job["state"].as_str().unwrap_or(""))
            || Instant::now() > deadline
        {
            return Ok(job);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The exit code a job ends `gpuplane run` with.
fn job_exit(job: &Value) -> Exit {
    match job["state"].as_str() {
        Some("succeeded") => 0,
        state => {
            eprintln!(
                "job {}: {}: {}",
                job["id"].as_str().unwrap_or("?"),
                state.unwrap_or("?"),
                job["reason"].as_str().unwrap_or("")
            );
            let failed = job["nodes"].as_array().into_iter().flatten().find(|n| n["state"] == "failed");
            failed.and_then(|n| n["exit_code"].as_i64()).filter(|c| (1..=255).contains(c)).map_or(1, |c| c as Exit)
        }
    }
}

pub async fn status(args: &StatusArgs) -> anyhow::Result<Exit> {
    let service = Service::connect().await?;
    if let Some(job) = args.job {
        let job = service.get(&format!("/v1/jobs/{job}")).await?;
        if args.json {
            println!("{job}");
        } else {
            print_job(&job);
        }
        return Ok(0);
    }
    let leases = service.get("/v1/leases?limit=100").await?;
    let items = leases["items"].as_array().cloned().unwrap_or_default();
    let mut all = Vec::new();
    for lease in items.iter().filter(|l| ["active", "queued"].contains(&l["state"].as_str().unwrap_or(""))) {
        let id = lease["id"].as_str().unwrap_or_default();
        let jobs = service.get(&format!("/v1/leases/{id}/jobs")).await?;
        if args.json {
            all.push(json!({"lease": lease, "jobs": jobs["items"]}));
            continue;
        }
        println!(
            "lease {id}  {}  {} GPUs  ends {}",
            lease["state"].as_str().unwrap_or("?"),
            lease["gpu_count"],
            lease["ends_at"].as_str().unwrap_or("-")
        );
        for job in jobs["items"].as_array().into_iter().flatten() {
            println!(
                "  job {}  {}  {}",
                job["id"].as_str().unwrap_or("?"),
                job["state"].as_str().unwrap_or("?"),
                job["template"].as_str().unwrap_or("")
            );
        }
    }
    if args.json {
        println!("{}", Value::Array(all));
    }
    Ok(0)
}

fn print_job(job: &Value) {
    println!(
        "job {}  {}  template {}",
        job["id"].as_str().unwrap_or("?"),
        job["state"].as_str().unwrap_or("?"),
        job["template"].as_str().unwrap_or("?")
    );
    if let Some(reason) = job["reason"].as_str() {
        println!("  reason: {reason}");
    }
    if let Some(progress) = job["progress"].as_object() {
        println!(
            "  progress: {} of {}",
            progress.get("done").unwrap_or(&Value::Null),
            progress.get("total").unwrap_or(&Value::Null)
        );
    }
    if let Some(m) = job["measured"].as_object() {
        println!(
            "  {} steps, median {:.3} s, loss {:.3} -> {:.3}",
            m["steps"],
            m["median_step_time_s"].as_f64().unwrap_or(0.0),
            m["first_loss"].as_f64().unwrap_or(0.0),
            m["last_loss"].as_f64().unwrap_or(0.0)
        );
    }
    for node in job["nodes"].as_array().into_iter().flatten() {
        println!(
            "  node {} {}  {}  exit {}",
            node["node_rank"],
            node["hostname"].as_str().unwrap_or("?"),
            node["state"].as_str().unwrap_or("?"),
            node["exit_code"]
        );
    }
}

pub async fn logs(args: &LogsArgs) -> anyhow::Result<Exit> {
    let service = Service::connect().await?;
    let job = args.job.to_string();
    let filter = LogQuery { tail: args.tail, node: args.node, rank: args.rank };
    if args.follow {
        tokio::select! {
            done = follow(&service, &job, &filter, args.json) => done?,
            _ = tokio::signal::ctrl_c() => return Ok(EXIT_INTERRUPTED),
        }
        return Ok(0);
    }
    // Every line (or the tail), a page at a time.
    let mut after: Option<i64> = None;
    loop {
        let mut query = filter.query();
        if let Some(after) = after {
            query = format!("{}&after={after}", LogQuery { tail: None, ..filter }.query());
        }
        let page = service.get(&format!("/v1/jobs/{job}/logs?limit=10000&{query}")).await?;
        let lines = page["lines"].as_array().cloned().unwrap_or_default();
        for line in &lines {
            print_line(line, args.json);
        }
        if args.tail.is_some() || lines.len() < 10000 {
            return Ok(0);
        }
        after = page["next_after"].as_i64();
    }
}

pub async fn cancel(args: &CancelArgs) -> anyhow::Result<Exit> {
    let service = Service::connect().await?;
    let job = service.post(&format!("/v1/jobs/{}/cancel", args.job), json!({})).await?;
    eprintln!(
        "job {}: {}",
        args.job,
        if job["state"] == "cancelled" { "cancelled" } else { "cancel asked; its processes are stopping" }
    );
    Ok(0)
}

pub async fn down(args: &DownArgs) -> anyhow::Result<Exit> {
    let service = Service::connect().await?;
    let lease = service.post(&format!("/v1/leases/{}/release", args.lease), json!({})).await?;
    eprintln!("lease {}: {}", args.lease, lease["state"].as_str().unwrap_or("?"));
    Ok(0)
}

pub async fn volumes(args: &VolumesArgs) -> anyhow::Result<Exit> {
    let service = Service::connect().await?;
    let volumes = service.get("/v1/volumes").await?;
    if args.json {
        println!("{volumes}");
        return Ok(0);
    }
    for v in volumes.as_array().into_iter().flatten() {
        let attached = v["attached_to"].as_array().map_or(0, Vec::len);
        println!(
            "{}  {}  {} GiB  {}  pool {}  attached to {attached} lease(s)",
            v["id"].as_str().unwrap_or("?"),
            v["name"].as_str().unwrap_or("?"),
            v["size_gib"],
            v["state"].as_str().unwrap_or("?"),
            v["pool_name"].as_str().unwrap_or("?")
        );
    }
    Ok(0)
}

/// Run `ssh` to the lease's environment (started first when it is not running), as the environment's user.
pub async fn ssh(args: &SshArgs) -> anyhow::Result<Exit> {
    let service = Service::connect().await?;
    let path = format!("/v1/leases/{}/environment", args.lease);
    let mut environment = match service.get(&path).await {
        Ok(environment) if environment["state"] != "stopped" => environment,
        _ => service.post(&path, json!({})).await?,
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut progress = Progress::new();
    while environment["state"] != "ready" {
        if Instant::now() > deadline || ["failed", "stopped"].contains(&environment["state"].as_str().unwrap_or("")) {
            bail!("the environment is {}: {environment}", environment["state"]);
        }
        progress.say("waiting for the lease's SSH environment");
        tokio::time::sleep(Duration::from_secs(1)).await;
        environment = service.get(&path).await?;
    }
    let nodes = environment["nodes"].as_array().cloned().unwrap_or_default();
    let node = match &args.node {
        Some(name) => nodes
            .iter()
            .find(|n| n["hostname"] == name.as_str())
            .with_context(|| format!("no node {name} in the lease"))?,
        None => nodes.first().context("the environment has no node")?,
    };
    let (host, port) =
        (node["host"].as_str().context("the node's address")?, node["port"].as_u64().context("the node's port")?);
    let user = environment["user"].as_str().unwrap_or("tenant");
    eprintln!("host keys: {}", node["host_key_fingerprints"]);
    let status = std::process::Command::new("ssh")
        .args(["-p", &port.to_string(), &format!("{user}@{host}")])
        .args(&args.ssh_args)
        .status()
        .context("running ssh")?;
    Ok(status.code().map_or(1, |c| c.clamp(0, 255) as Exit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jobs_exit_is_its_first_failed_nodes() {
        assert_eq!(job_exit(&json!({"state": "succeeded"})), 0);
        let failed = json!({"state": "failed", "nodes": [{"state": "cancelled", "exit_code": 143}, {"state": "failed", "exit_code": 3}]});
        assert_eq!(job_exit(&failed), 3);
        assert_eq!(job_exit(&json!({"state": "failed", "nodes": [{"state": "failed", "exit_code": null}]})), 1);
        assert_eq!(job_exit(&json!({"state": "cancelled", "nodes": []})), 1);
    }

    #[test]
    fn the_upload_packs_files_and_directories_and_leaves_links_out() {
        let dir = std::env::temp_dir().join(format!("gpuplane-pack-{}", Uuid::new_v4()));
        std::fs::create_dir_all(dir.join("src/.git")).unwrap();
        std::fs::write(dir.join("src/train.py"), "print(1)\n").unwrap();
        std::fs::write(dir.join("src/.git/HEAD"), "ref\n").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("passwd")).unwrap();
        let archive = pack(&dir).unwrap();
        let summary = gpuplane_agent::archive::inspect(&archive, gpuplane_agent::archive::LIMITS).unwrap();
        assert_eq!((summary.files, summary.directories), (1, 1), "src/ and src/train.py only");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
