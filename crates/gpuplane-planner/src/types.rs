//! Public request and response types of the planner.
//!
//! The serde types (`PlanRequest`, `AdviceRequest`, ...) are what the HTTP API and the CLI
//! deserialize; [`PlanRequest::resolve`] validates them into the typed [`PlanInput`] that the
//! pure search functions take. JSON is snake_case; enums are lowercase strings.

use serde::{Deserialize, Serialize};

/// Mixture-of-experts layout of the FFN. Each expert is an FFN of `ffn` (the architecture's
/// field); shared experts run on every token.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MoeSpec {
    /// Routed experts per MoE layer.
    pub experts: u32,
    /// Routed experts each token is sent to (top-k).
    pub experts_per_token: u32,
    /// Shared experts every token also passes through (DeepSeek, Qwen-MoE); default 0.
    #[serde(default)]
    pub shared_experts: u32,
    /// The first `dense_layers` layers have a dense FFN of `dense_ffn` instead (DeepSeek-V3: 3);
    /// default 0.
    #[serde(default)]
    pub dense_layers: u32,
    /// FFN size of those dense layers (default: `ffn`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense_ffn: Option<u32>,
    /// Expert capacity factor: tokens an expert computes (and exchanges) relative to a perfectly
    /// balanced router, e.g. 1.25; default 1.0 (dropless with balanced routing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_factor: Option<f64>,
}

/// A diffusion model (e.g. Stable Diffusion XL): only inference is modelled, as data-parallel
/// replicas producing images.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffusionSpec {
    /// Denoiser (UNet / DiT) parameters.
    pub unet_params: u64,
    /// Text encoder (and VAE) parameters.
    pub text_encoder_params: u64,
    /// Approximate TFLOPs of one denoiser evaluation for one image at the native resolution.
    pub tflops_per_step: f64,
    /// Denoising steps per image (classifier-free guidance doubles the evaluations); a serving
    /// workload's `steps` overrides it.
    pub steps: u32,
    /// Side of the square image, pixels, that `tflops_per_step` is given for (default 1024).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<u32>,
}

/// A decoder-only transformer architecture (or a diffusion model, see `diffusion`).
///
/// Parameter count: see [`ModelArch::param_count`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelArch {
    pub layers: u32,
    pub hidden: u32,
    /// Query heads.
    pub heads: u32,
    /// Key/value heads (grouped-query attention); equal to `heads` for classic MHA.
    pub kv_heads: u32,
    /// FFN intermediate size. `ffn == 4 * hidden` means a GPT-style 2-matrix MLP, anything
    /// else a SwiGLU-style 3-matrix MLP.
    pub ffn: u32,
    pub vocab: u32,
    /// Dimension of one attention head (default `hidden / heads`; Qwen3 and GPT-OSS use 128 and
    /// 64 with other hidden sizes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_dim: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe: Option<MoeSpec>,
    /// Set for diffusion models; the transformer fields are then informational only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diffusion: Option<DiffusionSpec>,
    /// The LM head shares the input embedding's weights (`tie_word_embeddings`): one `V*h` matrix
    /// is counted, except where a pipeline puts the embedding and the head on different stages
    /// (each holds a copy). Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tied_embeddings: bool,
    /// The Hugging Face `model_type` (from a `config.json`), when known: which decoder family it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_type: Option<String>,
    /// A gated MLP (SwiGLU/GeGLU: gate, up and down, 3 matrices) or not (2 matrices). Default:
    /// gated unless `ffn == 4 * hidden` (GPT's MLP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gated_mlp: Option<bool>,
}

/// What the GPUs will do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadKind {
    /// Pre-training or full fine-tuning (mixed-precision Adam).
    Train,
    /// LoRA fine-tuning: frozen bf16 base, trainable low-rank adapters on q and v.
    Lora,
    /// Serving: prompts of `input_len` tokens answered with `output_len` generated tokens (or
    /// images, for a diffusion model), at the concurrency that gives the most throughput within the
    /// latency bounds.
    Inference,
}

/// Compute precision. FP8 uses the FP8 tensor peak for GEMMs; weights and optimizer states
/// stay as frameworks keep them (bf16 weights + fp32 master), so memory is the same as bf16.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    #[default]
    Bf16,
    Fp16,
    Fp8,
}

/// Activation recomputation policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Recompute {
    None,
    /// Recompute the attention core (Korthikanti et al.).
    Selective,
    /// Keep only each layer's input; recompute the whole forward in backward.
    Full,
}

impl Recompute {
    pub const ALL: [Recompute; 3] = [Recompute::None, Recompute::Selective, Recompute::Full];

    pub fn as_str(self) -> &'static str {
        match self {
            Recompute::None => "none",
            Recompute::Selective => "selective",
            Recompute::Full => "full",
        }
    }
}

/// GPU-to-GPU link inside a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LinkKind {
    Nvlink,
    Pcie,
}

/// One GPU model. Bandwidths in GB/s (decimal), throughput in dense TFLOP/s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    pub key: String,
    pub name: String,
    /// Memory as labelled, in bytes (decimal GB).
    pub memory_bytes: u64,
    /// HBM/GDDR bandwidth, GB/s.
    pub mem_bandwidth_gb_s: f64,
    /// Dense BF16/FP16 tensor TFLOP/s (FP32 accumulate).
    pub bf16_tflops: f64,
    /// Dense FP8 tensor TFLOP/s, if the GPU has FP8 tensor cores.
    #[serde(default)]
    pub fp8_tflops: Option<f64>,
    pub link: LinkKind,
    /// Intra-node GPU-GPU bandwidth, GB/s (NVLink total, or PCIe one direction).
    pub link_gb_s: f64,
}

/// Optional pins: a `Some` fixes that knob, `None` lets the search choose.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
#[serde(deny_unknown_fields)]
pub struct Pins {
    pub tp: Option<u32>,
    pub pp: Option<u32>,
    pub dp: Option<u32>,
    pub vp: Option<u32>,
    pub micro_batch: Option<u32>,
    /// ZeRO stage: 0 (none) to 3 (parameters sharded too).
    #[schema(minimum = 0, maximum = 3)]
    pub zero_stage: Option<u8>,
    pub recompute: Option<Recompute>,
    pub sequence_parallel: Option<bool>,
    /// Context-parallel degree (ring attention over the sequence).
    pub cp: Option<u32>,
    /// Expert-parallel degree (MoE models).
    pub ep: Option<u32>,
    /// Expert tensor-parallel degree (MoE models; Megatron's `--expert-tensor-parallel-size`):
    /// `tp` (Megatron's default: each expert split like the dense layers, EP carved out of the
    /// `dp * cp` ranks) or 1 (experts whole, EP carved out of the `tp * dp * cp` ranks).
    pub etp: Option<u32>,
    /// CPU offload (training): `none`, `optimizer` or `optimizer_and_params`.
    pub offload: Option<Offload>,
}

/// CPU offload of model states (DeepSpeed ZeRO-Offload / FSDP CPU offload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Offload {
    #[default]
    None,
    /// Optimizer states (fp32 master, Adam moments) and gradients live in host memory; the
    /// Adam step runs on the CPU (ZeRO-Offload, needs ZeRO >= 1).
    Optimizer,
    /// Also the bf16 parameters, streamed to the GPU layer by layer (ZeRO-3 only).
    OptimizerAndParams,
}

impl Offload {
    pub const ALL: [Offload; 3] = [Offload::None, Offload::Optimizer, Offload::OptimizerAndParams];

    pub fn as_str(self) -> &'static str {
        match self {
            Offload::None => "none",
            Offload::Optimizer => "optimizer",
            Offload::OptimizerAndParams => "optimizer_and_params",
        }
    }
}

/// How the layers are split over pipeline stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StageSplit {
    /// Every stage holds `layers / pp` layers (the embedding rides on the first, the LM head on
    /// the last).
    #[default]
    Even,
    /// The embedding and the loss count as one layer each (Megatron's
    /// `--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split`): the
    /// first and last stages hold one layer fewer.
    EmbeddingAndLoss,
    /// First and/or last stage hold fewer layers, set explicitly (Megatron's
    /// `--decoder-first-pipeline-num-layers` / `--decoder-last-pipeline-num-layers`).
    Uneven,
    /// Megatron's `--pipeline-model-parallel-layout`, for layer counts no split above expresses
    /// with virtual stages: the layers, the embedding and the loss (each counted as a layer) spread
    /// as evenly as possible over the `pp * vp` virtual stages; `layers_per_stage` gives each
    /// stage's layers, each stage's virtual stages holding its share, the larger ones first.
    Layout,
}

/// The model: exactly one of `preset`, `architecture` and `hf_config`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelRef {
    #[serde(default)]
    pub preset: Option<String>,
    #[serde(default)]
    pub architecture: Option<ModelArch>,
    /// A Hugging Face checkpoint's own `config.json`, so the plan is made for the model that will be
    /// loaded: the architecture is read from it (see [`HfConfig`]).
    #[serde(default)]
    pub hf_config: Option<HfConfig>,
}

/// The fields of a Hugging Face `config.json` the planner reads; the document's other fields are
/// ignored (it is the checkpoint's file, sent as it is). A multimodal config's `text_config` is read
/// when the top level has no decoder fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HfConfig {
    /// The family (`llama`, `qwen3`, `gemma2`, `mixtral`, ...).
    #[serde(default)]
    pub model_type: Option<String>,
    #[serde(default)]
    pub num_hidden_layers: Option<u64>,
    #[serde(default)]
    pub hidden_size: Option<u64>,
    #[serde(default)]
    pub num_attention_heads: Option<u64>,
    /// Default: `num_attention_heads`.
    #[serde(default)]
    pub num_key_value_heads: Option<u64>,
    #[serde(default)]
    pub intermediate_size: Option<u64>,
    #[serde(default)]
    pub vocab_size: Option<u64>,
    #[serde(default)]
    pub head_dim: Option<u64>,
    /// Default: true for the Gemma families, false otherwise (as their transformers configs).
    #[serde(default)]
    pub tie_word_embeddings: Option<bool>,
    /// Routed experts (Mixtral's name; Qwen-MoE's `num_experts`, DeepSeek's `n_routed_experts`).
    #[serde(default)]
    pub num_local_experts: Option<u64>,
    #[serde(default)]
    pub num_experts: Option<u64>,
    #[serde(default)]
    pub n_routed_experts: Option<u64>,
    #[serde(default)]
    pub num_experts_per_tok: Option<u64>,
    /// FFN size of one expert (default `intermediate_size`).
    #[serde(default)]
    pub moe_intermediate_size: Option<u64>,
    /// DeepSeek's shared experts.
    #[serde(default)]
    pub n_shared_experts: Option<u64>,
    /// Qwen-MoE's shared expert, as an FFN size.
    #[serde(default)]
    pub shared_expert_intermediate_size: Option<u64>,
    /// DeepSeek's first dense layers.
    #[serde(default)]
    pub first_k_dense_replace: Option<u64>,
    #[serde(default)]
    #[schema(no_recursion)]
    pub text_config: Option<Box<HfConfig>>,
}

/// Workload fields as the API/CLI send them; defaults are filled by `resolve`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkloadFields {
    pub kind: WorkloadKind,
    #[serde(default)]
    pub precision: Precision,
    /// Training sequence length (default 4096).
    #[serde(default)]
    pub seq_len: Option<u32>,
    /// Global batch in sequences (training; default 512 sequences).
    #[serde(default)]
    pub global_batch: Option<u32>,
    /// LoRA rank (default 16).
    #[serde(default)]
    pub lora_rank: Option<u32>,
    /// Inference: tokens of context per sequence, the most a sequence holds (default
    /// `input_len + output_len` when both are given, else `seq_len` or 4096).
    #[serde(default)]
    pub context_len: Option<u32>,
    /// Inference: sequences in flight per replica, fixed. Default: searched, the concurrency that
    /// gives the most generated tokens/s within `ttft_ms` and `tpot_ms`.
    #[serde(default)]
    pub concurrent_seqs: Option<u32>,
    /// Inference: prompt tokens per request (default `context_len - output_len`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_len: Option<u32>,
    /// Inference: generated tokens per request (default 256, at most half the context).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_len: Option<u32>,
    /// Inference: bound on the time to first token, milliseconds (default none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    /// Inference: bound on the time per output token, milliseconds (default none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
    /// Inference: precision of the KV cache (default: `precision`; `fp8` halves it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_precision: Option<Precision>,
    /// Diffusion inference: denoising steps per image (default: the model's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u32>,
    /// Diffusion inference: side of the square image, pixels (default: the model's native one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<u32>,
    /// Diffusion inference: images generated together on one GPU (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_batch: Option<u32>,
}

impl ModelRef {
    /// A model preset by name (see `catalog`).
    pub fn preset(name: &str) -> Self {
        ModelRef { preset: Some(name.to_string()), architecture: None, hf_config: None }
    }
}

impl WorkloadFields {
    /// A `kind` workload in BF16 at `seq_len` tokens and `global_batch` sequences; the rest as defaulted.
    pub fn bf16(kind: WorkloadKind, seq_len: u32, global_batch: u32) -> Self {
        WorkloadFields {
            kind,
            precision: Precision::Bf16,
            seq_len: Some(seq_len),
            global_batch: Some(global_batch),
            lora_rank: None,
            context_len: None,
            concurrent_seqs: None,
            input_len: None,
            output_len: None,
            ttft_ms: None,
            tpot_ms: None,
            kv_cache_precision: None,
            steps: None,
            resolution: None,
            image_batch: None,
        }
    }
}

impl ClusterFields {
    /// `gpus` catalog GPUs `gpu`, `gpus_per_node` to a node, nodes linked at `inter_node_gbps` with RDMA.
    pub fn catalog(gpu: &str, gpus: u32, gpus_per_node: u32, inter_node_gbps: f64) -> Self {
        ClusterFields {
            gpu: Some(gpu.to_string()),
            gpu_spec: None,
            gpus,
            gpus_per_node: Some(gpus_per_node),
            inter_node_gbps: Some(inter_node_gbps),
            rdma: Some(true),
            host_memory_gb: None,
        }
    }
}

/// Cluster fields: a catalog key (`gpu`) or a full `gpu_spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterFields {
    #[serde(default)]
    pub gpu: Option<String>,
    #[serde(default)]
    pub gpu_spec: Option<GpuSpec>,
    /// Total GPUs.
    pub gpus: u32,
    /// GPUs per node (default: min(gpus, 8)).
    #[serde(default)]
    pub gpus_per_node: Option<u32>,
    /// Inter-node bandwidth per node (all NICs together), Gbit/s. Default 100.
    #[serde(default)]
    pub inter_node_gbps: Option<f64>,
    /// RDMA (InfiniBand/RoCE) between nodes; otherwise TCP. Default true.
    #[serde(default)]
    pub rdma: Option<bool>,
    /// Host (CPU) memory per node, GB, for CPU offload. Default: twice the node's GPU memory,
    /// at least 64 GB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_memory_gb: Option<f64>,
}

/// A planning request as the HTTP API and CLI deserialize it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanRequest {
    pub model: ModelRef,
    pub workload: WorkloadFields,
    pub cluster: ClusterFields,
    #[serde(default)]
    pub pins: Pins,
    /// Plans to return (default 10, at most 1000).
    #[serde(default)]
    pub top_n: Option<u32>,
}

/// Validated training workload.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrainSpec {
    pub seq_len: u32,
    pub global_batch: u32,
    pub precision: Precision,
    /// LoRA rank; only used for `Workload::Lora`.
    pub lora_rank: u32,
}

/// Validated inference workload.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InferenceSpec {
    /// The most tokens a sequence holds (the KV cache reserved for it): at least
    /// `input_len + output_len`.
    pub context_len: u32,
    /// Sequences in flight per replica: the request's when `fixed_concurrency`, else 16, a
    /// nominal value (the search picks each plan's; see `Plan::micro_batch`).
    pub concurrent_seqs: u32,
    /// `concurrent_seqs` was given: plan at it rather than search.
    pub fixed_concurrency: bool,
    /// Prompt tokens per request.
    pub input_len: u32,
    /// Generated tokens per request.
    pub output_len: u32,
    pub precision: Precision,
    /// Precision of the KV cache.
    pub kv_precision: Precision,
    /// Bound on the time to first token, seconds.
    pub ttft_s: Option<f64>,
    /// Bound on the time per output token, seconds.
    pub tpot_s: Option<f64>,
    /// Diffusion: denoising steps per image (`None`: the model's).
    pub steps: Option<u32>,
    /// Diffusion: side of the square image, pixels (`None`: the model's native one).
    pub resolution: Option<u32>,
    /// Diffusion: images generated together on one GPU.
    pub image_batch: u32,
}

/// Serving figures of an LLM inference plan, per replica unless said otherwise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ServingMetrics {
    /// Sequences in flight per replica (also `micro_batch`).
    pub concurrency: u32,
    /// The concurrency was searched (the most throughput within the latency bounds), not given.
    pub concurrency_searched: bool,
    /// The most sequences whose KV cache fits per replica.
    pub max_concurrency: u32,
    pub input_len: u32,
    pub output_len: u32,
    /// Time to first token, seconds: the prompt's prefill, the decode steps it is interleaved
    /// with, and the wait behind other prompts.
    pub ttft_s: f64,
    /// Time per output token, seconds: one decode step of every sequence in flight plus the
    /// share of prompt prefill interleaved with it.
    pub tpot_s: f64,
    /// One decode step alone, seconds.
    pub decode_step_s: f64,
    /// Requests completed per second, whole cluster.
    pub requests_per_s: f64,
    pub kv_cache_precision: Precision,
    /// FP8 weights on a GPU without FP8 tensor cores: weights stored in 8 bits, computed in 16
    /// (weight-only FP8, W8A16, as vLLM's Marlin kernels serve it on A100).
    pub weight_only_fp8: bool,
}

/// Validated workload.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Workload {
    Train(TrainSpec),
    Lora(TrainSpec),
    Inference(InferenceSpec),
}

/// Validated cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    pub gpu: GpuSpec,
    pub gpus_per_node: u32,
    pub nodes: u32,
    /// Per node, all NICs together, Gbit/s.
    pub inter_node_gbps: f64,
    pub rdma: bool,
    /// Host memory per node, bytes.
    pub host_memory_bytes: f64,
}

impl Cluster {
    pub fn total_gpus(&self) -> u32 {
        self.gpus_per_node.saturating_mul(self.nodes)
    }

    /// The default host memory of a node of `gpus_per_node` x `gpu`: twice the GPU memory, at
    /// least 64 GB.
    pub fn default_host_memory_bytes(gpu: &GpuSpec, gpus_per_node: u32) -> f64 {
        (2.0 * gpu.memory_bytes as f64 * f64::from(gpus_per_node)).max(64e9)
    }
}

/// The typed, validated input of [`super::plan`].
#[derive(Debug, Clone, PartialEq)]
pub struct PlanInput {
    /// Display name (preset name or "custom").
    pub model_name: String,
    pub model: ModelArch,
    pub workload: Workload,
    pub cluster: Cluster,
    pub pins: Pins,
    pub top_n: usize,
}

/// Per-GPU memory, bytes, for the most loaded GPU of a plan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MemoryBreakdown {
    pub weights: u64,
    pub gradients: u64,
    pub optimizer: u64,
    pub activations: u64,
    /// Inference only.
    pub kv_cache: u64,
    pub comm_buffers: u64,
    pub fragmentation: u64,
    pub total: u64,
    /// Usable memory per GPU (label minus CUDA context).
    pub usable: u64,
}

/// One ranked plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Plan {
    pub workload: WorkloadKind,
    pub tp: u32,
    pub pp: u32,
    pub dp: u32,
    /// Context-parallel degree (ring attention; each GPU holds `seq_len / cp` tokens).
    #[serde(default = "one")]
    pub cp: u32,
    /// Expert-parallel degree (MoE: each GPU holds `experts / ep` experts; carved out of
    /// `dp * cp`, or of `tp * dp * cp` when `etp` is 1). 1 for dense models.
    #[serde(default = "one")]
    pub ep: u32,
    /// Expert tensor-parallel degree (Megatron's `--expert-tensor-parallel-size`) where it is not
    /// `tp`: 1 when the experts are kept whole and expert parallelism spans the tensor- and
    /// data-parallel ranks. Absent: `tp`, Megatron's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etp: Option<u32>,
    /// Transformer layers held by each pipeline stage, first to last (all virtual chunks of a
    /// stage together).
    #[serde(default)]
    pub layers_per_stage: Vec<u32>,
    /// How the layers are split over the stages.
    #[serde(default)]
    pub stage_split: StageSplit,
    /// CPU offload of model states.
    #[serde(default)]
    pub offload: Offload,
    /// Host memory per node the plan needs for offloaded states, bytes (0 without offload).
    #[serde(default)]
    pub host_memory_per_node_bytes: u64,
    /// Training: the global batch (sequences) this plan runs; differs from the request when the
    /// requested batch does not divide by the data-parallel degree (see `notes`).
    #[serde(default)]
    pub global_batch: u32,
    /// GPUs of the cluster the plan leaves idle (no split uses them all; see `notes`).
    #[serde(default)]
    pub idle_gpus: u32,
    /// Departures from the request and warnings (adjusted batch, idle GPUs, a slow step).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Virtual pipeline stages (interleaving chunks per GPU).
    pub vp: u32,
    pub micro_batch: u32,
    pub grad_accum: u32,
    pub zero_stage: u8,
    pub sequence_parallel: bool,
    pub recompute: Recompute,
    /// Inference: model replicas (`gpus / (tp * pp)`); training: equals `dp`.
    pub replicas: u32,
    pub memory_per_gpu_bytes: u64,
    pub memory: MemoryBreakdown,
    /// Training: one optimizer step. Inference: the time per output token (one decode step of all
    /// sequences in flight with its share of prompt prefill); diffusion: one batch of images.
    pub step_time_s: f64,
    /// Training tokens/s, or generated (decode) tokens/s for inference with the prompts' prefill
    /// charged, whole cluster.
    pub tokens_per_s: f64,
    /// Inference only: prompt (prefill) tokens/s of the whole cluster, compute-bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_tokens_per_s: Option<f64>,
    /// Diffusion inference only: images/s of the whole cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images_per_s: Option<f64>,
    /// LLM inference only: concurrency, latencies and requests/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<ServingMetrics>,
    /// Model FLOPs (no recomputation) per second per GPU, TFLOP/s.
    pub tflops_per_gpu: f64,
    /// Executed FLOPs (with recomputation) per second per GPU, TFLOP/s.
    pub hardware_tflops_per_gpu: f64,
    /// Model FLOPs utilisation against the peak of the precision used (FP8 peak for fp8).
    pub mfu: f64,
    pub bubble_fraction: f64,
    pub comm_fraction: f64,
    /// False for GPUs whose efficiency curve is not calibrated (RTX 4090, A10, custom).
    pub calibrated: bool,
    /// The plan in plain words, for someone who does not speak Megatron: what runs where, how long a step
    /// takes, how much memory it needs. `explanation` says the same in the planner's terms.
    #[serde(default)]
    pub summary: String,
    pub explanation: String,
}

/// A duration as people say it: `350 µs`, `836 ms`, `1.2 s`, `4.5 min`, `3.2 h`.
pub fn duration(seconds: f64) -> String {
    if seconds < 1e-3 {
        format!("{:.0} µs", seconds * 1e6)
    } else if seconds < 1.0 {
        format!("{:.0} ms", seconds * 1e3)
    } else if seconds < 120.0 {
        format!("{seconds:.1} s")
    } else if seconds < 7200.0 {
        format!("{:.1} min", seconds / 60.0)
    } else {
        format!("{:.1} h", seconds / 3600.0)
    }
}

fn one() -> u32 {
    1
}

/// "1 GPU", "8 GPUs": a count with its noun in the right number.
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Search result: best plan first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PlanResult {
    pub plans: Vec<Plan>,
    /// Configurations that satisfied the divisibility rules (including subtrees pruned by
    /// the memory lower bound).
    pub evaluated: u64,
    /// Configurations that fit in memory.
    pub feasible: u64,
}

/// The smallest cluster of the same GPU model with a feasible plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SmallestFit {
    pub gpu_count: u32,
    pub gpus_per_node: u32,
    pub nodes: u32,
}

/// Why no plan was produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PlanError {
    /// A request field is missing, malformed or out of range.
    Invalid { field: String, message: String },
    /// Valid, but nothing fits or divides.
    Infeasible {
        reason: String,
        /// Smallest per-GPU memory any configuration needs (0 when nothing divides).
        needed_bytes_min: u64,
        /// Usable memory per GPU.
        available_bytes: u64,
        smallest_fit: Option<SmallestFit>,
        /// Changes to defaulted request fields that would make it fit on this cluster, e.g.
        /// fewer concurrent sequences for serving.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        hints: Vec<String>,
    },
}

impl PlanError {
    pub(crate) fn invalid(field: &str, message: impl Into<String>) -> Self {
        PlanError::Invalid { field: field.to_string(), message: message.into() }
    }
}

impl std::fmt::Display for PlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlanError::Invalid { field, message } => write!(f, "invalid {field}: {message}"),
            PlanError::Infeasible { reason, .. } => f.write_str(reason),
        }
    }
}

impl std::error::Error for PlanError {}

/// A pool of rentable GPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PoolOffer {
    pub pool_id: String,
    pub gpu: GpuSpec,
    /// Price per GPU-hour in integer minor units (e.g. cents).
    pub price_per_gpu_hour_minor: i64,
    pub currency: String,
    pub free_gpus: u32,
    pub gpus_per_node: u32,
    /// Inter-node bandwidth per node, Gbit/s.
    pub inter_node_gbps: f64,
    pub rdma: bool,
}

/// What has to be done: training tokens, or a serving load.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
#[serde(deny_unknown_fields)]
pub struct AdviceTarget {
    /// Train/LoRA: total tokens to process.
    pub training_tokens: Option<u64>,
    /// Inference: generated tokens/s to sustain (or use `requests_per_s`).
    pub serving_tokens_per_s: Option<f64>,
    /// Inference: requests/s to sustain, each generating `tokens_per_request` tokens.
    pub requests_per_s: Option<f64>,
    /// Default 256.
    pub tokens_per_request: Option<u32>,
    /// Inference: hours the serving runs, for the cost (default 1).
    pub serving_hours: Option<f64>,
}

/// An advice request: which pool to rent for this job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AdviceRequest {
    pub model: ModelRef,
    pub workload: WorkloadFields,
    pub target: AdviceTarget,
    #[serde(default)]
    pub deadline_hours: Option<f64>,
    /// Budget in integer minor units of the pools' currency.
    #[serde(default)]
    pub budget_minor: Option<i64>,
    pub pools: Vec<PoolOffer>,
}

/// One option on the cost/time frontier: a pool, a GPU count, its best plan, hours and cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AdviceOption {
    pub pool_id: String,
    pub gpu_key: String,
    pub gpu_count: u32,
    pub gpus_per_node: u32,
    pub nodes: u32,
    pub plan: Plan,
    /// Hours to process the training tokens, or the serving hours.
    pub hours: f64,
    /// `ceil(gpu_count * hours * price_per_gpu_hour_minor)`.
    pub cost_minor: i64,
    pub currency: String,
    pub meets_deadline: bool,
    pub meets_budget: bool,
    /// Inference: whether the throughput sustains the load (always true for training).
    pub meets_load: bool,
    /// The least `cost_minor` of the options shown in this currency (one per currency).
    pub cheapest: bool,
    /// The least `hours` (training) or the most throughput (inference) of all options shown
    /// (exactly one).
    pub fastest: bool,
}

/// A pool with no option shown, and why: nothing of it fits, its GPUs cannot run the precision,
/// or every option of it is beaten on the cost/time frontier (the reason names the option that
/// beats it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SkippedPool {
    pub pool_id: String,
    pub reason: String,
}

/// Advice across pools: the cost/time frontier of every pool and GPU count. An option is left
/// out when another is at least as fast and costs no more, or no more than `cost_tie_bps` more
/// (a tie goes to the faster). Options meeting every constraint (deadline, budget, load) come
/// first, then the rest; each part cheapest, so slowest, first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AdviceResult {
    pub options: Vec<AdviceOption>,
    pub skipped: Vec<SkippedPool>,
    /// The cost tolerance of a tie, in basis points of the smaller cost (100 = 1%): of two
    /// options whose costs differ by no more, only the faster is shown.
    pub cost_tie_bps: u32,
    /// Training and LoRA: two pools of one currency used together by one plan over unlike GPUs,
    /// each mix shown only when it is cheaper or faster than every single-pool option of its
    /// currency (and not beaten by another mix shown); empty when no mix is. Apart from
    /// `options`, which stay single-pool, so that a client reading them is unaffected.
    #[serde(default)]
    pub mixes: Vec<AdviceMix>,
}

/// One pool's share of an [`AdviceMix`]: the whole nodes rented there and what they cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AdviceMixPart {
    pub pool_id: String,
    pub gpu_key: String,
    /// GPUs rented in this pool: the plan's `gpus_used` of this part (a part's idle GPUs are not
    /// rented, nor priced).
    pub gpu_count: u32,
    pub gpus_per_node: u32,
    /// Whole nodes of `gpus_per_node` offered to the plan (the pool's free GPUs, rounded down).
    pub nodes: u32,
    pub price_per_gpu_hour_minor: i64,
    /// `ceil(gpu_count * hours * price_per_gpu_hour_minor)`, the single-pool options' rule, per
    /// part: each pool bills its own GPUs.
    pub cost_minor: i64,
}

/// A training plan over two pools of one currency at once (see [`MixedPlan`]), priced per pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AdviceMix {
    /// The pools, in the order of the plan's parts: `plan.parts[i]` and `plan.stages[..].part == i`
    /// are about `parts[i]`.
    pub parts: Vec<AdviceMixPart>,
    /// The best plan over the two pools' free whole nodes (it uses both).
    pub plan: MixedPlan,
    /// Hours to process the training tokens at the plan's tokens/s.
    pub hours: f64,
    /// The sum of the parts' `cost_minor`.
    pub cost_minor: i64,
    pub currency: String,
    pub meets_deadline: bool,
    pub meets_budget: bool,
    /// Costs less than every single-pool option of its currency (every pool and GPU count
    /// tried, not only those shown).
    pub cheaper: bool,
    /// Takes fewer hours than every single-pool option of its currency.
    pub faster: bool,
}

/// One pipeline stage of a mixed plan (every replica has the same stages).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MixedStage {
    /// Index of the part in the request.
    pub part: u32,
    /// Catalog key of the part's GPU.
    pub gpu_key: String,
    /// TP degree of the stage (inside one node of the part).
    pub tp: u32,
    /// Transformer layers the stage holds.
    pub layers: u32,
    /// Memory of one GPU of the stage.
    pub memory: MemoryBreakdown,
    /// Forward and backward of one micro-batch on this stage, seconds (with the LM head on the
    /// last stage).
    pub time_per_micro_batch_s: f64,
}

/// What a mixed plan does with one part of the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MixedPartUse {
    /// Index of the part in the request.
    pub part: u32,
    pub gpu_key: String,
    pub gpu_name: String,
    /// GPUs of the part.
    pub gpus: u32,
    /// GPUs of the part the plan runs on (over all replicas).
    pub gpus_used: u32,
    /// GPUs of the part the plan leaves idle (all of them when the part is not used).
    pub idle_gpus: u32,
    /// TP degree of the part's stages (0 when the part is not used).
    pub tp: u32,
    /// Pipeline stages the part holds in each replica.
    pub stages_per_replica: u32,
    /// Layers the part holds in each replica.
    pub layers_per_replica: u32,
    /// Largest memory of any of the part's GPUs, bytes (0 when unused).
    pub memory_per_gpu_bytes: u64,
    /// Usable memory per GPU of the part, bytes.
    pub usable_bytes: u64,
    /// The busiest of the part's stages, as a fraction of the slowest stage's time per
    /// micro-batch (1.0: this part sets the pipeline's pace; 0 when unused).
    pub busy_fraction: f64,
}

/// One ranked plan over a mixed cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MixedPlan {
    /// Train or LoRA.
    pub workload: WorkloadKind,
    /// Identical replicas (data-parallel degree).
    pub dp: u32,
    /// Pipeline stages per replica, over all parts.
    pub pp: u32,
    pub micro_batch: u32,
    /// Micro-batches per replica per step.
    pub grad_accum: u32,
    /// Sequences per step (the request's, or the nearest multiple of `dp` when it does not
    /// divide; said in `notes`).
    pub global_batch: u32,
    /// 1 (distributed optimizer) whenever `dp > 1` in a mix; a single part's own choice otherwise.
    pub zero_stage: u8,
    /// Sequence parallelism; in a mix, on in every stage whose TP degree is above 1.
    pub sequence_parallel: bool,
    pub recompute: Recompute,
    /// The stages of one replica, first to last.
    pub stages: Vec<MixedStage>,
    /// Every part of the request, in request order.
    pub parts: Vec<MixedPartUse>,
    /// Number of parts the plan uses.
    pub parts_used: u32,
    /// Predicted time of one optimizer step, seconds.
    pub step_time_s: f64,
    /// Predicted training tokens per second, all replicas together.
    pub tokens_per_s: f64,
    /// Pipeline fill and drain, fraction of the step.
    pub bubble_fraction: f64,
    /// Exposed pipeline p2p, seconds per step.
    pub pp_comm_s: f64,
    /// Exposed data-parallel reduction plus optimizer update of the slowest stage, seconds.
    pub dp_and_optimizer_s: f64,
    /// Largest memory of any GPU, bytes.
    pub memory_per_gpu_bytes: u64,
    /// False when any part used has an uncalibrated GPU.
    pub calibrated: bool,
    /// When the plan runs on one part alone: that part's plan as the homogeneous planner gives
    /// it (CP, EP, virtual stages, offload and its own notes are there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub single_part: Option<Plan>,
    /// Departures from the request, unused parts, memory headroom, calibration, runtime needs.
    pub notes: Vec<String>,
    /// The plan in words, per part.
    pub explanation: String,
}

/// Mixed search result: best plan first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MixedPlanResult {
    pub plans: Vec<MixedPlan>,
    /// Configurations considered (the single-part searches included).
    pub evaluated: u64,
    /// Configurations costed in full that fit in memory (a mix whose upper bound on tokens/s
    /// cannot beat the plans kept is not costed in full).
    pub feasible: u64,
}
