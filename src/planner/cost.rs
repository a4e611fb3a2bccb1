//! The analytical cost model: hardware efficiency, communication bandwidths, and the memory
//! and step-time of one training configuration.
//!
//! Step time of a configuration (per optimizer step):
//!
//! ```text
//! T      = compute + exposed TP comm            (one micro-batch, fwd+bwd, one pipeline stage)
//! step   = m*T + (p-1)/v*T (bubble) + PP p2p + exposed DP comm + optimizer update
//! compute = GEMM flops / (peak_prec * gemm_eff * shape)        (weights, LM head)
//!         + attention-core flops / (peak_bf16 * attn_eff)       (FlashAttention runs in bf16)
//!         + elementwise bytes / (HBM bandwidth * 0.8)           (norms, activations, residuals)
//! shape  = (h/t) / (h/t + 128) * (b*s) / (b*s + 128)            (small GEMMs run slower)
//! ```
//!
//! The per-GPU efficiencies are calibrated against the published NeMo (FP8, H100/B200) and
//! Megatron-LM (BF16, A100) runs; see `CALIBRATION.md` and the `calibration` tests.

use super::types::{Cluster, GpuSpec, LinkKind, MemoryBreakdown, ModelArch, Precision, Recompute};

/// CUDA context and allocator reserve subtracted from the labelled memory.
pub const CUDA_CONTEXT_BYTES: f64 = 1.5e9;
/// Fragmentation margin, fraction of everything allocated.
pub const FRAGMENTATION: f64 = 0.05;
/// Elementwise HBM traffic per token per layer, in multiples of `h` bytes (fwd+bwd).
const ELEMENTWISE_BYTES_PER_H: f64 = 160.0;
const SHAPE_HIDDEN: f64 = 128.0;
const SHAPE_TOKENS: f64 = 128.0;
/// Fraction of TP collective time not hidden behind compute.
const TP_EXPOSED: f64 = 0.5;
const TP_EXPOSED_SP: f64 = 0.35;
/// DDP bucketed gradient reduction overlaps this fraction of the backward window.
const DP_OVERLAP: f64 = 0.7;
const ZERO3_OVERLAP: f64 = 0.5;
const ZERO3_OVERLAP_PP: f64 = 0.3;

/// Efficiency profile of a GPU model.
#[derive(Debug, Clone, Copy)]
pub struct Profile {
    /// Large-GEMM efficiency at the BF16 peak.
    pub gemm_bf16: f64,
    /// Large-GEMM efficiency at the FP8 peak.
    pub gemm_fp8: f64,
    /// FlashAttention efficiency at the BF16 peak.
    pub attn: f64,
    /// False: no published run to calibrate against; numbers are conservative guesses.
    pub calibrated: bool,
}

/// Efficiency profile by catalog key; unknown GPUs get a conservative uncalibrated one.
pub fn profile(gpu: &GpuSpec) -> Profile {
    let (gemm_bf16, gemm_fp8, attn, calibrated) = match gpu.key.as_str() {
        "a100-40g" | "a100-80g" => (0.64, 0.0, 0.40, true),
        "h100" | "h200" => (0.72, 0.58, 0.45, true),
        "b200" => (0.70, 0.55, 0.45, true),
        "rtx4090" => (0.55, 0.45, 0.35, false),
        "a10" => (0.50, 0.0, 0.30, false),
        _ => (0.55, 0.45, 0.35, false),
    };
    Profile { gemm_bf16, gemm_fp8, attn, calibrated }
}

/// Effective bandwidths (bytes/s) and latencies (s) of a cluster.
#[derive(Debug, Clone, Copy)]
pub struct Net {
    /// Intra-node collective bus bandwidth per GPU.
    pub intra_bw: f64,
    pub intra_lat: f64,
    /// Inter-node bandwidth of a whole node (all NICs).
    pub node_bw: f64,
    pub inter_lat: f64,
    pub gpus_per_node: u32,
}

impl Net {
    pub fn new(c: &Cluster) -> Self {
        let (eff, lat) = match c.gpu.link {
            // NCCL bus bandwidth reaches ~40% of the bidirectional NVLink figure.
            LinkKind::Nvlink => (0.4, 10e-6),
            // PCIe without P2P bounces through host memory.
            LinkKind::Pcie => (0.35, 30e-6),
        };
        let (net_eff, inter_lat) = if c.rdma { (0.8, 30e-6) } else { (0.5, 100e-6) };
        Net {
            intra_bw: c.gpu.link_gb_s * 1e9 * eff,
            intra_lat: lat,
            node_bw: (c.inter_node_gbps / 8.0 * 1e9 * net_eff).max(1.0),
            inter_lat,
            gpus_per_node: c.gpus_per_node,
        }
    }

    /// Bandwidth and latency for a group of `size` GPUs spaced `stride` apart, when
    /// `stride.min(gpus_per_node)` such groups share each node's NICs.
    pub fn group(&self, size: u32, stride: u32) -> (f64, f64) {
        let span = u64::from(size) * u64::from(stride);
        if span <= u64::from(self.gpus_per_node) {
            (self.intra_bw, self.intra_lat)
        } else {
            let sharing = f64::from(stride.min(self.gpus_per_node).max(1));
            ((self.node_bw / sharing).min(self.intra_bw), self.inter_lat)
        }
    }

    /// Tensor-parallel group of `tp` adjacent GPUs: crossing nodes costs the node network
    /// shared by every GPU, halved again for the latency-bound small messages.
    pub fn tp(&self, tp: u32) -> (f64, f64) {
        if tp <= self.gpus_per_node {
            (self.intra_bw, self.intra_lat)
        } else {
            (self.node_bw / f64::from(self.gpus_per_node) * 0.5, self.inter_lat * 2.0)
        }
    }
}

/// Precomputed constants of a training request.
#[derive(Debug, Clone)]
pub struct TrainCtx {
    pub layers: u32,
    pub heads: u32,
    pub kv_heads: u32,
    pub hidden_u: u32,
    pub h: f64,
    pub vocab: f64,
    pub seq: f64,
    pub seq_u: u32,
    pub global_batch: u32,
    pub gpus: u32,
    pub gpus_per_node: u32,
    pub lora: bool,
    pub layer_params: f64,
    pub lora_layer_params: f64,
    pub embed_params: f64,
    /// Model GEMM flops per token per layer (6*P_layer, or 4*P_layer for LoRA).
    pub gemm_tok_layer: f64,
    /// Attention-core flops per token per layer (12*h*s).
    pub attn_tok_layer: f64,
    /// LM head flops per token (6*V*h, 4*V*h for LoRA).
    pub head_tok: f64,
    pub model_flops_per_step: f64,
    pub peak: f64,
    pub bf16_peak: f64,
    pub gemm_eff: f64,
    pub attn_eff: f64,
    pub mem_bw: f64,
    pub net: Net,
    pub usable: f64,
    pub calibrated: bool,
    pub precision: Precision,
}

impl TrainCtx {
    pub fn new(
        model: &ModelArch,
        cluster: &Cluster,
        seq_len: u32,
        global_batch: u32,
        precision: Precision,
        lora: Option<u32>,
    ) -> Self {
        let prof = profile(&cluster.gpu);
        let h = f64::from(model.hidden);
        let s = f64::from(seq_len);
        let vocab = f64::from(model.vocab);
        let p_layer_active = model.active_layer_matmul_params() as f64;
        let lora_rank = lora.unwrap_or(0);
        let (gemm_mult, head_mult) = if lora.is_some() { (4.0, 4.0) } else { (6.0, 6.0) };
        let lora_layer_params = model.lora_layer_params(lora_rank) as f64;
        // LoRA adapters get full fwd+bwd+wgrad (6 flops per param per token).
        let gemm_tok_layer = gemm_mult * p_layer_active + 6.0 * lora_layer_params;
        let attn_tok_layer = 12.0 * h * s;
        let head_tok = head_mult * vocab * h;
        let tokens = f64::from(global_batch) * s;
        let model_flops_per_step = tokens * (f64::from(model.layers) * (gemm_tok_layer + attn_tok_layer) + head_tok);
        let (peak, gemm_eff) = match precision {
            Precision::Fp8 => (cluster.gpu.fp8_tflops.unwrap_or(cluster.gpu.bf16_tflops) * 1e12, prof.gemm_fp8),
            _ => (cluster.gpu.bf16_tflops * 1e12, prof.gemm_bf16),
        };
        TrainCtx {
            layers: model.layers,
            heads: model.heads,
            kv_heads: model.kv_heads,
            hidden_u: model.hidden,
            h,
            vocab,
            seq: s,
            seq_u: seq_len,
            global_batch,
            gpus: cluster.total_gpus(),
            gpus_per_node: cluster.gpus_per_node,
            lora: lora.is_some(),
            layer_params: model.layer_params() as f64,
            lora_layer_params,
            embed_params: model.embedding_params() as f64,
            gemm_tok_layer,
            attn_tok_layer,
            head_tok,
            model_flops_per_step,
            peak,
            bf16_peak: cluster.gpu.bf16_tflops * 1e12,
            gemm_eff,
            attn_eff: prof.attn,
            mem_bw: cluster.gpu.mem_bandwidth_gb_s * 1e9,
            net: Net::new(cluster),
            usable: usable_bytes(cluster.gpu.memory_bytes),
            calibrated: prof.calibrated,
            precision,
        }
    }
}

/// Usable bytes per GPU: the label minus the CUDA context.
pub fn usable_bytes(memory_bytes: u64) -> f64 {
    (memory_bytes as f64 - CUDA_CONTEXT_BYTES).max(0.0)
}

/// One training configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub tp: u32,
    pub pp: u32,
    pub dp: u32,
    pub vp: u32,
    pub micro_batch: u32,
    pub zero: u8,
    pub sp: bool,
    pub recompute: Recompute,
}

impl Config {
    pub fn grad_accum(&self, global_batch: u32) -> u32 {
        global_batch / (self.micro_batch * self.dp).max(1)
    }
}

/// Model-state bytes (weights, gradients, optimizer) of the most loaded stage.
#[derive(Debug, Clone, Copy)]
pub struct States {
    pub weights: f64,
    pub grads: f64,
    pub optimizer: f64,
    /// Parameters held by the most loaded GPU before ZeRO sharding (base model).
    pub stage_params: f64,
    /// Trainable parameters on that GPU before ZeRO sharding.
    pub trainable: f64,
}

impl States {
    pub fn total(&self) -> f64 {
        self.weights + self.grads + self.optimizer
    }
}

/// ZeRO model states: 2P weights + 2P grads + 12P Adam (fp32 master, m, v), where P is the
/// parameters of the most loaded pipeline stage divided by TP. ZeRO-1 shards the 12P over
/// DP, ZeRO-2 also the grads, ZeRO-3 everything. LoRA: the frozen base only costs 2P (sharded
/// by ZeRO-3); the adapters follow the same formula.
pub fn model_states(c: &TrainCtx, tp: u32, pp: u32, dp: u32, zero: u8) -> States {
    let t = f64::from(tp);
    let d = f64::from(dp);
    let stage_layers = f64::from(c.layers / pp.max(1));
    let embed_copies = if pp == 1 { 2.0 } else { 1.0 };
    let stage_params = (stage_layers * c.layer_params + embed_copies * c.embed_params) / t;
    if c.lora {
        let adapters = stage_layers * c.lora_layer_params / t;
        let (aw, ag, ao) = zero_states(adapters, d, zero);
        let base = if zero >= 3 { d } else { 1.0 };
        States { weights: 2.0 * stage_params / base + aw, grads: ag, optimizer: ao, stage_params, trainable: adapters }
    } else {
        let (weights, grads, optimizer) = zero_states(stage_params, d, zero);
        States { weights, grads, optimizer, stage_params, trainable: stage_params }
    }
}

/// Mixed-precision Adam model states of `params` parameters under ZeRO over `dp` ranks:
/// (2P weights, 2P gradients, 12P optimizer), each divided by `dp` from stage 3, 2 and 1 on.
pub fn zero_states(params: f64, dp: f64, zero: u8) -> (f64, f64, f64) {
    let shard = |stage: u8| if zero >= stage { dp } else { 1.0 };
    (2.0 * params / shard(3), 2.0 * params / shard(2), 12.0 * params / shard(1))
}

/// Activation bytes of one layer for one micro-batch (Korthikanti et al. 2022, FlashAttention
/// so the `5as/h` term is gone, which makes `none` and `selective` equal in memory).
fn layer_activations(c: &TrainCtx, tp: u32, sp: bool, rc: Recompute, b: u32) -> f64 {
    let t = f64::from(tp);
    let sbh = c.seq * f64::from(b) * c.h;
    match rc {
        Recompute::Full => {
            if sp {
                2.0 * sbh / t
            } else {
                2.0 * sbh
            }
        }
        Recompute::None | Recompute::Selective => {
            if tp == 1 || sp {
                34.0 * sbh / t
            } else {
                sbh * (10.0 + 24.0 / t)
            }
        }
    }
}

/// Per-GPU memory of a configuration, given its model states.
pub fn memory(c: &TrainCtx, cfg: &Config, st: &States) -> MemoryBreakdown {
    let p = f64::from(cfg.pp);
    let t = f64::from(cfg.tp);
    let b = f64::from(cfg.micro_batch);
    let m = cfg.grad_accum(c.global_batch);
    let stage_layers = f64::from(c.layers / cfg.pp.max(1));
    let a_layer = layer_activations(c, cfg.tp, cfg.sp, cfg.recompute, cfg.micro_batch);
    // While a layer is recomputed its full activations are live again.
    let transient = if cfg.recompute == Recompute::Full {
        layer_activations(c, cfg.tp, cfg.sp, Recompute::None, cfg.micro_batch)
    } else {
        0.0
    };
    // 1F1B: the first stage keeps min(p, m) micro-batches in flight; interleaving with v
    // chunks multiplies that by 1 + (p-1)/(p*v).
    let in_flight = f64::from(cfg.pp.min(m).max(1));
    let interleave = if cfg.vp > 1 { 1.0 + (p - 1.0) / (p * f64::from(cfg.vp)) } else { 1.0 };
    let first = stage_layers * a_layer * in_flight * interleave + transient;
    // Vocab-parallel logits: bf16 logits + fp32 softmax/grad on the last stage.
    let logits = c.seq * b * c.vocab / t * 6.0;
    let last = stage_layers * a_layer + transient + logits;
    let activations = if cfg.pp == 1 { last } else { first.max(last) };

    let sbh2 = c.seq * b * c.h * 2.0;
    let mut buffers = 0.0;
    if cfg.dp > 1 {
        buffers += (2.0 * st.trainable).min(0.25e9);
    }
    if cfg.tp > 1 {
        buffers += 2.0 * sbh2;
    }
    if cfg.pp > 1 {
        buffers += 2.0 * sbh2 / if cfg.sp { t } else { 1.0 };
    }
    if cfg.zero == 3 {
        // Two gathered layers (prefetch).
        buffers += 2.0 * 2.0 * c.layer_params / t;
    }
    let allocated = st.total() + activations + buffers;
    let frag = allocated * FRAGMENTATION;
    let total = allocated + frag;
    MemoryBreakdown {
        weights: st.weights as u64,
        gradients: st.grads as u64,
        optimizer: st.optimizer as u64,
        activations: activations as u64,
        kv_cache: 0,
        comm_buffers: buffers as u64,
        fragmentation: frag as u64,
        total: total as u64,
        usable: c.usable as u64,
    }
}

/// Predicted timing of a configuration.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timing {
    pub step: f64,
    pub bubble: f64,
    pub tp_comm: f64,
    pub pp_comm: f64,
    pub dp_comm: f64,
    pub hardware_flops_per_step: f64,
}

fn ring(n: u32) -> f64 {
    let n = f64::from(n);
    (n - 1.0) / n
}

/// Step time of a configuration (see the module docs for the formula).
pub fn timing(c: &TrainCtx, cfg: &Config, st: &States) -> Timing {
    let t = f64::from(cfg.tp);
    let p = f64::from(cfg.pp);
    let v = f64::from(cfg.vp);
    let m_u = cfg.grad_accum(c.global_batch);
    let m = f64::from(m_u);
    let b = f64::from(cfg.micro_batch);
    let tokens_mb = b * c.seq;
    let stage_layers = f64::from(c.layers / cfg.pp.max(1));

    let (gemm_rc, attn_rc, elem_rc) = match cfg.recompute {
        Recompute::None => (1.0, 1.0, 1.0),
        Recompute::Selective => (1.0, 16.0 / 12.0, 1.0),
        Recompute::Full => {
            // One extra forward: 2 of the 6 (train) or 4 (LoRA) flops per parameter.
            let g = if c.lora { 6.0 / 4.0 } else { 8.0 / 6.0 };
            (g, 16.0 / 12.0, 4.0 / 3.0)
        }
    };
    let gemm = tokens_mb * (stage_layers * c.gemm_tok_layer * gemm_rc + c.head_tok) / t;
    let attn = tokens_mb * stage_layers * c.attn_tok_layer * attn_rc / t;
    let replicated = if cfg.tp == 1 || cfg.sp { 1.0 / t } else { (10.0 + 24.0 / t) / 34.0 };
    let elem = tokens_mb * stage_layers * ELEMENTWISE_BYTES_PER_H * c.h * elem_rc * replicated;
    let hidden_shard = c.h / t;
    let shape = hidden_shard / (hidden_shard + SHAPE_HIDDEN) * tokens_mb / (tokens_mb + SHAPE_TOKENS);
    let compute = gemm / (c.peak * c.gemm_eff * shape) + attn / (c.bf16_peak * c.attn_eff) + elem / (c.mem_bw * 0.8);

    // Tensor parallel: 2 all-reduces (or RS+AG with SP, same volume) per layer forward and 2
    // backward, 2 more when the forward is recomputed.
    let mut tp_comm_mb = 0.0;
    if cfg.tp > 1 {
        let (bw, lat) = c.net.tp(cfg.tp);
        let bytes = c.seq * b * c.h * 2.0;
        let per = 2.0 * ring(cfg.tp) * bytes / bw + lat;
        let n = if cfg.recompute == Recompute::Full { 6.0 } else { 4.0 };
        let exposed = if cfg.sp { TP_EXPOSED_SP } else { TP_EXPOSED };
        tp_comm_mb = stage_layers * n * per * exposed;
    }
    let per_mb = compute + tp_comm_mb;
    let bubble = (p - 1.0) / v * per_mb;

    // Pipeline p2p: s*b*h activations each way per micro-batch per chunk boundary; mostly
    // overlapped except while filling and draining.
    let mut pp_comm = 0.0;
    if cfg.pp > 1 {
        let (bw, lat) = c.net.group(cfg.pp, cfg.tp);
        let bytes = c.seq * b * c.h * 2.0 / if cfg.sp { t } else { 1.0 };
        let one = bytes / bw + lat;
        pp_comm = 2.0 * one * ((p - 1.0) + 0.1 * m * v);
    }

    // Data parallel gradient reduction (and ZeRO-3 parameter gathers).
    let mut dp_comm = 0.0;
    if cfg.dp > 1 {
        let (bw, lat) = c.net.group(cfg.dp, cfg.tp * cfg.pp);
        let grads = 2.0 * st.trainable;
        let half = ring(cfg.dp) * grads;
        let backward = per_mb * 2.0 / 3.0;
        let (volume, window, overlap, collectives) = match cfg.zero {
            0 | 1 => (2.0 * half, backward, DP_OVERLAP, 1.0),
            2 => (half * (m + 1.0), backward * m, DP_OVERLAP, m + 1.0),
            _ => {
                let base = if c.lora { ring(cfg.dp) * 2.0 * st.stage_params } else { half };
                let ov = if cfg.pp > 1 { ZERO3_OVERLAP_PP } else { ZERO3_OVERLAP };
                ((2.0 * base + half) * m, per_mb * m, ov, 3.0 * m)
            }
        };
        let raw = volume / bw + collectives * stage_layers * lat;
        dp_comm = raw - overlap * raw.min(window);
    }
    // Adam update streams ~28 bytes per locally owned trainable parameter.
    let owned = if cfg.zero >= 1 { st.trainable / f64::from(cfg.dp) } else { st.trainable };
    let optimizer = 28.0 * owned / (c.mem_bw * 0.8);

    let step = m * per_mb + bubble + pp_comm + dp_comm + optimizer;
    let hardware_flops_per_step = c.model_flops_per_step * hardware_ratio(c, cfg.recompute);
    Timing { step, bubble, tp_comm: tp_comm_mb * (m + (p - 1.0) / v), pp_comm, dp_comm, hardware_flops_per_step }
}

/// Executed flops / model flops for a recompute policy.
fn hardware_ratio(c: &TrainCtx, rc: Recompute) -> f64 {
    let per_tok_layer = c.gemm_tok_layer + c.attn_tok_layer;
    let l = f64::from(c.layers);
    let model = l * per_tok_layer + c.head_tok;
    let extra = match rc {
        Recompute::None => 0.0,
        Recompute::Selective => l * c.attn_tok_layer / 3.0,
        Recompute::Full => {
            let fwd_gemm = if c.lora { c.gemm_tok_layer / 2.0 } else { c.gemm_tok_layer / 3.0 };
            l * (fwd_gemm + c.attn_tok_layer / 3.0)
        }
    };
    if model > 0.0 { (model + extra) / model } else { 1.0 }
}
