//! Edge validation: turns the serde request types into the typed [`PlanInput`].
//!
//! Everything the search relies on (non-zero sizes, divisibility of the cluster, finite
//! positive bandwidths) is checked here, so the core never re-checks and never panics.

use super::catalog::{gpu_by_key, gpu_keys, preset, preset_names, unknown_name_message};
use super::types::{
    Cluster, ClusterFields, GpuSpec, HfConfig, InferenceSpec, ModelArch, ModelRef, MoeSpec, Pins, PlanError, PlanInput,
    PlanRequest, Precision, TrainSpec, Workload, WorkloadFields, WorkloadKind,
};

/// Upper bounds that reject absurd inputs (they are far beyond any real system).
const MAX_LAYERS: u32 = 4096;
const MAX_HIDDEN: u32 = 1 << 20;
const MAX_VOCAB: u32 = 1 << 24;
const MAX_SEQ: u32 = 1 << 24;
const MAX_BATCH: u32 = 1 << 24;
const MAX_GPUS: u32 = 1 << 20;
const MAX_GPUS_PER_NODE: u32 = 1024;
const MAX_TOP_N: u32 = 1000;
const MIN_RESOLUTION: u32 = 64;
const MAX_RESOLUTION: u32 = 16_384;
/// Generated tokens per request when neither `output_len` nor both lengths are given.
pub const DEFAULT_OUTPUT_LEN: u32 = 256;
/// The nominal concurrency of a serving spec whose concurrency is searched.
const NOMINAL_CONCURRENCY: u32 = 16;

fn in_range(field: &str, v: u32, lo: u32, hi: u32) -> Result<u32, PlanError> {
    if v < lo || v > hi {
        Err(PlanError::invalid(field, format!("must be between {lo} and {hi}, got {v}")))
    } else {
        Ok(v)
    }
}

fn positive_finite(field: &str, v: f64, hi: f64) -> Result<f64, PlanError> {
    if !v.is_finite() || v <= 0.0 || v > hi {
        Err(PlanError::invalid(field, format!("must be a finite number in (0, {hi}], got {v}")))
    } else {
        Ok(v)
    }
}

/// Validates an explicit architecture.
pub fn validate_arch(a: &ModelArch, field: &str) -> Result<(), PlanError> {
    if let Some(d) = a.diffusion {
        let f = |s: &str| format!("{field}.diffusion.{s}");
        if d.unet_params == 0 || d.unet_params > 10_000_000_000_000 {
            return Err(PlanError::invalid(&f("unet_params"), "out of range"));
        }
        if d.text_encoder_params > 10_000_000_000_000 {
            return Err(PlanError::invalid(&f("text_encoder_params"), "out of range"));
        }
        positive_finite(&f("tflops_per_step"), d.tflops_per_step, 1e6)?;
        in_range(&f("steps"), d.steps, 1, 10_000)?;
        if let Some(r) = d.resolution {
            in_range(&f("resolution"), r, MIN_RESOLUTION, MAX_RESOLUTION)?;
        }
        return Ok(());
    }
    let f = |s: &str| format!("{field}.{s}");
    in_range(&f("layers"), a.layers, 1, MAX_LAYERS)?;
    in_range(&f("hidden"), a.hidden, 1, MAX_HIDDEN)?;
    in_range(&f("heads"), a.heads, 1, a.hidden)?;
    match a.head_dim {
        Some(d) => {
            in_range(&f("head_dim"), d, 1, 4096)?;
        }
        None if !a.hidden.is_multiple_of(a.heads) => {
            return Err(PlanError::invalid(&f("heads"), "hidden must be divisible by heads (or give head_dim)"));
        }
        None => {}
    }
    in_range(&f("kv_heads"), a.kv_heads, 1, a.heads)?;
    if !a.heads.is_multiple_of(a.kv_heads) {
        return Err(PlanError::invalid(&f("kv_heads"), "heads must be divisible by kv_heads"));
    }
    in_range(&f("ffn"), a.ffn, 1, MAX_HIDDEN.saturating_mul(8))?;
    in_range(&f("vocab"), a.vocab, 1, MAX_VOCAB)?;
    if let Some(m) = a.moe {
        in_range(&f("moe.experts"), m.experts, 1, 1024)?;
        in_range(&f("moe.experts_per_token"), m.experts_per_token, 1, m.experts)?;
        in_range(&f("moe.shared_experts"), m.shared_experts, 0, 1024)?;
        in_range(&f("moe.dense_layers"), m.dense_layers, 0, a.layers.saturating_sub(1))?;
        if let Some(d) = m.dense_ffn {
            in_range(&f("moe.dense_ffn"), d, 1, MAX_HIDDEN.saturating_mul(8))?;
        }
        if let Some(cf) = m.capacity_factor {
            positive_finite(&f("moe.capacity_factor"), cf, 64.0)?;
        }
    }
    Ok(())
}

/// Resolves the model reference to a name and an architecture.
pub fn resolve_model(m: &ModelRef) -> Result<(String, ModelArch), PlanError> {
    let given =
        usize::from(m.preset.is_some()) + usize::from(m.architecture.is_some()) + usize::from(m.hf_config.is_some());
    if given > 1 {
        return Err(PlanError::invalid("model", "give one of preset, architecture and hf_config"));
    }
    if let Some(config) = &m.hf_config {
        return resolve_hf_config(config);
    }
    match (&m.preset, &m.architecture) {
        (Some(_), Some(_)) => Err(PlanError::invalid("model", "give either preset or architecture, not both")),
        (None, None) => Err(PlanError::invalid("model", "give a preset, an architecture or an hf_config")),
        (Some(name), None) => {
            let arch = preset(name).ok_or_else(|| {
                PlanError::invalid("model.preset", unknown_name_message("preset", name, preset_names()))
            })?;
            Ok((name.trim().to_ascii_lowercase(), arch))
        }
        (None, Some(a)) => {
            validate_arch(a, "model.architecture")?;
            Ok(("custom".to_string(), a.clone()))
        }
    }
}

/// The architecture of a Hugging Face `config.json` (its decoder fields; a multimodal config's
/// `text_config`), named `hf:<model_type>`. Errors name the config's own keys.
pub fn resolve_hf_config(top: &HfConfig) -> Result<(String, ModelArch), PlanError> {
    let (c, field) = match &top.text_config {
        Some(text) if top.num_hidden_layers.is_none() => (text.as_ref(), "model.hf_config.text_config"),
        _ => (top, "model.hf_config"),
    };
    let f = |key: &str| format!("{field}.{key}");
    let need = |key: &str, v: Option<u64>, hi: u32| -> Result<u32, PlanError> {
        match v {
            None => Err(PlanError::invalid(&f(key), "required (an integer of the checkpoint's config.json)")),
            Some(v) if v == 0 || v > u64::from(hi) => {
                Err(PlanError::invalid(&f(key), format!("must be between 1 and {hi}, got {v}")))
            }
            Some(v) => Ok(v as u32),
        }
    };
    let opt = |key: &str, v: Option<u64>, hi: u32| -> Result<Option<u32>, PlanError> {
        v.map(|v| need(key, Some(v), hi)).transpose()
    };
    let model_type = c.model_type.clone().or_else(|| top.model_type.clone());
    if let Some(t) = &model_type
        && (t.is_empty() || t.len() > 64 || !t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
    {
        return Err(PlanError::invalid(&f("model_type"), "must be 1-64 letters, digits, '_' or '-'"));
    }
    let layers = need("num_hidden_layers", c.num_hidden_layers, MAX_LAYERS)?;
    let hidden = need("hidden_size", c.hidden_size, MAX_HIDDEN)?;
    let heads = need("num_attention_heads", c.num_attention_heads, MAX_HIDDEN)?;
    let kv_heads = opt("num_key_value_heads", c.num_key_value_heads, MAX_HIDDEN)?.unwrap_or(heads);
    let dense_ffn = need("intermediate_size", c.intermediate_size, MAX_HIDDEN.saturating_mul(8))?;
    let vocab = need("vocab_size", c.vocab_size, MAX_VOCAB)?;
    let head_dim = opt("head_dim", c.head_dim, 4096)?;
    let experts = [
        ("num_local_experts", c.num_local_experts),
        ("num_experts", c.num_experts),
        ("n_routed_experts", c.n_routed_experts),
    ]
    .into_iter()
    .find_map(|(key, v)| v.filter(|&n| n > 1).map(|n| (key, n)));
    let mut ffn = dense_ffn;
    let moe = match experts {
        None => None,
        Some((key, n)) => {
            let experts = need(key, Some(n), 1024)?;
            let per_token = need("num_experts_per_tok", c.num_experts_per_tok, experts)?;
            ffn = opt("moe_intermediate_size", c.moe_intermediate_size, MAX_HIDDEN.saturating_mul(8))?
                .unwrap_or(dense_ffn);
            let shared = match (c.n_shared_experts, c.shared_expert_intermediate_size) {
                (Some(n), _) => n.min(1024) as u32,
                (None, Some(size)) => (size / u64::from(ffn.max(1))).min(1024) as u32,
                (None, None) => 0,
            };
            let dense_layers = c.first_k_dense_replace.unwrap_or(0).min(u64::from(layers.saturating_sub(1))) as u32;
            Some(MoeSpec {
                experts,
                experts_per_token: per_token,
                shared_experts: shared,
                dense_layers,
                dense_ffn: (dense_layers > 0).then_some(dense_ffn),
                capacity_factor: None,
            })
        }
    };
    let gemma = model_type.as_deref().is_some_and(|t| t.starts_with("gemma"));
    let arch = ModelArch {
        layers,
        hidden,
        heads,
        kv_heads,
        ffn,
        vocab,
        head_dim,
        moe,
        diffusion: None,
        tied_embeddings: c.tie_word_embeddings.or(top.tie_word_embeddings).unwrap_or(gemma),
        gated_mlp: model_type.as_deref().and_then(gated_mlp),
        model_type: model_type.clone(),
    };
    validate_arch(&arch, field)?;
    Ok((format!("hf:{}", model_type.as_deref().unwrap_or("unknown")), arch))
}

/// Whether a Hugging Face family's MLP is gated (3 matrices) or GPT's (2); None: not known here.
fn gated_mlp(model_type: &str) -> Option<bool> {
    const GATED: &[&str] = &[
        "llama",
        "mistral",
        "mixtral",
        "qwen2",
        "qwen2_moe",
        "qwen3",
        "qwen3_moe",
        "gemma",
        "gemma2",
        "gemma3_text",
        "phi3",
        "granite",
        "deepseek_v2",
        "deepseek_v3",
        "olmo2",
        "cohere",
    ];
    const PLAIN: &[&str] = &["gpt2", "gpt_neox", "opt", "gpt_bigcode", "gptj", "bloom", "falcon"];
    if GATED.contains(&model_type) {
        Some(true)
    } else if PLAIN.contains(&model_type) {
        Some(false)
    } else {
        None
    }
}

/// Validates a GPU spec (catalog entries always pass).
pub fn validate_gpu(g: &GpuSpec, field: &str) -> Result<(), PlanError> {
    let f = |s: &str| format!("{field}.{s}");
    if g.key.is_empty() {
        return Err(PlanError::invalid(&f("key"), "must not be empty"));
    }
    if g.memory_bytes == 0 || g.memory_bytes > 100_000_000_000_000 {
        return Err(PlanError::invalid(&f("memory_bytes"), "out of range"));
    }
    positive_finite(&f("mem_bandwidth_gb_s"), g.mem_bandwidth_gb_s, 1e6)?;
    positive_finite(&f("bf16_tflops"), g.bf16_tflops, 1e6)?;
    if let Some(x) = g.fp8_tflops {
        positive_finite(&f("fp8_tflops"), x, 1e6)?;
    }
    positive_finite(&f("link_gb_s"), g.link_gb_s, 1e6)?;
    Ok(())
}

/// Validates workload fields against the model and GPU.
pub fn resolve_workload(w: &WorkloadFields, arch: &ModelArch, gpu: &GpuSpec) -> Result<Workload, PlanError> {
    // Serving runs FP8 weights without FP8 tensor cores as weight-only FP8 (W8A16, vLLM's Marlin
    // kernels on A100); training has no such mode.
    if w.precision == Precision::Fp8 && gpu.fp8_tflops.is_none() && w.kind != WorkloadKind::Inference {
        return Err(PlanError::invalid("workload.precision", format!("{} has no FP8 tensor cores", gpu.name)));
    }
    if arch.diffusion.is_some() && w.kind != WorkloadKind::Inference {
        return Err(PlanError::invalid("workload.kind", "only inference is planned for diffusion models"));
    }
    let seq_len = in_range("workload.seq_len", w.seq_len.unwrap_or(4096), 1, MAX_SEQ)?;
    match w.kind {
        WorkloadKind::Train | WorkloadKind::Lora => {
            let global_batch = in_range("workload.global_batch", w.global_batch.unwrap_or(512), 1, MAX_BATCH)?;
            let lora_rank = in_range("workload.lora_rank", w.lora_rank.unwrap_or(16), 1, arch.hidden.max(1))?;
            let t = TrainSpec { seq_len, global_batch, precision: w.precision, lora_rank };
            Ok(if w.kind == WorkloadKind::Train { Workload::Train(t) } else { Workload::Lora(t) })
        }
        WorkloadKind::Inference => resolve_inference(w, arch, seq_len).map(Workload::Inference),
    }
}

/// The serving fields: lengths (each defaulted from the others), concurrency, latency bounds, KV
/// precision, and the diffusion knobs (refused for a language model, which has no images).
fn resolve_inference(w: &WorkloadFields, arch: &ModelArch, seq_len: u32) -> Result<InferenceSpec, PlanError> {
    let len = |field: &str, v: Option<u32>| v.map(|v| in_range(field, v, 1, MAX_SEQ)).transpose();
    let given_context = len("workload.context_len", w.context_len)?;
    let given_input = len("workload.input_len", w.input_len)?;
    let given_output = len("workload.output_len", w.output_len)?;
    let (input_len, output_len) = match (given_input, given_output) {
        (Some(i), Some(o)) => (i, o),
        (Some(i), None) => {
            let room = given_context.map_or(DEFAULT_OUTPUT_LEN, |c| c.saturating_sub(i));
            (i, DEFAULT_OUTPUT_LEN.min(room).max(1))
        }
        (None, given) => {
            let context = given_context.unwrap_or(seq_len);
            let o = given.unwrap_or(DEFAULT_OUTPUT_LEN.min(context / 2).max(1));
            if o >= context {
                return Err(PlanError::invalid(
                    "workload.output_len",
                    format!("{o} leaves no prompt in a context of {context} tokens; give input_len too"),
                ));
            }
            (context - o, o)
        }
    };
    let needed = input_len.saturating_add(output_len);
    let context_len = given_context.unwrap_or(needed);
    if needed > context_len {
        return Err(PlanError::invalid(
            "workload.input_len",
            format!("input_len + output_len ({needed}) exceeds context_len ({context_len})"),
        ));
    }
    in_range("workload.context_len", context_len, 1, MAX_SEQ)?;
    let bound =
        |field: &str, v: Option<f64>| v.map(|ms| positive_finite(field, ms, 1e7).map(|ms| ms / 1e3)).transpose();
    let diffusion = arch.diffusion.is_some();
    for (field, given) in [
        ("workload.steps", w.steps.is_some()),
        ("workload.resolution", w.resolution.is_some()),
        ("workload.image_batch", w.image_batch.is_some()),
    ] {
        if given && !diffusion {
            return Err(PlanError::invalid(field, "only for diffusion models"));
        }
    }
    let steps = w.steps.map(|s| in_range("workload.steps", s, 1, 10_000)).transpose()?;
    let resolution =
        w.resolution.map(|r| in_range("workload.resolution", r, MIN_RESOLUTION, MAX_RESOLUTION)).transpose()?;
    Ok(InferenceSpec {
        context_len,
        concurrent_seqs: in_range(
            "workload.concurrent_seqs",
            w.concurrent_seqs.unwrap_or(NOMINAL_CONCURRENCY),
            1,
            1_000_000,
        )?,
        fixed_concurrency: w.concurrent_seqs.is_some(),
        input_len,
        output_len,
        precision: w.precision,
        kv_precision: w.kv_cache_precision.unwrap_or(w.precision),
        ttft_s: bound("workload.ttft_ms", w.ttft_ms)?,
        tpot_s: bound("workload.tpot_ms", w.tpot_ms)?,
        steps,
        resolution,
        image_batch: in_range("workload.image_batch", w.image_batch.unwrap_or(1), 1, 1024)?,
    })
}

/// Validates a cluster made of `gpus` GPUs of `gpu`.
pub fn resolve_cluster(
    gpu: GpuSpec,
    gpus: u32,
    gpus_per_node: Option<u32>,
    inter_node_gbps: Option<f64>,
    rdma: Option<bool>,
    host_memory_gb: Option<f64>,
) -> Result<Cluster, PlanError> {
    let gpus = in_range("cluster.gpus", gpus, 1, MAX_GPUS)?;
    let gpn = in_range("cluster.gpus_per_node", gpus_per_node.unwrap_or(gpus.min(8)), 1, MAX_GPUS_PER_NODE)?;
    if gpus % gpn != 0 {
        return Err(PlanError::invalid(
            "cluster.gpus",
            format!("{gpus} GPUs is not a multiple of {gpn} GPUs per node"),
        ));
    }
    let nodes = gpus / gpn;
    let gbps = inter_node_gbps.unwrap_or(100.0);
    if !gbps.is_finite() || !(0.0..=1e7).contains(&gbps) {
        return Err(PlanError::invalid("cluster.inter_node_gbps", "out of range"));
    }
    if nodes > 1 && gbps <= 0.0 {
        return Err(PlanError::invalid("cluster.inter_node_gbps", "must be positive when there is more than one node"));
    }
    let host_memory_bytes = match host_memory_gb {
        Some(gb) => positive_finite("cluster.host_memory_gb", gb, 1e6)? * 1e9,
        None => Cluster::default_host_memory_bytes(&gpu, gpn),
    };
    Ok(Cluster { gpu, gpus_per_node: gpn, nodes, inter_node_gbps: gbps, rdma: rdma.unwrap_or(true), host_memory_bytes })
}

fn resolve_gpu(c: &ClusterFields) -> Result<GpuSpec, PlanError> {
    match (&c.gpu, &c.gpu_spec) {
        (Some(_), Some(_)) => Err(PlanError::invalid("cluster.gpu", "give either gpu or gpu_spec, not both")),
        (None, None) => Err(PlanError::invalid("cluster.gpu", "give a gpu key or a gpu_spec")),
        (Some(key), None) => gpu_by_key(key).ok_or_else(|| {
            let keys = gpu_keys();
            PlanError::invalid("cluster.gpu", unknown_name_message("GPU", key, keys.iter().map(String::as_str)))
        }),
        (None, Some(spec)) => {
            validate_gpu(spec, "cluster.gpu_spec")?;
            Ok(spec.clone())
        }
    }
}

/// Validates pins that are wrong whatever the cluster (zero values, ZeRO > 3).
pub fn validate_pins(p: &Pins) -> Result<(), PlanError> {
    let checks = [
        ("pins.tp", p.tp),
        ("pins.pp", p.pp),
        ("pins.dp", p.dp),
        ("pins.vp", p.vp),
        ("pins.micro_batch", p.micro_batch),
        ("pins.cp", p.cp),
        ("pins.ep", p.ep),
        ("pins.etp", p.etp),
    ];
    for (field, v) in checks {
        if v == Some(0) {
            return Err(PlanError::invalid(field, "must be at least 1"));
        }
    }
    if matches!(p.zero_stage, Some(z) if z > 3) {
        return Err(PlanError::invalid("pins.zero_stage", "must be 0, 1, 2 or 3"));
    }
    Ok(())
}

impl PlanRequest {
    /// Validates the request; errors name the offending field.
    pub fn resolve(&self) -> Result<PlanInput, PlanError> {
        let (model_name, model) = resolve_model(&self.model)?;
        let gpu = resolve_gpu(&self.cluster)?;
        let workload = resolve_workload(&self.workload, &model, &gpu)?;
        let cluster = resolve_cluster(
            gpu,
            self.cluster.gpus,
            self.cluster.gpus_per_node,
            self.cluster.inter_node_gbps,
            self.cluster.rdma,
            self.cluster.host_memory_gb,
        )?;
        validate_pins(&self.pins)?;
        let top_n = in_range("top_n", self.top_n.unwrap_or(10), 1, MAX_TOP_N)?;
        Ok(PlanInput { model_name, model, workload, cluster, pins: self.pins.clone(), top_n: top_n as usize })
    }
}
