//! The node agent (`gpuplane-agent`): the program that runs on every GPU host and keeps the service informed.
//!
//! 1. Read the host's GPUs, through NVML ([`gpu_source::NvmlGpus`]) or simulated ones (`--simulate MODEL:COUNT`,
//!    [`simulated::SimulatedGpus`]), into [`NodeFacts`].
//! 2. Attach with the credential saved in the state directory ([`credential`]) or, without one, register with the
//!    join token (`POST /v1/agent/register`) and save the credential it returns, atomically. A restarted agent
//!    therefore attaches to the same node instead of creating another.
//! 3. Loop ([`heartbeat`]): every `heartbeat_interval_s` (as the service last said) take one sample per GPU into a
//!    bounded buffer ([`buffer`]), and deliver the buffer, oldest first and at most
//!    [`heartbeat::MAX_SAMPLES_PER_HEARTBEAT`] per request, in a heartbeat (`POST /v1/agent/heartbeat`).
//!    Delivered samples leave the buffer. On a network failure or a 5xx/429 they stay, and the agent retries with
//!    exponential backoff and full jitter ([`backoff`]) while it keeps sampling, so a short outage loses no
//!    telemetry (the service dedupes samples by GPU and time, so resending is safe). A 401 means the credential is
//!    gone: register again if a join token was given, else stop with an error. Any other 4xx rejects the batch
//!    itself: it is logged and dropped.
//! 4. SIGINT/SIGTERM stop the loop at once, mid-request if need be, and the agent exits 0.
//!
//! `--probe` prints the facts and one sample as JSON instead.
//!
//! With `--model-cache DIR`, every lease of the host reads DIR (a Hugging Face hub cache, [`model_cache`]) at
//! `/models`, and the heartbeat reports the models it holds.

pub mod archive;
pub mod args;
pub mod backoff;
pub mod buffer;
pub mod client;
pub mod credential;
pub mod echo;
pub mod environments;
pub mod exporter;
pub mod gpu_source;
pub mod heartbeat;
pub mod host;
pub mod jobs;
pub mod launch;
pub mod launchers;
pub mod lease_net;
pub mod model_cache;
pub mod process;
pub mod sandbox;
pub mod serving;
pub mod signals;
pub mod simulated;
pub mod steps;
pub mod volume_keeper;
pub mod volumes;

use anyhow::Context;
use chrono::{SubsecRound, Utc};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use gpuplane_protocol::agent::{GpuSample, NodeFacts};

pub use args::{AgentArgs, InjectXid, SimulateSpec};
use gpu_source::{GpuSource, NvmlGpus};
use simulated::SimulatedGpus;

/// NVML when no `--simulate` is given.
pub fn open_gpu_source(args: &AgentArgs, hostname: &str) -> anyhow::Result<Box<dyn GpuSource>> {
    match args.simulate {
        Some(spec) => {
            let gpus = SimulatedGpus::new(spec, hostname, args.inject_xid, args.state_dir.join("devices"))?
                .with_versions(args.driver_version.as_deref(), args.cuda_version.as_deref());
            Ok(Box::new(gpus))
        }
        None => Ok(Box::new(NvmlGpus::open()?)),
    }
}

/// Run the agent (`gpuplane-agent`, or `gpuplane agent` in the service's binary: the same code).
pub async fn run(mut args: AgentArgs) -> anyhow::Result<()> {
    init_logging();
    let hostname = args.hostname.clone().unwrap_or_else(local_hostname);
    describe_host(&mut args, &hostname, std::path::Path::new("/"));
    let mut source = open_gpu_source(&args, &hostname)?;
    if args.probe {
        let report = probe_report(&args, &hostname, source.as_mut())?;
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let mut facts = node_facts(&args, &hostname, source.as_mut())?;
    tracing::info!(launchers = %launchers::describe(facts.launchers.as_ref()), "launchers found on the PATH jobs see");
    let shutdown = CancellationToken::new();
    crate::signals::cancel_on_signal(shutdown.clone());
    let echo_delay = std::time::Duration::from_millis(args.simulate_echo_delay_ms);
    let echo_bind = std::net::SocketAddr::from(([0, 0, 0, 0], args.echo_port));
    facts.echo_port = Some(echo::serve(echo_bind, echo_delay, shutdown.clone()).await?.into());
    let server = args.server.as_deref().context("--server (or GPUPLANE_SERVER) is required")?;
    let server = credential::normalize_server(server);
    check_server_url(&server, args.insecure_http)?;
    let join_token = join_token(&args)?;
    let volumes = volume_keeper::VolumeKeeper::open(&args.volume_store, &args.state_dir)?;
    let job_host = job_host(&args, &hostname, &facts.address, source.as_mut(), volumes.mounts())?;
    let model_cache = job_host.model_cache.clone();
    facts.lease_subnet = job_host.network.as_ref().map(|n| n.subnet.to_string());
    let agent = heartbeat::Agent {
        client: client::ServiceClient::new(&server, args.ca_cert.as_deref())?,
        store: credential::CredentialStore::new(&args.state_dir),
        server,
        join_token,
        facts,
        job_host: Some(job_host),
        prober: echo::Prober::default(),
        container_runtime: args.container_runtime.program(),
        volumes,
        model_cache,
    };
    let mut sampler = heartbeat::Sampler::new(source, args.max_buffered_samples as usize);
    let exporter = match args.metrics_listen {
        Some(addr) => {
            let latest = exporter::LatestSamples::default();
            sampler = sampler.with_latest(latest.clone());
            let gpus = agent.facts.gpus.clone();
            Some(exporter::serve(addr, agent.facts.hostname.clone(), gpus, latest, shutdown.clone()).await?)
        }
        None => None,
    };
    let result = agent.run(sampler, shutdown.clone()).await;
    shutdown.cancel();
    if let Some(task) = exporter {
        let _ = task.await;
    }
    result
}

/// Text logs on stderr (journald adds the timestamps), coloured only on a terminal; `RUST_LOG` overrides the
/// default level (info).
fn init_logging() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

/// Fill the address, bandwidth and RDMA facts not given with what `root` shows ([`host`]), and say at start
/// where each fact came from, one line each.
pub fn describe_host(args: &mut AgentArgs, hostname: &str, root: &std::path::Path) -> host::HostNetwork {
    let given = host::Given { address: args.address.clone(), network_gbps: args.network_gbps, rdma: args.rdma };
    let described = if args.simulate.is_some() {
        host::describe_simulated(&given, hostname)
    } else {
        let route_address = if given.address.is_none() { host::default_route_address(root) } else { None };
        host::describe(&given, hostname, root, route_address)
    };
    let hostname_source = if args.hostname.is_some() { "given" } else { "detected (the machine's host name)" };
    tracing::info!("host fact: hostname {hostname}, {hostname_source}");
    tracing::info!("host fact: address {}, {}", described.address.value, described.address.source);
    tracing::info!("host fact: network {} Gbit/s, {}", described.network_gbps.value, described.network_gbps.source);
    tracing::info!("host fact: rdma {}, {}", described.rdma.value, described.rdma.source);
    args.address = Some(described.address.value.clone());
    args.network_gbps = Some(described.network_gbps.value);
    args.rdma = Some(described.rdma.value);
    described
}

/// What `--probe` prints.
#[derive(Debug, Serialize)]
pub struct ProbeReport {
    pub facts: NodeFacts,
    pub sample: Vec<GpuSample>,
}

pub fn probe_report(args: &AgentArgs, hostname: &str, source: &mut dyn GpuSource) -> anyhow::Result<ProbeReport> {
    let facts = node_facts(args, hostname, source)?;
    let sample = source.sample(sample_time());
    Ok(ProbeReport { facts, sample })
}

pub fn node_facts(args: &AgentArgs, hostname: &str, source: &mut dyn GpuSource) -> anyhow::Result<NodeFacts> {
    let gpus = source.host_gpus()?;
    Ok(NodeFacts {
        hostname: hostname.to_owned(),
        address: args.address.clone().unwrap_or_else(|| hostname.to_owned()),
        gpus: gpus.gpus,
        intra_link: gpus.intra_link,
        intra_link_gbps: None,
        topology: gpus.topology,
        driver_version: gpus.driver_version,
        cuda_version: gpus.cuda_version,
        network_gbps: args.network_gbps.unwrap_or(host::DEFAULT_NETWORK_GBPS),
        rdma: args.rdma.unwrap_or(false),
        echo_port: None,
        lease_subnet: None,
        launchers: Some(launchers::detect(args.container_runtime.program())),
    })
}

/// Sample timestamps at the database's precision (microseconds), so a resent sample is an exact duplicate.
pub fn sample_time() -> chrono::DateTime<Utc> {
    Utc::now().trunc_subsecs(6)
}

/// The machine's host name: /etc/hostname, the kernel's, `$HOSTNAME`, else `localhost`.
pub fn local_hostname() -> String {
    ["/etc/hostname", "/proc/sys/kernel/hostname"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .chain(std::env::var("HOSTNAME").ok())
        .map(|name| name.trim().to_owned())
        .find(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// HTTPS always; plain HTTP only to a server on this machine (loopback), or with `--insecure-http`.
fn check_server_url(server: &str, insecure_http: bool) -> anyhow::Result<()> {
    let url = reqwest::Url::parse(server).with_context(|| format!("--server `{server}` is not a URL"))?;
    match url.scheme() {
        "https" => Ok(()),
        "http" if insecure_http => {
            tracing::warn!(%server, "--insecure-http: join tokens, credentials and job specs cross the network in clear");
            Ok(())
        }
        "http" if is_loopback(&url) => Ok(()),
        "http" => anyhow::bail!(
            "--server `{server}`: plain http:// is accepted only on loopback; use https:// (with --ca-cert for a \
             private CA), or --insecure-http for development"
        ),
        other => anyhow::bail!("--server `{server}`: unsupported scheme `{other}`; expected https://"),
    }
}

fn is_loopback(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else { return false };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// `--join-token`, `GPUPLANE_JOIN_TOKEN`, or the first line of `--join-token-file`.
fn join_token(args: &AgentArgs) -> anyhow::Result<Option<String>> {
    let Some(path) = &args.join_token_file else { return Ok(args.join_token.clone()) };
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading --join-token-file {}", path.display()))?;
    let token = text.lines().next().unwrap_or_default().trim().to_owned();
    anyhow::ensure!(!token.is_empty(), "--join-token-file {} is empty", path.display());
    Ok(Some(token))
}

/// The state and jobs directories, the GPUs' device files, and whether this host can sandbox jobs (it tries
/// once, now, so a host that cannot says so at start-up and in every job it refuses).
fn job_host(
    args: &AgentArgs,
    hostname: &str,
    address: &str,
    source: &mut dyn GpuSource,
    volumes: volume_keeper::VolumeMounts,
) -> anyhow::Result<launch::JobHost> {
    use std::os::unix::fs::PermissionsExt;
    let state_dir = &args.state_dir;
    let jobs_dir = args.jobs_dir.clone().unwrap_or_else(|| {
        let mut name = state_dir.file_name().unwrap_or_default().to_os_string();
        name.push("-jobs");
        state_dir.with_file_name(name)
    });
    for (dir, flag) in [(state_dir, "--state-dir"), (&jobs_dir, "--jobs-dir")] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {flag} {}", dir.display()))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("making {flag} {} private", dir.display()))?;
    }
    let state_dir = state_dir.canonicalize()?;
    let jobs_dir = jobs_dir.canonicalize()?;
    anyhow::ensure!(
        !state_dir.starts_with(&jobs_dir) && !jobs_dir.starts_with(&state_dir),
        "--state-dir {} and --jobs-dir {} must not contain one another: jobs never see the agent's state",
        state_dir.display(),
        jobs_dir.display()
    );
    let model_cache = model_cache_dir(args, &state_dir, &jobs_dir)?;
    let devices = source.device_files()?;
    let mut network = None;
    let isolation = if args.insecure_unsandboxed_jobs {
        let warning = "--insecure-unsandboxed-jobs: jobs run WITHOUT the sandbox, as the agent's user, and can read \
                       its credential and use every GPU of this host; never use this on a host that serves tenants";
        eprintln!("gpuplane agent: WARNING: {warning}");
        tracing::warn!("{warning}");
        launch::Isolation::Unsandboxed
    } else {
        let hidden = vec![state_dir.clone(), jobs_dir.clone()];
        let sandbox = sandbox::Sandbox::discover(hidden, args.job_ro_bind.clone(), args.job_max_processes)
            .map(|sandbox| sandbox.with_model_cache(model_cache.clone()))
            .and_then(|sandbox| {
                sandbox.probe(&state_dir.join("sandbox-probe"), args.job_uids.first)?;
                Ok(sandbox)
            });
        let sandbox = sandbox.and_then(|sandbox| Ok((sandbox, lease_networks(args, hostname, address)?)));
        match sandbox {
            Ok((sandbox, lease_networks)) => {
                network = Some(lease_networks);
                launch::Isolation::Sandboxed(sandbox)
            }
            Err(err) => {
                let reason = format!("{err:#}");
                eprintln!("gpuplane agent: this host cannot sandbox jobs, so it will run none: {reason}");
                tracing::error!(%reason, "this host cannot sandbox jobs; every job without an image will fail");
                launch::Isolation::Unavailable(reason)
            }
        }
    };
    Ok(launch::JobHost {
        isolation,
        jobs_dir,
        state_dir,
        uids: args.job_uids,
        devices,
        runtime: args.container_runtime,
        max_processes: args.job_max_processes,
        env_ports: args.env_ports,
        serve_ports: args.serve_ports,
        sshd: args.sshd.clone(),
        network,
        volumes,
        model_cache,
    })
}

/// `--model-cache`, made absolute. It must be a directory that neither holds nor lies in the agent's state, the
/// leases' files or a volume store: every lease reads all of it. Said at start: jobs could not read it, or
/// transformers would find no `modules/__init__.py` (it cannot make it on a read-only mount), and what it holds.
fn model_cache_dir(
    args: &AgentArgs,
    state_dir: &std::path::Path,
    jobs_dir: &std::path::Path,
) -> anyhow::Result<Option<std::path::PathBuf>> {
    let Some(given) = &args.model_cache else { return Ok(None) };
    let dir = given.canonicalize().with_context(|| {
        format!(
            "--model-cache {}: fill it first (`gpuplane-agent model-cache fill --cache {0} ...`), and with the \
             systemd unit not under /home, /root or /tmp",
            given.display()
        )
    })?;
    anyhow::ensure!(dir.is_dir(), "--model-cache {} is not a directory", dir.display());
    // A container runtime's --volume takes SRC:DST:ro.
    anyhow::ensure!(!dir.to_string_lossy().contains(':'), "--model-cache {}: a path without `:`", dir.display());
    let stores =
        args.volume_store.iter().map(|s| (s.dir.canonicalize().unwrap_or_else(|_| s.dir.clone()), "--volume-store"));
    let others =
        [(state_dir.to_path_buf(), "--state-dir"), (jobs_dir.to_path_buf(), "--jobs-dir")].into_iter().chain(stores);
    for (other, flag) in others {
        anyhow::ensure!(
            !dir.starts_with(&other) && !other.starts_with(&dir),
            "--model-cache {} and {flag} {} must not contain one another: every lease reads the whole model cache",
            dir.display(),
            other.display()
        );
    }
    if let Some(why) = sandbox::unreadable_by_jobs(&dir) {
        eprintln!("gpuplane agent: WARNING: --model-cache {}: {why}", dir.display());
        tracing::warn!(path = %dir.display(), "--model-cache: {why}");
    }
    if !dir.join("modules").join("__init__.py").is_file() {
        let why = "modules/__init__.py is missing: transformers makes it before it loads a model's own code, and \
                   cannot on the read-only /models (`gpuplane-agent model-cache fill` makes it)";
        eprintln!("gpuplane agent: WARNING: --model-cache {}: {why}", dir.display());
        tracing::warn!(path = %dir.display(), "--model-cache: {why}");
    }
    let models = model_cache::cached_models(&dir).len();
    let mount = gpuplane_protocol::model_cache::MOUNT;
    tracing::info!(path = %dir.display(), models, "the model cache, read-only at {mount} in every lease");
    Ok(Some(dir))
}

/// This host's leases' networks: the subnet given or derived, the rules in place. Says what it chose.
fn lease_networks(args: &AgentArgs, hostname: &str, address: &str) -> anyhow::Result<lease_net::LeaseNetworks> {
    let subnet = match args.lease_subnet {
        Some(subnet) => subnet,
        None => {
            let (subnet, from_address) = lease_net::default_subnet(address, hostname);
            if !from_address {
                tracing::warn!(%subnet, "the lease subnet is host-local (the address is a name): give --lease-subnet for multi-node leases");
            }
            subnet
        }
    };
    let networks = lease_net::LeaseNetworks::start(
        subnet,
        &lease_net::tag(hostname),
        args.lease_egress,
        args.lease_egress_allow.clone(),
        &args.state_dir,
    )
    .context("setting up leases' networks")?;
    tracing::info!(%subnet, egress = ?args.lease_egress, allow = ?args.lease_egress_allow, "each lease gets a network namespace");
    Ok(networks)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use gpuplane_protocol::agent::IntraLink;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        agent: AgentArgs,
    }

    fn parse(argv: &[&str]) -> Result<AgentArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("agent").chain(argv.iter().copied())).map(|cli| cli.agent)
    }

    #[test]
    fn probe_with_simulated_h100s() {
        let args = parse(&["--probe", "--simulate", "h100:2", "--hostname", "gpu-node-07", "--rdma"]).unwrap();
        let mut source = open_gpu_source(&args, "gpu-node-07").unwrap();
        let report = probe_report(&args, "gpu-node-07", source.as_mut()).unwrap();
        assert_eq!(report.facts.gpus.len(), 2);
        assert!(report.facts.gpus.iter().all(|g| g.name == "NVIDIA H100 80GB HBM3"));
        assert_eq!(report.facts.address, "gpu-node-07");
        assert_eq!(report.facts.intra_link, IntraLink::Nvlink);
        assert_eq!((report.facts.network_gbps, report.facts.rdma), (100, true));
        assert_eq!(report.sample.len(), 2);
        assert_eq!(report.sample[1].gpu_index, 1);
        let json = serde_json::to_value(&report).unwrap();
        // The facts are exactly what registration sends: the protocol type reads them back.
        let facts: NodeFacts = serde_json::from_value(json["facts"].clone()).unwrap();
        assert_eq!(facts, report.facts);
        assert_eq!(json["sample"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn flags_are_validated_by_clap() {
        assert!(parse(&["--simulate", "h100:2"]).is_err(), "--server is required unless --probe");
        assert!(parse(&["--probe", "--inject-xid", "0:79"]).is_err(), "--inject-xid needs --simulate");
        let err = parse(&["--probe", "--simulate", "v100:2"]).err().unwrap().to_string();
        assert!(err.contains("unknown GPU model"), "{err}");
        let args = parse(&["--server", "http://s:8080", "--simulate", "a10:1", "--inject-xid", "0:79"]).unwrap();
        assert_eq!(args.inject_xid, Some(InjectXid { gpu_index: 0, code: 79 }));
        assert_eq!(args.max_buffered_samples, 100_000);
    }

    #[test]
    fn simulated_hosts_report_the_driver_and_cuda_versions_they_are_given() {
        let args = parse(&["--probe", "--simulate", "h100:1", "--driver-version", "470.57.02"]).unwrap();
        let mut source = open_gpu_source(&args, "old-host").unwrap();
        let facts = probe_report(&args, "old-host", source.as_mut()).unwrap().facts;
        assert_eq!((facts.driver_version.as_deref(), facts.cuda_version.as_deref()), (Some("470.57.02"), Some("12.4")));
        let err = parse(&["--probe", "--simulate", "h100:1", "--cuda-version", "twelve"]).err().unwrap().to_string();
        assert!(err.contains("dot-separated numbers"), "{err}");
        assert!(parse(&["--probe", "--driver-version", "470.57.02"]).is_err(), "simulation only");
        assert!(parse(&["--probe", "--simulate-echo-delay-ms", "25"]).is_err(), "simulation only");
    }

    #[test]
    fn plain_http_only_on_loopback_or_when_asked_for() {
        assert!(check_server_url("https://gpuplane.example.com", false).is_ok());
        for local in ["http://127.0.0.1:8080", "http://localhost:8080", "http://[::1]:8080", "http://127.8.0.1"] {
            assert!(check_server_url(local, false).is_ok(), "{local}");
        }
        let err = check_server_url("http://10.0.0.1:8080", false).unwrap_err().to_string();
        assert!(err.contains("only on loopback"), "{err}");
        assert!(check_server_url("http://10.0.0.1:8080", true).is_ok(), "--insecure-http");
        assert!(check_server_url("ftp://x", true).unwrap_err().to_string().contains("unsupported scheme"));
        assert!(check_server_url("not a url", false).is_err());
    }

    #[test]
    fn the_join_token_can_come_from_a_file() {
        let path = std::env::temp_dir().join(format!("gpuplane-join-{}", uuid::Uuid::new_v4()));
        std::fs::write(&path, "gpj_secret\n").unwrap();
        let args = parse(&["--server", "http://s", "--join-token-file", path.to_str().unwrap()]).unwrap();
        assert_eq!(join_token(&args).unwrap().as_deref(), Some("gpj_secret"));
        assert!(parse(&["--server", "http://s", "--join-token", "x", "--join-token-file", "/f"]).is_err());
        std::fs::write(&path, "\n").unwrap();
        assert!(join_token(&args).unwrap_err().to_string().contains("empty"));
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn sample_times_have_microsecond_precision() {
        assert_eq!(sample_time().timestamp_subsec_nanos() % 1000, 0);
    }
}
