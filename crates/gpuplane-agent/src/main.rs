//! `gpuplane-agent`: the node agent's binary (see the library's documentation).

use clap::Parser;

/// The gpuplane node agent: registers this GPU host with the control plane, heartbeats its GPUs' telemetry and
/// runs tenants' jobs sandboxed.
#[derive(Parser)]
#[command(name = "gpuplane-agent", version)]
struct Cli {
    #[command(flatten)]
    agent: gpuplane_agent::AgentArgs,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match gpuplane_agent::run(Cli::parse().agent).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("gpuplane-agent: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
