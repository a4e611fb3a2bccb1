//! Every agent flag has an environment fallback, the packaged environment file documents each one, and the
//! fallbacks reach what the agent reports (the binary run as systemd runs it: settings in its environment only).

use clap::{CommandFactory, Parser};

#[derive(Parser)]
#[command(name = "gpuplane-agent")]
struct Cli {
    #[command(flatten)]
    agent: gpuplane_agent::AgentArgs,
}

const AGENT_ENV: &str = include_str!("../../../deploy/systemd/agent.env");

fn env_names() -> Vec<(String, String)> {
    Cli::command()
        .get_arguments()
        .filter(|arg| !matches!(arg.get_id().as_str(), "help" | "version"))
        .map(|arg| {
            let env = arg.get_env().map(|env| env.to_string_lossy().into_owned());
            (arg.get_id().to_string(), env.unwrap_or_default())
        })
        .collect()
}

#[test]
fn every_flag_has_an_environment_fallback_documented_in_agent_env() {
    let names = env_names();
    assert!(names.len() > 25, "{names:?}");
    for (flag, env) in &names {
        assert!(env.starts_with("GPUPLANE_"), "--{flag} has no environment fallback");
        let documented = AGENT_ENV.lines().any(|line| {
            let line = line.trim_start_matches('#');
            line.starts_with(&format!("{env}=")) || line.starts_with(&format!("{env} "))
        });
        assert!(documented, "deploy/systemd/agent.env does not document {env} (--{flag})");
    }
}

#[test]
fn the_environment_describes_the_host() {
    let state = std::env::temp_dir().join(format!("gpuplane-agent-env-{}", std::process::id()));
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_gpuplane-agent"))
        .env_clear()
        .env("GPUPLANE_AGENT_PROBE", "true")
        .env("GPUPLANE_AGENT_SIMULATE", "h100:2")
        .env("GPUPLANE_AGENT_HOSTNAME", "gpu-node-42")
        .env("GPUPLANE_AGENT_ADDRESS", "10.1.2.42")
        .env("GPUPLANE_AGENT_NETWORK_GBPS", "400")
        .env("GPUPLANE_AGENT_RDMA", "yes")
        .env("GPUPLANE_AGENT_DRIVER_VERSION", "570.86.15")
        .env("GPUPLANE_AGENT_STATE_DIR", &state)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let facts = &report["facts"];
    assert_eq!(facts["hostname"], "gpu-node-42");
    assert_eq!(facts["address"], "10.1.2.42");
    assert_eq!(facts["network_gbps"], 400);
    assert_eq!(facts["rdma"], true);
    assert_eq!(facts["driver_version"], "570.86.15");
    assert_eq!(facts["gpus"].as_array().unwrap().len(), 2);
    // One line per fact, saying where it came from; plain text off a terminal (journald).
    for line in
        ["hostname gpu-node-42, given", "address 10.1.2.42, given", "network 400 Gbit/s, given", "rdma true, given"]
    {
        assert!(stderr.contains(&format!("host fact: {line}")), "{line} in {stderr}");
    }
    assert!(!stderr.contains('\u{1b}'), "ANSI escapes in logs to a pipe: {stderr:?}");

    // Not given, a simulated host says so, and --rdma=false from the environment is honoured.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_gpuplane-agent"))
        .env_clear()
        .args(["--probe", "--simulate", "a10:1", "--hostname", "sim-1"])
        .env("GPUPLANE_AGENT_RDMA", "false")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!((&report["facts"]["address"], &report["facts"]["rdma"]), (&"sim-1".into(), &false.into()));
    assert!(stderr.contains("host fact: address sim-1, default (simulated host)"), "{stderr}");
    assert!(stderr.contains("host fact: network 100 Gbit/s, default (simulated host)"), "{stderr}");
    let _ = std::fs::remove_dir_all(state);
}

#[test]
fn repeatable_flags_take_comma_separated_lists_and_rdma_takes_a_value() {
    let cli = Cli::try_parse_from(["a", "--probe", "--job-ro-bind", "/data,/models", "--rdma=false"]).unwrap();
    assert_eq!(cli.agent.job_ro_bind, vec![std::path::PathBuf::from("/data"), "/models".into()]);
    assert_eq!(cli.agent.rdma, Some(false));
    let cli = Cli::try_parse_from(["a", "--probe", "--rdma", "--network-gbps", "200"]).unwrap();
    assert_eq!((cli.agent.rdma, cli.agent.network_gbps), (Some(true), Some(200)));
    let cli = Cli::try_parse_from(["a", "--probe"]).unwrap();
    assert_eq!((cli.agent.rdma, cli.agent.network_gbps, cli.agent.address), (None, None, None), "left to detect");
    assert!(Cli::try_parse_from(["a", "--probe", "--network-gbps", "0"]).is_err());
}
