//! The analytical cost model: hardware efficiency, communication bandwidths, and the memory
//! and step-time of one training configuration.
//!
//! Step time of a configuration (per optimizer step), for the slowest pipeline stage:
//!
//! ```text
//! T      = stage layers * (compute + exposed TP, CP and EP comm per layer) (+ LM head, last stage)
//! step   = m*T + (p-1)/v*T (bubble) + PP p2p + exposed DP comm + optimizer update (or CPU offload)
//! compute = GEMM flops / (peak_prec * gemm_eff * shape)        (weights, LM head)
//!         + expert GEMM flops * capacity / (peak_prec * gemm_eff * expert_shape)
//!         + attention-core flops / (peak_bf16 * attn_eff)       (FlashAttention runs in bf16)
//!         + elementwise bytes / (HBM bandwidth * 0.8)           (norms, activations, residuals)
//!         + MoE router/permutation time per routed token copy
//! shape  = (h/t) / (h/t + 128) * (b*s/cp) / (b*s/cp + 128)      (small GEMMs run slower)
//! CP     = 3 (cp-1) K/V chunk transfers per layer over the CP group's link, 80% hidden behind
//!          the attention of the same layer
//! EP     = 4 all-to-alls of b*s/cp/t * top_k * capacity * h * 2 bytes per MoE layer over the
//!          EP group (ep ranks `etp` apart, as Megatron-Core places them): the share for ranks on
//!          the same node over its link, the rest through the node's NICs, which every GPU of the
//!          node shares while they all exchange at once; not hidden within a node, half hidden
//!          (overlapped or deduplicated per node, as the published recipes run it) across nodes
//! DP     = gradient reduction over dp*cp ranks (experts over tp*dp*cp/(etp*ep), strided), 70%
//!          overlapped
//! ```
//!
//! Memory is costed per stage (first, a middle one, last: each with its layers, embedding or LM
//! head and micro-batches in flight) and the largest reported. The per-GPU efficiencies are
//! calibrated against the published NeMo / Megatron-Bridge (FP8, H100/B200), Llama 3 paper
//! (BF16, H100) and Megatron-LM (BF16, A100) runs; see `docs/planner-calibration.md` and the
//! `calibration` tests.

use super::types::{Cluster, GpuSpec, LinkKind, MemoryBreakdown, ModelArch, Offload, Precision, Recompute, StageSplit};

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
        if span <= u64::from(self.gpus_per_node) { (self.intra_bw, self.intra_lat) } else { self.crossing(stride) }
    }

    /// Bandwidth and latency of one flow leaving a node when `flows.min(gpus_per_node)` flows
    /// share its NICs.
    pub fn crossing(&self, flows: u32) -> (f64, f64) {
        let sharing = f64::from(flows.min(self.gpus_per_node).max(1));
        ((self.node_bw / sharing).min(self.intra_bw), self.inter_lat)
    }

    /// Time of one all-to-all in which each of `size` ranks, spaced `stride` apart, holds `bytes`
    /// spread evenly over the group (its own share stays put): the shares for members on the same
    /// node cross its link; the rest leaves through the node's NICs, which all of the node's GPUs
    /// share, since every one of them runs such an exchange at the same time (MoE layers do). Both
    /// parts run concurrently; one latency per peer, up to 8 in flight.
    pub fn all_to_all(&self, size: u32, stride: u32, bytes: f64) -> f64 {
        let n = size.max(1);
        let gpn = self.gpus_per_node.max(1);
        let stride = stride.max(1);
        // Members of the group on one node.
        let local = if stride >= gpn { 1 } else { (gpn / stride).min(n) };
        let intra = bytes * f64::from(local - 1) / f64::from(n) / self.intra_bw;
        let remote = n - local;
        let peers = f64::from(n - 1).min(8.0);
        if remote == 0 {
            return intra + self.intra_lat * peers;
        }
        let nic = (self.node_bw / f64::from(gpn)).min(self.intra_bw);
        let inter = bytes * f64::from(remote) / f64::from(n) / nic;
        intra.max(inter) + self.inter_lat * peers
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
    /// The requested global batch (a plan may run an adjusted one, see [`Config::global_batch`]).
    pub global_batch: u32,
    pub gpus: u32,
    pub gpus_per_node: u32,
    pub lora: bool,
    /// The LM head shares the embedding's weights: one matrix where both sit on one stage.
    pub tied: bool,
    /// All parameters of one layer (all experts), average over the layers.
    pub layer_params: f64,
    /// Non-expert parameters of one layer (attention, norms, dense FFN, shared experts, router).
    pub dense_layer_params: f64,
    /// Routed-expert parameters of one layer (all experts), average over the layers.
    pub expert_layer_params: f64,
    /// Routed experts per MoE layer (0 for dense models).
    pub experts: u32,
    /// Routed experts per token.
    pub top_k: f64,
    /// Expert capacity factor (1.0 when not given).
    pub capacity: f64,
    /// Fraction of the layers that are MoE layers.
    pub moe_fraction: f64,
    /// MLP activation size relative to a dense `4h` MLP (1 for dense models).
    pub mlp_act_factor: f64,
    /// `kv_heads * head_dim`.
    pub kv_dim: f64,
    pub lora_layer_params: f64,
    pub embed_params: f64,
    /// Non-expert model GEMM flops per token per layer (6*P_layer, or 4*P_layer for LoRA).
    pub gemm_tok_layer: f64,
    /// Routed-expert model GEMM flops per token per layer (top-k experts only).
    pub expert_gemm_tok_layer: f64,
    /// Attention-core flops per token per layer (12*heads*head_dim*s, i.e. 12*h*s by default).
    pub attn_tok_layer: f64,
    /// LM head flops per token (6*V*h, 4*V*h for LoRA).
    pub head_tok: f64,
    /// Model flops per trained token (no recomputation).
    pub model_flops_per_token: f64,
    pub peak: f64,
    pub bf16_peak: f64,
    pub gemm_eff: f64,
    pub attn_eff: f64,
    pub mem_bw: f64,
    /// Host link (PCIe) bandwidth per GPU, bytes/s, for CPU offload.
    pub host_link_bw: f64,
    /// Host memory per node, bytes.
    pub host_memory: f64,
    pub net: Net,
    pub usable: f64,
    pub calibrated: bool,
    pub precision: Precision,
}

/// Effective host-to-GPU bandwidth: PCIe 5.0 x16 on H100/H200/B200, PCIe 4.0 x16 otherwise,
/// at 80%.
pub fn host_link_bytes_per_s(gpu: &GpuSpec) -> f64 {
    let gb_s = match gpu.key.as_str() {
        "h100" | "h200" | "b200" => 64.0,
        _ => 32.0,
    };
    gb_s * 1e9 * 0.8
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
        let lora_rank = lora.unwrap_or(0);
        let (gemm_mult, head_mult) = if lora.is_some() { (4.0, 4.0) } else { (6.0, 6.0) };
        let lora_layer_params = model.lora_layer_params(lora_rank) as f64;
        let active_expert = model.active_expert_layer_params() as f64;
        let active_dense = model.active_layer_matmul_params() as f64 - active_expert;
        // LoRA adapters get full fwd+bwd+wgrad (6 flops per param per token).
        let gemm_tok_layer = gemm_mult * active_dense + 6.0 * lora_layer_params;
        let expert_gemm_tok_layer = gemm_mult * active_expert;
        let attn_tok_layer = 12.0 * model.q_dim() as f64 * s;
        let head_tok = head_mult * vocab * h;
        let layers = f64::from(model.layers);
        let model_flops_per_token = layers * (gemm_tok_layer + expert_gemm_tok_layer + attn_tok_layer) + head_tok;
        let (peak, gemm_eff) = match precision {
            Precision::Fp8 => (cluster.gpu.fp8_tflops.unwrap_or(cluster.gpu.bf16_tflops) * 1e12, prof.gemm_fp8),
            _ => (cluster.gpu.bf16_tflops * 1e12, prof.gemm_bf16),
        };
        let (experts, top_k, capacity, shared) = match model.moe {
            Some(m) => (
                m.experts,
                f64::from(m.experts_per_token),
                m.capacity_factor.unwrap_or(1.0),
                f64::from(m.shared_experts),
            ),
            None => (0, 0.0, 1.0, 0.0),
        };
        let moe_fraction = if layers > 0.0 { model.moe_layers() as f64 / layers } else { 0.0 };
        let ffn_rel = f64::from(model.ffn) / (4.0 * h).max(1.0);
        let mlp_act_factor =
            if experts > 0 { 1.0 + moe_fraction * ((top_k * capacity + shared) * ffn_rel - 1.0) } else { 1.0 };
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
            tied: model.tied_embeddings,
            layer_params: model.layer_params() as f64,
            dense_layer_params: model.dense_layer_params() as f64,
            expert_layer_params: model.expert_layer_params() as f64,
            experts,
            top_k,
            capacity,
            moe_fraction,
            mlp_act_factor: mlp_act_factor.max(0.1),
            kv_dim: f64::from(model.kv_heads) * model.head_dim() as f64,
            lora_layer_params,
            embed_params: model.embedding_params() as f64,
            gemm_tok_layer,
            expert_gemm_tok_layer,
            attn_tok_layer,
            head_tok,
            model_flops_per_token,
            peak,
            bf16_peak: cluster.gpu.bf16_tflops * 1e12,
            gemm_eff,
            attn_eff: prof.attn,
            mem_bw: cluster.gpu.mem_bandwidth_gb_s * 1e9,
            host_link_bw: host_link_bytes_per_s(&cluster.gpu),
            host_memory: cluster.host_memory_bytes,
            net: Net::new(cluster),
            usable: usable_bytes(cluster.gpu.memory_bytes),
            calibrated: prof.calibrated,
            precision,
        }
    }

    /// Model flops of one step of `global_batch` sequences.
    pub fn model_flops_per_step(&self, global_batch: u32) -> f64 {
        f64::from(global_batch) * self.seq * self.model_flops_per_token
    }
}

/// A plan whose memory comes within this fraction of the usable memory (5%) is flagged in its
/// `notes`: allocator peaks, framework buffers or a longer sequence than planned may not fit in
/// what is left. The one place this margin is set.
pub const MEMORY_HEADROOM_MARGIN: f64 = 0.05;

/// The headroom warning for a plan's memory, if it is within [`MEMORY_HEADROOM_MARGIN`] of usable.
pub fn headroom_note(mem: &super::types::MemoryBreakdown) -> Option<String> {
    let (total, usable) = (mem.total as f64, mem.usable as f64);
    if usable <= 0.0 || total < usable * (1.0 - MEMORY_HEADROOM_MARGIN) {
        return None;
    }
    Some(format!(
        "little memory headroom: {:.1} of {:.1} GB usable per GPU ({:.1}% left, under the {:.0}% margin); allocator peaks or longer sequences may run out of memory, so prefer a plan with more headroom or more GPUs",
        total / 1e9,
        usable / 1e9,
        ((usable - total) / usable * 100.0).max(0.0),
        MEMORY_HEADROOM_MARGIN * 100.0
    ))
}

/// Usable bytes per GPU: the label minus the CUDA context.
pub fn usable_bytes(memory_bytes: u64) -> f64 {
    (memory_bytes as f64 - CUDA_CONTEXT_BYTES).max(0.0)
}

/// Transformer layers per pipeline stage: the first stage, each middle stage, the last stage
/// (all virtual chunks of a stage together). With `pp == 1` all three are the layer count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    pub kind: StageSplit,
    pub first: u32,
    pub mid: u32,
    pub last: u32,
}

impl Split {
    /// The split a plan's `layers_per_stage` describe (first, a middle and the last stage).
    pub fn from_stages(kind: StageSplit, layers_per_stage: &[u32]) -> Split {
        let first = layers_per_stage.first().copied().unwrap_or(0);
        let mid = if layers_per_stage.len() > 2 { layers_per_stage[1] } else { first };
        Split { kind, first, mid, last: layers_per_stage.last().copied().unwrap_or(first) }
    }

    /// Layers of each of the `pp` stages, first to last.
    pub fn layers_per_stage(&self, pp: u32) -> Vec<u32> {
        match pp {
            0 | 1 => vec![self.first],
            _ => {
                let mut v = Vec::with_capacity(pp as usize);
                v.push(self.first);
                v.extend(std::iter::repeat_n(self.mid, (pp - 2) as usize));
                v.push(self.last);
                v
            }
        }
    }

    /// The most layers any stage holds.
    pub fn max_layers(&self, pp: u32) -> u32 {
        if pp >= 3 { self.first.max(self.mid).max(self.last) } else { self.first.max(self.last) }
    }

    /// Layers of each virtual chunk of each stage, as Megatron-LM builds them
    /// (`get_num_layers_to_build`): `out[stage][chunk]`, chunks in model order within a stage.
    /// Every chunk of a stage holds `stage / vp` layers, except with the embedding-and-loss split,
    /// where the embedding takes a layer's place in the first chunk of the first stage and the
    /// loss in the last chunk of the last stage, and with a layout, where each stage's units (its
    /// layers, plus the embedding on the first and the loss on the last) spread over its chunks,
    /// the earlier chunks taking one more where they do not divide.
    pub fn layers_per_chunk(&self, pp: u32, vp: u32) -> Vec<Vec<u32>> {
        let vp = vp.max(1);
        let stages = self.layers_per_stage(pp);
        let n = stages.len();
        stages
            .iter()
            .enumerate()
            .map(|(i, &layers)| {
                let ends = i == 0 || i + 1 == n;
                if self.kind == StageSplit::Layout && n > 1 {
                    let (emb, loss) = (u32::from(i == 0), u32::from(i + 1 == n));
                    let units = layers + emb + loss;
                    let mut chunks: Vec<u32> = (0..vp).map(|c| units / vp + u32::from(c < units % vp)).collect();
                    chunks[0] = chunks[0].saturating_sub(emb);
                    let last = chunks.len() - 1;
                    chunks[last] = chunks[last].saturating_sub(loss);
                    chunks
                } else if self.kind == StageSplit::EmbeddingAndLoss && n > 1 && ends {
                    // The stage's chunks split `layers + 1`; the embedding (first stage) or the
                    // loss (last stage) stands in for the missing layer.
                    let mut chunks = vec![(layers + 1) / vp; vp as usize];
                    chunks[if i == 0 { 0 } else { vp as usize - 1 }] -= 1;
                    chunks
                } else {
                    vec![layers / vp; vp as usize]
                }
            })
            .collect()
    }

    /// Whether the layout of `layers` over `pp` stages of `vp` chunks is a tight one, where fewer
    /// than `pp` of the `pp * vp` virtual stages hold one unit (layer, embedding or loss) less than
    /// the others, as in the layouts Megatron users write (DeepSeek-V3's 63 units over 32 or 16
    /// virtual stages: one short). Looser ones cost the same in this model's per-stage terms but
    /// leave more virtual stages idle part of each round; the search tries them only when `vp` is
    /// pinned, which keeps the unpinned search near its former size.
    pub fn layout_is_tight(layers: u32, pp: u32, vp: u32) -> bool {
        let (units, stages) = (u64::from(layers) + 2, u64::from(pp) * u64::from(vp));
        stages > 0 && stages * units.div_ceil(stages) - units < u64::from(pp)
    }

    /// The split as Megatron's `--pipeline-model-parallel-layout` string: the `pp * vp` virtual
    /// stages in model order (virtual stage `c * pp + r` is chunk `c` of stage `r`), separated by
    /// `|`, each its layers (`t`, `t*n` from three on) after the embedding `E` (the first) or
    /// before the loss `L` (the last); runs of equal stages written `(..|)*n`, as
    /// `PipelineParallelLayerLayout.parse_str_to_list` unrolls them. E.g. DeepSeek-V3's 61 layers
    /// on 8 x 4: `Et|(tt|)*30L`.
    pub fn pipeline_layout(&self, pp: u32, vp: u32) -> String {
        let chunks = self.layers_per_chunk(pp, vp);
        let (pp, vp) = (chunks.len(), chunks.first().map_or(1, Vec::len));
        let mut stages: Vec<String> = Vec::with_capacity(pp * vp);
        for c in 0..vp {
            for (r, stage) in chunks.iter().enumerate() {
                let mut s = String::new();
                if r == 0 && c == 0 {
                    s.push('E');
                }
                match stage[c] {
                    0 => {}
                    n @ 1..=2 => s.push_str(&"t".repeat(n as usize)),
                    n => s.push_str(&format!("t*{n}")),
                }
                if r + 1 == pp && c + 1 == vp {
                    s.push('L');
                }
                stages.push(s);
            }
        }
        let mut runs: Vec<(String, usize)> = Vec::new();
        for s in stages {
            match runs.last_mut() {
                Some((prev, k)) if *prev == s => *k += 1,
                _ => runs.push((s, 1)),
            }
        }
        let n = runs.len();
        let mut out = String::new();
        for (i, (s, k)) in runs.into_iter().enumerate() {
            let last = i + 1 == n;
            // The last stage takes no `|` after it (that would open an empty stage).
            let (repeated, tail) = if last { (k - 1, Some(&s)) } else { (k, None) };
            match repeated {
                0 => {}
                1 => out.push_str(&format!("{s}|")),
                k => out.push_str(&format!("({s}|)*{k}")),
            }
            if let Some(t) = tail {
                out.push_str(t);
            }
        }
        out
    }

    /// Whether Megatron-LM accepts this split of `layers` over `pp` stages with `vp` virtual
    /// chunks each: its rule, written once here, as `TransformerConfig.__post_init__`
    /// (megatron/core/transformer/transformer_config.py) and `validate_args`
    /// (megatron/training/arguments.py) check it since Megatron-Core 0.11 ("Uneven Virtual
    /// Pipeline Parallelism"):
    /// - interleaving (`vp > 1`) needs `pp > 1`;
    /// - even: `layers % pp == 0` and each stage's layers divide by `vp`;
    /// - embedding and loss as a layer each: `(layers + 2) % pp == 0` and `(layers + 2) / pp`
    ///   divides by `vp`;
    /// - uneven (`--decoder-first/last-pipeline-num-layers`): first and last at least 1 and each
    ///   divisible by `vp`; the remaining layers spread evenly over the `pp - 2` middle stages
    ///   (none left exactly when there are no middle stages), each middle stage's count
    ///   divisible by `vp`. Every part then divides by `vp`, so `layers % vp == 0` is needed.
    ///   `validate_args` takes the interleaving degree of such a split only as
    ///   `--num-virtual-stages-per-pipeline-rank`, never `--num-layers-per-virtual-pipeline-stage`;
    /// - layout (`--pipeline-model-parallel-layout`, `PipelineParallelLayerLayout` in
    ///   megatron/core/transformer/pipeline_parallel_layer_layout.py): any counts, as long as the
    ///   `pp * vp` virtual stages hold every layer once, the embedding first and the loss last;
    ///   here each stage's chunks take its share as [`Split::layers_per_chunk`] gives it, so the
    ///   last chunk of the last stage must have a unit left for the loss (`last + 1 >= vp`).
    ///
    /// Stage counts must also match what the split says (`mid` is unused with `pp == 2`).
    pub fn megatron_accepts(&self, layers: u32, pp: u32, vp: u32) -> bool {
        if pp == 0 || vp == 0 {
            return false;
        }
        if pp == 1 {
            return vp == 1 && self.kind == StageSplit::Even && self.first == layers;
        }
        let (l, p, v) = (u64::from(layers), u64::from(pp), u64::from(vp));
        let (first, mid, last) = (u64::from(self.first), u64::from(self.mid), u64::from(self.last));
        let mid_ok = |want: u64| pp == 2 || mid == want;
        match self.kind {
            StageSplit::Layout => {
                let middle = if pp > 2 { mid * (p - 2) } else { 0 };
                first + middle + last == l && last + 1 >= v
            }
            StageSplit::Even => {
                l.is_multiple_of(p) && (l / p).is_multiple_of(v) && first == l / p && last == l / p && mid_ok(l / p)
            }
            StageSplit::EmbeddingAndLoss => {
                let per = (l + 2) / p;
                (l + 2).is_multiple_of(p) && per.is_multiple_of(v) && first + 1 == per && last + 1 == per && mid_ok(per)
            }
            StageSplit::Uneven => {
                if first == 0 || last == 0 || !first.is_multiple_of(v) || !last.is_multiple_of(v) || first + last > l {
                    return false;
                }
                let middle = l - first - last;
                let middle_stages = p - 2;
                if (middle > 0) != (middle_stages > 0) {
                    return false;
                }
                middle_stages == 0
                    || (middle.is_multiple_of(middle_stages)
                        && (middle / middle_stages).is_multiple_of(v)
                        && mid == middle / middle_stages)
            }
        }
    }

    /// The ways `layers` can be split over `pp` stages with `vp` chunks each, each one Megatron
    /// accepts ([`Split::megatron_accepts`]):
    /// - even: `layers % (pp * vp) == 0`;
    /// - embedding and loss counted as a layer each: `(layers + 2) % (pp * vp) == 0` (`pp > 1`);
    /// - uneven first/last (`pp > 1`, `layers % vp == 0`, when neither of the above exists):
    ///   in units of `vp` layers (one per chunk), middle stages hold `ceil(units / pp)`, the
    ///   first and last the rest, the last (with the LM head) no more than the first, the first
    ///   no more than a middle stage. With `vp > 1` every chunk of a stage holds `stage / vp`;
    /// - layout (`pp > 1`, `vp > 1`, when neither even nor embedding-and-loss exists, for any layer
    ///   count): the balanced one Megatron users write, the embedding and the loss counted as a
    ///   layer each: of the `layers + 2` units, middle stages hold `ceil(units / pp)`, the first
    ///   and last the rest (the last no more than the first, the first no more than a middle
    ///   stage), each stage's units spread over its chunks ([`Split::layers_per_chunk`]), so no
    ///   virtual stage holds more than `ceil(units / (pp * vp))`; offered beside an uneven split
    ///   unless that one has the same stages, and only where every chunk keeps a unit.
    pub fn options(layers: u32, pp: u32, vp: u32, out: &mut Vec<Split>) {
        out.clear();
        let chunks = u64::from(pp) * u64::from(vp);
        if pp == 0 || vp == 0 || chunks > u64::from(layers) + 2 {
            return;
        }
        if pp == 1 {
            if vp == 1 {
                out.push(Split { kind: StageSplit::Even, first: layers, mid: layers, last: layers });
            }
            return;
        }
        let l = u64::from(layers);
        if l.is_multiple_of(chunks) {
            let per = layers / pp;
            out.push(Split { kind: StageSplit::Even, first: per, mid: per, last: per });
        }
        if (l + 2).is_multiple_of(chunks) {
            let per = ((l + 2) / u64::from(pp)) as u32;
            if per >= 2 {
                out.push(Split { kind: StageSplit::EmbeddingAndLoss, first: per - 1, mid: per, last: per - 1 });
            }
        }
        if out.is_empty() && layers.is_multiple_of(vp) {
            // One unit is `vp` layers: a layer on each chunk of a stage.
            let units = layers / vp;
            let split = if pp == 2 {
                let last = units / 2;
                Some((units - last, units - last, last))
            } else {
                let mid = units.div_ceil(pp);
                let rest = i64::from(units) - i64::from(mid) * i64::from(pp - 2);
                // First and last share `rest`; the last (with the LM head) gets the smaller half.
                let last = rest / 2;
                let first = rest - last;
                (last >= 1 && first <= i64::from(mid)).then_some((first as u32, mid, last as u32))
            };
            if let Some((first, mid, last)) = split {
                let s = Split { kind: StageSplit::Uneven, first: first * vp, mid: mid * vp, last: last * vp };
                if s.megatron_accepts(layers, pp, vp) {
                    out.push(s);
                }
            }
        }
        if vp > 1 && out.iter().all(|s| s.kind == StageSplit::Uneven) {
            let units = l + 2;
            let (p, v) = (u64::from(pp), u64::from(vp));
            let split = if pp == 2 {
                let last = units / 2;
                Some((units - last, units - last, last))
            } else {
                let mid = units.div_ceil(p);
                units
                    .checked_sub(mid * (p - 2))
                    .map(|rest| (rest - rest / 2, mid, rest / 2))
                    .filter(|&(f, m, _)| f <= m)
            };
            if let Some((first, mid, last)) = split.filter(|&(f, m, la)| f >= v && m >= v && la >= v) {
                // With two stages there is no middle one: `mid` repeats the first, as elsewhere.
                let mid = if pp == 2 { first - 1 } else { mid };
                let s = Split {
                    kind: StageSplit::Layout,
                    first: (first - 1) as u32,
                    mid: mid as u32,
                    last: (last - 1) as u32,
                };
                let same = |o: &Split| o.layers_per_stage(pp) == s.layers_per_stage(pp);
                if !out.iter().any(same) && s.megatron_accepts(layers, pp, vp) {
                    out.push(s);
                }
            }
        }
        debug_assert!(out.iter().all(|s| s.megatron_accepts(layers, pp, vp)), "{layers} on {pp} x {vp}: {out:?}");
    }
}

/// One training configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub tp: u32,
    pub cp: u32,
    pub pp: u32,
    pub dp: u32,
    pub ep: u32,
    /// Expert tensor-parallel degree: `tp` or 1 (see [`expert_tp_options`]).
    pub etp: u32,
    pub vp: u32,
    pub micro_batch: u32,
    pub zero: u8,
    pub sp: bool,
    pub recompute: Recompute,
    pub offload: Offload,
    pub split: Split,
    /// The global batch this configuration runs (a multiple of `micro_batch * dp`).
    pub global_batch: u32,
}

impl Config {
    pub fn grad_accum(&self) -> u32 {
        self.global_batch / (self.micro_batch * self.dp).max(1)
    }

    /// GPUs the configuration uses.
    pub fn gpus(&self) -> u32 {
        self.tp * self.cp * self.pp * self.dp
    }

    /// Ranks of a pipeline stage holding the same experts, which reduce (and with ZeRO shard) the
    /// experts' gradients and optimizer states: Megatron-Core's expert data-parallel group,
    /// `tp * cp * dp / (etp * ep)`, its members `etp * ep` apart.
    pub fn expert_dp(&self) -> u32 {
        (self.tp * self.cp * self.dp / (self.etp * self.ep).max(1)).max(1)
    }
}

/// The expert tensor-parallel degrees Megatron-Core runs `ep`-way expert parallelism with next to
/// `tp`, `cp` and `dp` (`initialize_model_parallel` needs `etp * ep * pp` to divide the world
/// size, i.e. `etp * ep` to divide `tp * cp * dp`), of the two recipes use: `tp`, its default
/// (each expert split like the dense layers; EP carved out of the `dp * cp` ranks), where `ep`
/// divides `dp * cp`; and 1 (`--expert-tensor-parallel-size 1`: experts whole, EP carved out of
/// the `tp * dp * cp` ranks), where `tp > 1`, `ep > 1` and `ep` divides `tp * dp * cp`. The one
/// place this rule is written.
pub fn expert_tp_options(tp: u32, cp: u32, dp: u32, ep: u32) -> Vec<u32> {
    let ranks = u64::from(tp) * u64::from(cp) * u64::from(dp);
    let mut out = Vec::with_capacity(2);
    for etp in [tp, 1] {
        let whole = etp == 1 && etp != tp;
        if !out.contains(&etp)
            && etp > 0
            && ep > 0
            && (!whole || ep > 1)
            && ranks.is_multiple_of(u64::from(etp) * u64::from(ep))
        {
            out.push(etp);
        }
    }
    out
}

/// Model-state bytes (weights, gradients, optimizer) of one pipeline stage on one GPU.
#[derive(Debug, Clone, Copy, Default)]
pub struct States {
    pub weights: f64,
    pub grads: f64,
    pub optimizer: f64,
    /// Parameters held by the GPU before ZeRO sharding (base model).
    pub stage_params: f64,
    /// Trainable non-expert parameters on that GPU before ZeRO sharding.
    pub trainable: f64,
    /// Trainable routed-expert parameters on that GPU before ZeRO sharding.
    pub trainable_experts: f64,
    /// Bytes kept in host memory for this GPU (CPU offload).
    pub host: f64,
}

impl States {
    pub fn total(&self) -> f64 {
        self.weights + self.grads + self.optimizer
    }
}

/// Mixed-precision Adam model states of `params` parameters under ZeRO over `dp` ranks:
/// (2P weights, 2P gradients, 12P optimizer), each divided by `dp` from stage 3, 2 and 1 on.
pub fn zero_states(params: f64, dp: f64, zero: u8) -> (f64, f64, f64) {
    let shard = |stage: u8| if zero >= stage { dp } else { 1.0 };
    (2.0 * params / shard(3), 2.0 * params / shard(2), 12.0 * params / shard(1))
}

/// ZeRO model states of a stage of `layers` layers (plus `embeds` embedding matrices) on one
/// GPU: 2P weights + 2P grads + 12P Adam, P divided by TP (routed experts by `etp * ep`); the
/// non-expert states are sharded over the `dp * cp` ranks, the expert states over the
/// [`Config::expert_dp`] ranks (Megatron's distributed optimizer). LoRA: the frozen base costs 2P (sharded by
/// ZeRO-3); the adapters follow the formula. CPU offload moves the optimizer states (and fp32
/// gradients; with params, the bf16 weights too) to host memory.
pub fn stage_states(c: &TrainCtx, cfg: &Config, layers: u32, embeds: f64) -> States {
    let t = f64::from(cfg.tp);
    let l = f64::from(layers);
    let dense_shard = f64::from(cfg.dp) * f64::from(cfg.cp);
    let expert_shard = f64::from(cfg.expert_dp());
    let dense = (l * c.dense_layer_params + embeds * c.embed_params) / t;
    let experts = l * c.expert_layer_params / (f64::from(cfg.etp) * f64::from(cfg.ep));
    let stage_params = dense + experts;
    let zero = cfg.zero;
    let mut st = if c.lora {
        let adapters = l * c.lora_layer_params / t;
        let (aw, ag, ao) = zero_states(adapters, dense_shard, zero);
        let base = |shard: f64| if zero >= 3 { shard } else { 1.0 };
        States {
            weights: 2.0 * dense / base(dense_shard) + 2.0 * experts / base(expert_shard) + aw,
            grads: ag,
            optimizer: ao,
            stage_params,
            trainable: adapters,
            trainable_experts: 0.0,
            host: 0.0,
        }
    } else {
        let (dw, dg, dopt) = zero_states(dense, dense_shard, zero);
        let (ew, eg, eopt) = zero_states(experts, expert_shard, zero);
        States {
            weights: dw + ew,
            grads: dg + eg,
            optimizer: dopt + eopt,
            stage_params,
            trainable: dense,
            trainable_experts: experts,
            host: 0.0,
        }
    };
    match cfg.offload {
        Offload::None => {}
        Offload::Optimizer => {
            // fp32 master, moments and an fp32 copy of the gradients on the host.
            st.host = st.optimizer * 16.0 / 12.0;
            st.optimizer = 0.0;
        }
        Offload::OptimizerAndParams => {
            st.host = st.optimizer * 16.0 / 12.0 + st.weights;
            st.optimizer = 0.0;
            st.weights = 0.0;
        }
    }
    st
}

/// Activation bytes of one layer for one micro-batch (Korthikanti et al. 2022, FlashAttention
/// so the `5as/h` term is gone, which makes `none` and `selective` equal in memory). Context
/// parallelism keeps `s / cp` tokens per GPU; an MoE MLP holds `top_k * capacity` (plus shared)
/// expert activations of its FFN size instead of one `4h` MLP (the MLP is 19 of the 34 `sbh`).
fn layer_activations(c: &TrainCtx, tp: u32, cp: u32, sp: bool, rc: Recompute, b: u32) -> f64 {
    let t = f64::from(tp);
    let sbh = c.seq / f64::from(cp) * f64::from(b) * c.h;
    match rc {
        Recompute::Full => {
            if sp {
                2.0 * sbh / t
            } else {
                2.0 * sbh
            }
        }
        Recompute::None | Recompute::Selective => {
            let moe = (34.0 + 19.0 * (c.mlp_act_factor - 1.0)) / 34.0;
            moe * if tp == 1 || sp { 34.0 * sbh / t } else { sbh * (10.0 + 24.0 / t) }
        }
    }
}

/// Memory of the most loaded GPU of a configuration, and that stage's model states.
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    pub breakdown: MemoryBreakdown,
    /// Largest model states of any stage (for the communication volumes).
    pub states: States,
    /// Host memory per node the offloaded states need.
    pub host_per_node: f64,
}

/// The parts of a GPU's memory that do not depend on which pipeline stage it holds.
#[derive(Debug, Clone, Copy)]
pub struct MemoryTerms {
    /// Activation bytes of one layer for one micro-batch.
    pub layer_activations: f64,
    /// Full activations of one layer live again while it is recomputed (full recompute only).
    pub transient: f64,
    /// Vocab-parallel logits held by the last stage.
    pub logits: f64,
    /// Interleaving factor on the micro-batches in flight (`1 + (p-1)/(p*v)`, 1 without vp).
    pub interleave: f64,
    /// TP, PP, CP, EP and ZeRO-3 communication buffers.
    pub buffers: f64,
}

/// The stage-independent memory terms of a configuration (`cfg.pp` stages in the pipeline).
pub fn memory_terms(c: &TrainCtx, cfg: &Config) -> MemoryTerms {
    let p = f64::from(cfg.pp);
    let t = f64::from(cfg.tp);
    let b = f64::from(cfg.micro_batch);
    let s_rank = c.seq / f64::from(cfg.cp);
    let a_layer = layer_activations(c, cfg.tp, cfg.cp, cfg.sp, cfg.recompute, cfg.micro_batch);
    // While a layer is recomputed its full activations are live again.
    let transient = if cfg.recompute == Recompute::Full {
        layer_activations(c, cfg.tp, cfg.cp, cfg.sp, Recompute::None, cfg.micro_batch)
    } else {
        0.0
    };
    // Vocab-parallel logits: bf16 logits + fp32 softmax/grad on the last stage.
    let logits = s_rank * b * c.vocab / t * 6.0;
    // What a stage keeps in flight is `in_flight` (below); the interleaving factor is what stage 0
    // holds over plain 1F1B, 1 + (p-1)/(p*v), kept for the explanation.
    let interleave = if cfg.vp > 1 { 1.0 + (p - 1.0) / (p * f64::from(cfg.vp)) } else { 1.0 };

    let sbh2 = s_rank * b * c.h * 2.0;
    let mut buffers = 0.0;
    if cfg.tp > 1 {
        buffers += 2.0 * sbh2;
    }
    if cfg.pp > 1 {
        buffers += 2.0 * sbh2 / if cfg.sp { t } else { 1.0 };
    }
    if cfg.cp > 1 {
        // Double-buffered K/V chunks of the ring.
        buffers += 2.0 * 2.0 * s_rank * b * c.kv_dim * 2.0 / t;
    }
    if cfg.ep > 1 {
        // All-to-all dispatch and combine buffers.
        buffers += 2.0 * s_rank * b * c.top_k * c.capacity * c.h * 2.0 / t;
    }
    if cfg.zero == 3 {
        // Two gathered layers (prefetch).
        buffers +=
            2.0 * 2.0 * (c.dense_layer_params / t + c.expert_layer_params / (f64::from(cfg.etp) * f64::from(cfg.ep)));
    }
    MemoryTerms { layer_activations: a_layer, transient, logits, interleave, buffers }
}

/// Micro-batches' activations pipeline stage `stage` (0-based, of `pp`) holds at once, in units of
/// its whole stage, under the schedule the runtime and Megatron-LM run: 1F1B keeps `min(pp - s, m)`
/// of `m` micro-batches; interleaved 1F1B with `vp` chunks runs a warm-up of `2 (pp - s - 1) +
/// (vp - 1) pp` chunk forwards, so it holds that plus one chunk pass (capped at all `m * vp`), each
/// a `1/vp` of the stage (stage 0: `pp + (pp - 1) / vp`).
pub fn in_flight(pp: u32, vp: u32, stage: u32, m: u32) -> f64 {
    if pp <= 1 {
        return 1.0;
    }
    if vp <= 1 {
        return f64::from(pp.saturating_sub(stage).min(m).max(1));
    }
    let warmup = 2 * pp.saturating_sub(stage + 1) + (vp - 1) * pp;
    f64::from((warmup + 1).min(m.saturating_mul(vp)).max(1)) / f64::from(vp)
}

/// Memory of one GPU of pipeline stage `stage` (0-based, of `cfg.pp`) holding `layers` layers:
/// the first stage holds the embedding, the last the LM head and the logits (a single stage
/// both, one matrix when they are tied); activations of [`in_flight`] micro-batches.
pub fn stage_memory(c: &TrainCtx, cfg: &Config, terms: &MemoryTerms, stage: u32, layers: u32) -> StageMemory {
    let m = cfg.grad_accum();
    let last = stage + 1 >= cfg.pp;
    let embeds = if cfg.pp <= 1 {
        if c.tied { 1.0 } else { 2.0 }
    } else if stage == 0 || last {
        1.0
    } else {
        0.0
    };
    let flight = in_flight(cfg.pp, cfg.vp, stage, m);
    let logit = if last { terms.logits } else { 0.0 };
    let st = stage_states(c, cfg, layers, embeds);
    let activations = f64::from(layers) * terms.layer_activations * flight + terms.transient + logit;
    let mut buf = terms.buffers;
    if cfg.dp > 1 || cfg.cp > 1 {
        buf += (2.0 * (st.trainable + st.trainable_experts)).min(0.25e9);
    }
    let allocated = st.total() + activations + buf;
    let frag = allocated * FRAGMENTATION;
    let total = allocated + frag;
    let bd = MemoryBreakdown {
        weights: st.weights as u64,
        gradients: st.grads as u64,
        optimizer: st.optimizer as u64,
        activations: activations as u64,
        kv_cache: 0,
        comm_buffers: buf as u64,
        fragmentation: frag as u64,
        total: total as u64,
        usable: c.usable as u64,
    };
    StageMemory { breakdown: bd, states: st, total }
}

/// Memory of one GPU of one pipeline stage.
#[derive(Debug, Clone, Copy)]
pub struct StageMemory {
    pub breakdown: MemoryBreakdown,
    /// The stage's model states.
    pub states: States,
    /// Total bytes, unrounded.
    pub total: f64,
}

/// Per-GPU memory of a configuration: the first, a middle and the last pipeline stage are
/// costed with [`stage_memory`] and the largest is reported.
pub fn memory(c: &TrainCtx, cfg: &Config) -> Memory {
    let terms = memory_terms(c, cfg);
    // (stage index, layers) of the first, the last and a middle stage.
    let sp_ = &cfg.split;
    let mut stages: [(u32, u32); 3] = [(0, 0); 3];
    let n = if cfg.pp == 1 {
        stages[0] = (0, sp_.first);
        1
    } else {
        stages[0] = (0, sp_.first);
        stages[1] = (cfg.pp - 1, sp_.last);
        if cfg.pp >= 3 {
            stages[2] = (1, sp_.mid);
            3
        } else {
            2
        }
    };
    let mut best: Option<StageMemory> = None;
    let mut largest_states = States::default();
    let mut host = 0.0f64;
    for &(stage, layers) in &stages[..n] {
        let sm = stage_memory(c, cfg, &terms, stage, layers);
        let st = sm.states;
        if st.total() + st.host >= largest_states.total() + largest_states.host {
            largest_states = st;
        }
        host = host.max(st.host);
        if best.as_ref().is_none_or(|b| sm.total > b.total) {
            best = Some(sm);
        }
    }
    let breakdown = best.map(|b| b.breakdown).unwrap_or_default();
    let gpus_on_node = f64::from(c.gpus_per_node.min(cfg.gpus()).max(1));
    Memory { breakdown, states: largest_states, host_per_node: host * gpus_on_node }
}

impl Memory {
    /// Fits in GPU memory, and offloaded states fit in 80% of the host memory.
    pub fn fits(&self, c: &TrainCtx) -> bool {
        self.breakdown.total as f64 <= c.usable && self.host_per_node <= 0.8 * c.host_memory
    }
}

/// Predicted timing of a configuration.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timing {
    pub step: f64,
    pub bubble: f64,
    pub tp_comm: f64,
    pub cp_comm: f64,
    pub ep_comm: f64,
    pub pp_comm: f64,
    pub dp_comm: f64,
    /// CPU offload: exposed PCIe transfers and the CPU Adam step.
    pub offload: f64,
    pub hardware_flops_per_step: f64,
}

fn ring(n: u32) -> f64 {
    let n = f64::from(n.max(1));
    (n - 1.0) / n
}

/// CPU Adam (DeepSpeed's vectorised CPUAdam) parameters updated per second per node.
const CPU_ADAM_PARAMS_PER_S: f64 = 2.0e9;
/// Fraction of the ring-attention K/V exchange hidden behind the attention kernels.
const CP_OVERLAP: f64 = 0.8;
/// Router, top-k, permute and unpermute time per routed token copy per MoE layer (forward and
/// backward), fitted to the Megatron-Bridge 25.11 MoE runs on H100 and B200 (see
/// `docs/planner-calibration.md`).
const MOE_OVERHEAD_S_PER_ROUTED_TOKEN: f64 = 0.32e-6;
/// Fraction of the MoE all-to-all not hidden (Megatron-Core overlaps little by default).
const A2A_EXPOSED: f64 = 1.0;
/// Fraction of an all-to-all exposed when the EP group leaves the node: the published recipes
/// that run EP over the node network overlap it with another micro-batch's computation
/// (`--overlap-moe-expert-parallel-comm`, Qwen3-235B on H100) or send each token once per node and
/// fan it out over NVLink (HybridEP / DeepEP, DeepSeek-V3 on H100). Fitted to those two
/// Megatron-Bridge runs (TP 2 x PP 8 x VP 4 on 256 and 1,024 H100, EP 32 and 64 over 4 and 8
/// nodes), which leave about 40-45% of the all-to-all the NICs' bandwidth implies exposed; see
/// `docs/planner-calibration.md`.
const A2A_CROSS_NODE_EXPOSED: f64 = 0.5;

/// Time of one layer for one micro-batch (forward and backward) on one GPU of a configuration,
/// and of the LM head; they depend on TP, CP, EP, SP, recompute and the micro-batch, not on the
/// stage.
#[derive(Debug, Clone, Copy)]
pub struct LayerTime {
    /// Compute plus exposed TP, CP and EP communication and MoE routing of one layer.
    pub per_layer: f64,
    /// The LM head (last stage only).
    pub head: f64,
    /// Exposed TP communication of one layer.
    pub tp: f64,
    /// Exposed CP communication of one layer.
    pub cp: f64,
    /// Exposed EP communication of one layer.
    pub ep: f64,
}

/// Per-layer and LM-head time of a configuration (see the module docs for the formula).
pub fn layer_time(c: &TrainCtx, cfg: &Config) -> LayerTime {
    let t = f64::from(cfg.tp);
    let b = f64::from(cfg.micro_batch);
    // Tokens of one micro-batch on this GPU (context parallelism splits the sequence).
    let tokens_mb = b * c.seq / f64::from(cfg.cp);

    let (gemm_rc, attn_rc, elem_rc) = match cfg.recompute {
        Recompute::None => (1.0, 1.0, 1.0),
        Recompute::Selective => (1.0, 16.0 / 12.0, 1.0),
        Recompute::Full => {
            // One extra forward: 2 of the 6 (train) or 4 (LoRA) flops per parameter.
            let g = if c.lora { 6.0 / 4.0 } else { 8.0 / 6.0 };
            (g, 16.0 / 12.0, 4.0 / 3.0)
        }
    };
    let replicated = if cfg.tp == 1 || cfg.sp { 1.0 / t } else { (10.0 + 24.0 / t) / 34.0 };
    let hidden_shard = c.h / t;
    let shape = hidden_shard / (hidden_shard + SHAPE_HIDDEN) * tokens_mb / (tokens_mb + SHAPE_TOKENS);
    // Grouped expert GEMMs see the tokens routed to each local expert: the copies the EP group's
    // ranks route to it (each rank the `1/tp` of the tokens sequence parallelism leaves it, an
    // `etp`-way split expert all its TP group's), over a hidden size split `etp` ways.
    let expert_shape = if c.experts > 0 {
        let etp = f64::from(cfg.etp);
        let per_expert = tokens_mb / t * etp * c.top_k * c.capacity * f64::from(cfg.ep) / f64::from(c.experts);
        let expert_hidden = c.h / etp;
        expert_hidden / (expert_hidden + SHAPE_HIDDEN) * per_expert / (per_expert + SHAPE_TOKENS)
    } else {
        1.0
    };
    let gemm_rate = c.peak * c.gemm_eff;
    let attn_layer = tokens_mb * c.attn_tok_layer * attn_rc / t / (c.bf16_peak * c.attn_eff);
    let layer_compute = tokens_mb * c.gemm_tok_layer * gemm_rc / t / (gemm_rate * shape)
        + tokens_mb * c.expert_gemm_tok_layer * c.capacity * gemm_rc / t / (gemm_rate * expert_shape.max(1e-3))
        + attn_layer
        + tokens_mb * ELEMENTWISE_BYTES_PER_H * c.h * elem_rc * replicated / (c.mem_bw * 0.8);
    let head = tokens_mb * c.head_tok / t / (gemm_rate * shape);

    // Tensor parallel: 2 all-reduces (or RS+AG with SP, same volume) per layer forward and 2
    // backward, 2 more when the forward is recomputed.
    let passes = if cfg.recompute == Recompute::Full { 6.0 } else { 4.0 };
    let mut tp_layer = 0.0;
    if cfg.tp > 1 {
        let (bw, lat) = c.net.tp(cfg.tp);
        let bytes = tokens_mb * c.h * 2.0;
        let per = 2.0 * ring(cfg.tp) * bytes / bw + lat;
        let exposed = if cfg.sp { TP_EXPOSED_SP } else { TP_EXPOSED };
        tp_layer = passes * per * exposed;
    }
    // Context parallel (ring attention): cp-1 K/V chunks pass each rank forward, K/V and their
    // gradients backward; mostly hidden behind the attention of the same layer.
    let mut cp_layer = 0.0;
    if cfg.cp > 1 {
        let (bw, lat) = c.net.group(cfg.cp, cfg.tp);
        let chunk = 2.0 * tokens_mb * c.kv_dim * 2.0 / t;
        // One ring pass forward, two backward (K/V and their gradients), one more forward when
        // it is recomputed.
        let rings = if cfg.recompute == Recompute::Full { 4.0 } else { 3.0 };
        let steps = f64::from(cfg.cp - 1) * rings;
        let comm = steps * (chunk / bw + lat);
        cp_layer = (comm - CP_OVERLAP * attn_layer).max(0.1 * comm);
    }
    // Expert parallel: all-to-all dispatch and combine of the routed tokens, forward and backward
    // (and again for a recomputed forward), over the EP group: `ep` ranks `etp` apart (Megatron-Core's
    // expert rank order, tp-ep-dp-pp with `etp` in place of `tp`).
    let mut ep_layer = 0.0;
    if cfg.ep > 1 {
        let bytes = tokens_mb / t * c.top_k * c.capacity * c.h * 2.0;
        let span = u64::from(cfg.ep) * u64::from(cfg.etp);
        let exposed = if span > u64::from(c.gpus_per_node) { A2A_CROSS_NODE_EXPOSED } else { A2A_EXPOSED };
        ep_layer = c.moe_fraction * passes * c.net.all_to_all(cfg.ep, cfg.etp, bytes) * exposed;
    }
    // MoE layers also pay router, top-k, permutation and unpermutation per routed token copy;
    // published Megatron-Core MoE runs sit far below their GEMM throughput because of it.
    let moe_overhead = if c.experts > 0 {
        c.moe_fraction * tokens_mb / t * c.top_k * MOE_OVERHEAD_S_PER_ROUTED_TOKEN * elem_rc
    } else {
        0.0
    };
    let per_layer = layer_compute + tp_layer + cp_layer + ep_layer + moe_overhead;
    LayerTime { per_layer, head, tp: tp_layer, cp: cp_layer, ep: ep_layer }
}

/// Pipeline p2p time of a step: `one` is the transfer of one micro-batch's activations over a
/// stage boundary; each way once per boundary while filling and draining, the steady state
/// mostly overlapped (10% exposed).
pub fn pipeline_p2p(one: f64, p: f64, m: f64, v: f64) -> f64 {
    2.0 * one * ((p - 1.0) + 0.1 * m * v)
}

/// Bytes of one micro-batch's activations crossing a stage boundary.
pub fn p2p_bytes(c: &TrainCtx, cfg: &Config) -> f64 {
    let tokens_mb = f64::from(cfg.micro_batch) * c.seq / f64::from(cfg.cp);
    tokens_mb * c.h * 2.0 / if cfg.sp { f64::from(cfg.tp) } else { 1.0 }
}

/// The bandwidth and latency of a configuration's gradient reduction over its `dp * cp` ranks
/// (data-parallel groups are spaced `tp * cp * pp` apart).
pub fn dp_group(c: &TrainCtx, cfg: &Config) -> (f64, f64) {
    if cfg.dp > 1 {
        let (bd, ld) = c.net.group(cfg.dp, cfg.tp * cfg.cp * cfg.pp);
        if cfg.cp > 1 {
            let (bc, lc) = c.net.group(cfg.cp, cfg.tp);
            (bd.min(bc), ld.max(lc))
        } else {
            (bd, ld)
        }
    } else {
        c.net.group(cfg.cp, cfg.tp)
    }
}

/// Exposed data-parallel gradient reduction over the `dp * cp` ranks (expert gradients over
/// the [`Config::expert_dp`] ranks) and ZeRO-3 parameter gathers of a stage with model states `st`, over a group
/// of bandwidth and latency `group`; `per_mb` is the stage's time per micro-batch (the backward,
/// two thirds of it, hides up to 70%), `stage_layers` its layers (one collective latency each).
pub fn dp_comm(c: &TrainCtx, cfg: &Config, st: &States, group: (f64, f64), per_mb: f64, stage_layers: f64) -> f64 {
    let reducers = cfg.dp * cfg.cp;
    if reducers <= 1 && cfg.expert_dp() <= 1 {
        return 0.0;
    }
    let m = f64::from(cfg.grad_accum());
    let (bw, lat) = group;
    let expert_reducers = cfg.expert_dp();
    // Expert gradients reduce over the ranks holding the same experts: `tp*cp*dp/(etp*ep)` of
    // them, `etp*ep` apart, so each of a node's GPUs sends its own flow through the NICs.
    let expert_bw =
        if cfg.ep > 1 && expert_reducers > 1 { c.net.group(expert_reducers, cfg.etp * cfg.ep).0 } else { bw };
    let half =
        ring(reducers) * 2.0 * st.trainable + ring(expert_reducers) * 2.0 * st.trainable_experts * (bw / expert_bw);
    let backward = per_mb * 2.0 / 3.0;
    let (volume, window, overlap, collectives) = match cfg.zero {
        0 | 1 => (2.0 * half, backward, DP_OVERLAP, 1.0),
        2 => (half * (m + 1.0), backward * m, DP_OVERLAP, m + 1.0),
        _ => {
            let base = if c.lora { ring(reducers) * 2.0 * st.stage_params } else { half };
            let ov = if cfg.pp > 1 { ZERO3_OVERLAP_PP } else { ZERO3_OVERLAP };
            ((2.0 * base + half) * m, per_mb * m, ov, 3.0 * m)
        }
    };
    let raw = volume / bw + collectives * stage_layers * lat;
    raw - overlap * raw.min(window)
}

/// Optimizer update time of a stage with model states `st`, and the part of it that is CPU
/// offload: Adam streams ~28 bytes per locally owned trainable parameter on the GPU; with CPU
/// offload the gradients go down and the parameters come back over PCIe (half hidden behind the
/// backward) and the CPU updates every GPU's share of the node.
pub fn optimizer_time(c: &TrainCtx, cfg: &Config, st: &States) -> (f64, f64) {
    let m = f64::from(cfg.grad_accum());
    let reducers = cfg.dp * cfg.cp;
    let trainable = st.trainable + st.trainable_experts;
    // ZeRO shards the expert states over their own data-parallel ranks (see `stage_states`).
    let owned = if cfg.zero >= 1 {
        st.trainable / f64::from(reducers.max(1)) + st.trainable_experts / f64::from(cfg.expert_dp())
    } else {
        trainable
    };
    match cfg.offload {
        Offload::None => (28.0 * owned / (c.mem_bw * 0.8), 0.0),
        o => {
            let mut pcie = 2.0 * 2.0 * owned / c.host_link_bw * 0.5;
            if o == Offload::OptimizerAndParams {
                // Parameters stream in for every forward and backward of every micro-batch.
                pcie += m * 2.0 * 2.0 * st.stage_params / f64::from(reducers.max(1)) / c.host_link_bw * 0.5;
            }
            let cpu = owned * f64::from(c.gpus_per_node.min(cfg.gpus()).max(1)) / CPU_ADAM_PARAMS_PER_S;
            let offload = pcie + cpu;
            (offload, offload)
        }
    }
}

/// Step time of a configuration (see the module docs for the formula).
pub fn timing(c: &TrainCtx, cfg: &Config, st: &States) -> Timing {
    let p = f64::from(cfg.pp);
    let v = f64::from(cfg.vp);
    let m = f64::from(cfg.grad_accum());
    let lt = layer_time(c, cfg);
    let (per_layer, head) = (lt.per_layer, lt.head);
    // The slowest stage sets the pace: the first (embedding lookup is free), a middle one, or the
    // last with the LM head.
    let sp_ = &cfg.split;
    let per_mb = if cfg.pp == 1 {
        f64::from(sp_.first) * per_layer + head
    } else {
        let mut worst = (f64::from(sp_.first) * per_layer).max(f64::from(sp_.last) * per_layer + head);
        if cfg.pp >= 3 {
            worst = worst.max(f64::from(sp_.mid) * per_layer);
        }
        worst
    };
    let stage_layers = f64::from(sp_.max_layers(cfg.pp));
    let bubble = (p - 1.0) / v * per_mb;

    // Pipeline p2p: s*b*h activations each way per micro-batch per chunk boundary; mostly
    // overlapped except while filling and draining.
    let mut pp_comm = 0.0;
    if cfg.pp > 1 {
        let (bw, lat) = c.net.group(cfg.pp, cfg.tp * cfg.cp);
        let one = p2p_bytes(c, cfg) / bw + lat;
        pp_comm = pipeline_p2p(one, p, m, v);
    }

    // Data parallel gradient reduction over dp * cp ranks (expert gradients over dp * cp / ep),
    // and ZeRO-3 parameter gathers.
    let dp_comm = dp_comm(c, cfg, st, dp_group(c, cfg), per_mb, stage_layers);
    let (optimizer, offload) = optimizer_time(c, cfg, st);

    let step = m * per_mb + bubble + pp_comm + dp_comm + optimizer;
    let hardware_flops_per_step = c.model_flops_per_step(cfg.global_batch) * hardware_ratio(c, cfg.recompute);
    let in_pipe = m + (p - 1.0) / v;
    Timing {
        step,
        bubble,
        tp_comm: lt.tp * stage_layers * in_pipe,
        cp_comm: lt.cp * stage_layers * in_pipe,
        ep_comm: lt.ep * stage_layers * in_pipe,
        pp_comm,
        dp_comm,
        offload,
        hardware_flops_per_step,
    }
}

/// Executed flops / model flops for a recompute policy.
fn hardware_ratio(c: &TrainCtx, rc: Recompute) -> f64 {
    let gemm = c.gemm_tok_layer + c.expert_gemm_tok_layer;
    let l = f64::from(c.layers);
    let model = l * (gemm + c.attn_tok_layer) + c.head_tok;
    let extra = match rc {
        Recompute::None => 0.0,
        Recompute::Selective => l * c.attn_tok_layer / 3.0,
        Recompute::Full => {
            let fwd_gemm = if c.lora { gemm / 2.0 } else { gemm / 3.0 };
            l * (fwd_gemm + c.attn_tok_layer / 3.0)
        }
    };
    if model > 0.0 { (model + extra) / model } else { 1.0 }
}
