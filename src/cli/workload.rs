//! The model and the workload as the commands take them (`plan`, `advise`), turned into the API's JSON so the
//! CLI and the API validate alike.

/// The model and the workload, as `plan` and `advise` both take them.
#[derive(Debug, clap::Args)]
pub struct WorkloadArgs {
    /// Model preset, case-insensitive, e.g. llama3-70b or mixtral-8x7b (see --list-models). Or give the
    /// architecture with --layers --hidden --heads --ffn --vocab.
    #[arg(long, value_name = "PRESET")]
    pub model: Option<String>,
    /// Architecture: transformer layers.
    #[arg(long, value_name = "N")]
    pub layers: Option<u32>,
    /// Architecture: hidden size (model dimension).
    #[arg(long, value_name = "N")]
    pub hidden: Option<u32>,
    /// Architecture: attention (query) heads.
    #[arg(long, value_name = "N")]
    pub heads: Option<u32>,
    /// Architecture: key/value heads (grouped-query attention) [default: --heads].
    #[arg(long, value_name = "N")]
    pub kv_heads: Option<u32>,
    /// Architecture: FFN intermediate size (per expert for MoE); 4 x hidden means a GPT MLP, anything else SwiGLU.
    #[arg(long, value_name = "N")]
    pub ffn: Option<u32>,
    /// Architecture: vocabulary size.
    #[arg(long, value_name = "N")]
    pub vocab: Option<u32>,
    /// Architecture, MoE: routed experts per layer (makes the model a mixture of experts).
    #[arg(long, value_name = "N")]
    pub experts: Option<u32>,
    /// Architecture, MoE: routed experts per token (top-k) [default: 2].
    #[arg(long, value_name = "K")]
    pub experts_per_token: Option<u32>,
    /// Architecture, MoE: shared experts every token also passes [default: 0].
    #[arg(long, value_name = "N")]
    pub shared_experts: Option<u32>,
    /// Architecture, MoE: leading layers with a dense FFN instead of experts [default: 0].
    #[arg(long, value_name = "N")]
    pub dense_layers: Option<u32>,
    /// Architecture, MoE: FFN size of those dense layers [default: --ffn].
    #[arg(long, value_name = "N")]
    pub dense_ffn: Option<u32>,
    /// Architecture, MoE: expert capacity factor (1.0 = balanced, dropless) [default: 1.0].
    #[arg(long, value_name = "X")]
    pub capacity_factor: Option<f64>,
    /// What the GPUs do: train (pre-training / full fine-tune), lora, or inference.
    #[arg(long, default_value = "train", value_name = "KIND")]
    pub workload: String,
    /// Compute precision: bf16, fp16 or fp8 (FP8 tensor cores: rtx4090, h100, h200, b200).
    #[arg(long, default_value = "bf16", value_name = "P")]
    pub precision: String,
    /// Training: tokens per sequence [default: 4096].
    #[arg(long, value_name = "TOKENS")]
    pub seq: Option<u32>,
    /// Training: sequences per optimizer step, whole cluster [default: 512]. Rounded to the nearest multiple
    /// of the data-parallel degree when it does not divide (the plan says so).
    #[arg(long, value_name = "SEQUENCES")]
    pub global_batch: Option<u32>,
    /// LoRA: adapter rank [default: 16].
    #[arg(long, value_name = "R")]
    pub lora_rank: Option<u32>,
    /// Inference: context tokens per sequence (prompt + generated) [default: --seq, else 4096].
    #[arg(long, value_name = "TOKENS")]
    pub context: Option<u32>,
    /// Inference: sequences in flight per model replica (their KV cache must fit) [default: 16].
    #[arg(long, value_name = "SEQUENCES")]
    pub concurrent: Option<u32>,
}

pub(crate) fn lower(s: &Option<String>) -> Option<String> {
    s.as_ref().map(|v| v.trim().to_ascii_lowercase().replace('-', "_"))
}

pub(crate) fn choice(flag: &str, given: &str, known: &[&str]) -> anyhow::Result<String> {
    let v = given.trim().to_ascii_lowercase();
    if known.contains(&v.as_str()) {
        return Ok(v);
    }
    anyhow::bail!("{}", crate::planner::unknown_name_message(&format!("{flag} value"), given, known.iter().copied()))
}

impl WorkloadArgs {
    /// The model and workload as the API's JSON takes them (`model`, `workload`), so the CLI and the API
    /// validate alike.
    pub fn to_json(&self) -> anyhow::Result<(serde_json::Value, serde_json::Value)> {
        let moe = match self.experts {
            Some(experts) => Some(serde_json::json!({
                "experts": experts, "experts_per_token": self.experts_per_token.unwrap_or(2),
                "shared_experts": self.shared_experts.unwrap_or(0), "dense_layers": self.dense_layers.unwrap_or(0),
                "dense_ffn": self.dense_ffn, "capacity_factor": self.capacity_factor })),
            None if self.experts_per_token.is_some()
                || self.shared_experts.is_some()
                || self.dense_layers.is_some()
                || self.dense_ffn.is_some()
                || self.capacity_factor.is_some() =>
            {
                anyhow::bail!("the MoE flags need --experts (routed experts per layer)")
            }
            None => None,
        };
        let architecture = match (self.layers, self.hidden, self.heads, self.ffn, self.vocab) {
            (Some(layers), Some(hidden), Some(heads), Some(ffn), Some(vocab)) => Some(serde_json::json!({
                "layers": layers, "hidden": hidden, "heads": heads, "kv_heads": self.kv_heads.unwrap_or(heads),
                "ffn": ffn, "vocab": vocab, "moe": moe })),
            (None, None, None, None, None) if moe.is_none() => None,
            _ => anyhow::bail!(
                "an explicit architecture needs --layers --hidden --heads --ffn --vocab (and optionally --kv-heads, --experts ...)"
            ),
        };
        let workload = choice("--workload", &self.workload, &["train", "lora", "inference"])?;
        let precision = choice("--precision", &self.precision, &["bf16", "fp16", "fp8"])?;
        Ok((
            serde_json::json!({ "preset": self.model, "architecture": architecture }),
            serde_json::json!({ "kind": workload, "precision": precision, "seq_len": self.seq,
                "global_batch": self.global_batch, "lora_rank": self.lora_rank, "context_len": self.context,
                "concurrent_seqs": self.concurrent }),
        ))
    }
}

/// The command-line flag that sets an API request field, so the CLI's errors name what its user typed:
/// `target.training_tokens` is `--tokens`. `None` for a field no flag sets.
pub fn flag_for(field: &str) -> Option<&'static str> {
    Some(match field {
        "model" | "model.preset" => "--model",
        "model.architecture.layers" => "--layers",
        "model.architecture.hidden" => "--hidden",
        "model.architecture.heads" => "--heads",
        "model.architecture.kv_heads" => "--kv-heads",
        "model.architecture.ffn" => "--ffn",
        "model.architecture.vocab" => "--vocab",
        "model.architecture.moe.experts" => "--experts",
        "model.architecture.moe.experts_per_token" => "--experts-per-token",
        "model.architecture.moe.shared_experts" => "--shared-experts",
        "model.architecture.moe.dense_layers" => "--dense-layers",
        "model.architecture.moe.dense_ffn" => "--dense-ffn",
        "model.architecture.moe.capacity_factor" => "--capacity-factor",
        "workload" | "workload.kind" => "--workload",
        "workload.precision" => "--precision",
        "workload.seq_len" => "--seq",
        "workload.global_batch" => "--global-batch",
        "workload.lora_rank" => "--lora-rank",
        "workload.context_len" => "--context",
        "workload.concurrent_seqs" => "--concurrent",
        "target.training_tokens" => "--tokens",
        "target.serving_tokens_per_s" => "--serving-tokens-per-s",
        "target.requests_per_s" => "--requests-per-s",
        "target.tokens_per_request" => "--tokens-per-request",
        "target.serving_hours" => "--serving-hours",
        "deadline_hours" => "--deadline-hours",
        "budget_minor" => "--budget-minor",
        "pools" => "--pool",
        "cluster.gpu" => "--gpu",
        "cluster.gpus" => "--gpus",
        "cluster.gpus_per_node" => "--gpus-per-node",
        "cluster.inter_node_gbps" => "--inter-node-gbps",
        "cluster.host_memory_gb" => "--host-memory-gb",
        "pins.tp" => "--tp",
        "pins.cp" => "--cp",
        "pins.ep" => "--ep",
        "pins.pp" => "--pp",
        "pins.dp" => "--dp",
        "pins.vp" => "--vp",
        "pins.micro_batch" => "--micro-batch",
        "pins.zero_stage" => "--zero",
        "pins.recompute" => "--recompute",
        "pins.sequence_parallel" => "--sequence-parallel",
        "pins.offload" => "--offload",
        "top_n" => "--top",
        _ => return None,
    })
}

/// A planner error as the command line says it: an invalid field named by its flag when one sets it.
pub fn cli_error(err: &crate::planner::PlanError) -> String {
    match err {
        crate::planner::PlanError::Invalid { field, message } => match flag_for(field) {
            Some(flag) => format!("invalid {flag}: {message}"),
            None => format!("invalid {field}: {message}"),
        },
        crate::planner::PlanError::Infeasible { reason, hints, .. } if !hints.is_empty() => {
            format!("{reason}\nhint: {}", hints.join("\nhint: "))
        }
        other => other.to_string(),
    }
}
