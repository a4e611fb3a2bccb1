//! `gpuplane agent` flags, and the parsers that validate them at the edge.

use std::fmt;
use std::path::PathBuf;

use clap::Args;

use super::simulated::{MODELS, SimModel};

/// Run the node agent on a GPU host (or `--probe` to print what it would report).
#[derive(Debug, Clone, Args)]
pub struct AgentArgs {
    /// Base URL of the gpuplane service, e.g. http://10.0.0.1:8080. Required unless --probe.
    #[arg(long, env = "GPUPLANE_SERVER", required_unless_present = "probe")]
    pub server: Option<String>,
    /// Join token minted by an operator for the pool this node joins. Optional when a saved credential exists.
    #[arg(long, env = "GPUPLANE_JOIN_TOKEN", hide_env_values = true)]
    pub join_token: Option<String>,
    /// Where the agent keeps its credential between restarts.
    #[arg(long, env = "GPUPLANE_AGENT_STATE_DIR", default_value = "/var/lib/gpuplane-agent")]
    pub state_dir: PathBuf,
    /// Simulated GPUs instead of NVML, as MODEL:COUNT, e.g. h100:8 (models: rtx4090, a10, a100-40g, a100-80g,
    /// h100, h200, b200).
    #[arg(long, value_name = "MODEL:COUNT", value_parser = SimulateSpec::parse)]
    pub simulate: Option<SimulateSpec>,
    /// Host name to register as (default: the machine's host name).
    #[arg(long)]
    pub hostname: Option<String>,
    /// Address other nodes and tenants reach this host at (default: the host name).
    #[arg(long)]
    pub address: Option<String>,
    /// Inter-node network bandwidth, Gbit/s.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(i32).range(1..))]
    pub network_gbps: i32,
    /// The inter-node network supports RDMA (InfiniBand/RoCE).
    #[arg(long)]
    pub rdma: bool,
    /// Print the host facts and one telemetry sample as JSON, then exit.
    #[arg(long)]
    pub probe: bool,
    /// Simulation only: report XID CODE on GPU GPU_INDEX once, in the second sampling round.
    #[arg(long, value_name = "GPU_INDEX:CODE", value_parser = InjectXid::parse, requires = "simulate")]
    pub inject_xid: Option<InjectXid>,
    /// Samples kept while the service is unreachable; beyond it the oldest are dropped.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_buffered_samples: u32,
}

/// `--simulate MODEL:COUNT`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimulateSpec {
    pub model: &'static SimModel,
    pub count: u32,
}

impl SimulateSpec {
    pub const MAX_GPUS: u32 = 64;

    pub fn parse(text: &str) -> Result<Self, String> {
        let (model, count) =
            text.split_once(':').ok_or_else(|| format!("expected MODEL:COUNT, e.g. h100:8, got `{text}`"))?;
        let model = MODELS.iter().find(|m| m.key.eq_ignore_ascii_case(model.trim())).ok_or_else(|| {
            let keys: Vec<&str> = MODELS.iter().map(|m| m.key).collect();
            format!("unknown GPU model `{model}`; expected one of {}", keys.join(", "))
        })?;
        let count: u32 = count
            .trim()
            .parse()
            .map_err(|_| format!("COUNT must be a whole number from 1 to {}, got `{count}`", Self::MAX_GPUS))?;
        if !(1..=Self::MAX_GPUS).contains(&count) {
            return Err(format!("COUNT must be from 1 to {}, got {count}", Self::MAX_GPUS));
        }
        Ok(Self { model, count })
    }
}

impl fmt::Display for SimulateSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.model.key, self.count)
    }
}

/// `--inject-xid GPU_INDEX:CODE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InjectXid {
    pub gpu_index: u32,
    pub code: i32,
}

impl InjectXid {
    pub fn parse(text: &str) -> Result<Self, String> {
        let (index, code) =
            text.split_once(':').ok_or_else(|| format!("expected GPU_INDEX:CODE, e.g. 0:79, got `{text}`"))?;
        let gpu_index: u32 =
            index.trim().parse().map_err(|_| format!("GPU_INDEX must be a whole number from 0, got `{index}`"))?;
        let code: i32 = code.trim().parse().map_err(|_| format!("CODE must be a positive XID number, got `{code}`"))?;
        if code <= 0 {
            return Err(format!("CODE must be a positive XID number, got {code}"));
        }
        Ok(Self { gpu_index, code })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulate_spec_parses_model_and_count() {
        let spec = SimulateSpec::parse("h100:2").unwrap();
        assert_eq!(spec.model.key, "h100");
        assert_eq!(spec.count, 2);
        assert_eq!(SimulateSpec::parse("A100-80G:64").unwrap().model.key, "a100-80g");
        assert_eq!(spec.to_string(), "h100:2");
    }

    #[test]
    fn simulate_spec_errors_are_clear() {
        assert!(SimulateSpec::parse("h100").unwrap_err().contains("expected MODEL:COUNT"));
        let unknown = SimulateSpec::parse("v100:8").unwrap_err();
        assert!(unknown.contains("unknown GPU model `v100`") && unknown.contains("rtx4090"), "{unknown}");
        assert!(SimulateSpec::parse("h100:0").unwrap_err().contains("from 1 to 64"));
        assert!(SimulateSpec::parse("h100:65").unwrap_err().contains("from 1 to 64"));
        assert!(SimulateSpec::parse("h100:eight").unwrap_err().contains("whole number"));
    }

    #[test]
    fn inject_xid_parses_and_rejects_garbage() {
        assert_eq!(InjectXid::parse("1:79").unwrap(), InjectXid { gpu_index: 1, code: 79 });
        assert!(InjectXid::parse("79").unwrap_err().contains("GPU_INDEX:CODE"));
        assert!(InjectXid::parse("-1:79").unwrap_err().contains("GPU_INDEX"));
        assert!(InjectXid::parse("0:0").unwrap_err().contains("positive"));
        assert!(InjectXid::parse("0:x").unwrap_err().contains("CODE"));
    }
}
