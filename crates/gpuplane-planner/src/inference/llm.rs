//! Language-model serving: every `(tp, pp)` split of a replica that divides the model and fits,
//! at the concurrency (sequences in flight per replica) that gives the most generated tokens/s
//! within the request's bounds on time to first token (TTFT) and time per output token (TPOT).
//!
//! Per replica of `tp x pp` GPUs, with `B` sequences in flight, prompts of `I` tokens and `O`
//! generated tokens per request:
//!
//! ```text
//! memory   = weights/(tp*pp) + B * context * kv_bytes/token / (min(tp, kv_heads) * pp) + workspace, +5%
//!            (weights 2 bytes/param, 1 for fp8; KV at its own precision, 1 or 2 bytes; KV heads are
//!            replicated when tp > kv_heads, as vLLM does)
//! decode   = max(weights/tp / (80% HBM) + B * (I + O/2) * kv_bytes/token / kv_split / (70% HBM),
//!                B * (2 P + 4 l q (I + O/2)) / tp / (eff * peak))             memory- or compute-bound
//!          + 2 l (allreduce latency + 2(tp-1)/tp * B h 2 / link)                TP, per layer
//!          + 0.5 ms + l * (15 us + B * 0.4 us)                                  per-step overhead
//! prefill  = I * ((2 P + 2 l q I) / tp / (eff * peak) + 2 l * 2(tp-1)/tp * h 2 / link)   per request
//! TPOT     = decode + B * prefill / O        (prompts are prefilled between decode steps)
//! tokens/s = replicas * B / TPOT
//! TTFT     = prefill + ceil(I / 2048) * decode + the wait behind other prompts (M/D/1)
//! ```
//!
//! `P` counts the parameters multiplied per token (the input embedding is a lookup), `q` is the
//! query width (`heads * head_dim`), `eff` the serving efficiency at the peak of the math
//! precision ([`compute_efficiency`]), and the all-reduce latency `8 us + 5 us * tp` over NVLink
//! (25 us + 5 us * tp over PCIe): engines' custom all-reduce kernels, fitted so that TP 2 of a
//! 70B model matches NIM's measured inter-token latency and TP 8 of an 8B model is about 1.45x TP 1
//! at small batches, not 8x. The decode step reads the KV cache at the sequences' average context,
//! `I + O/2`; memory reserves each sequence's whole `context`. Weight-only FP8 (FP8 weights on a GPU
//! without FP8 tensor cores, e.g. A100) stores 1 byte per weight and computes at the BF16 peak.
//!
//! Without a fixed `concurrent_seqs`, every `B` from 1 to the most that fit (at most 2,048, an
//! engine's batch limit) is tried; the plan takes the smallest `B` within 1% of the best
//! throughput that meets the bounds. With a fixed one, plans that miss a bound are left out.
//! Pipeline stages only hold layers: a token still passes every stage in turn, so decode is not
//! faster with them (conservative; `pp` serves models too large for a node).

use super::common::{Base, Outcome, base_plan, breakdown, usable_bytes};
use crate::cost::{Net, Split};
use crate::train::divisors;
use crate::types::{
    Cluster, GpuSpec, InferenceSpec, LinkKind, ModelArch, Pins, Plan, Precision, ServingMetrics, count, duration,
};

const WORKSPACE_BYTES: f64 = 1.0e9;
/// Fraction of the HBM bandwidth that streaming the weights reaches.
const WEIGHT_BW_EFF: f64 = 0.8;
/// Fraction of the HBM bandwidth that paged attention reaches reading the KV cache.
const KV_BW_EFF: f64 = 0.7;
/// Scheduling, sampling set-up and launch of one decode step.
const STEP_FIXED_S: f64 = 0.5e-3;
/// Kernel launch gaps and tails, per layer per step.
const LAYER_OVERHEAD_S: f64 = 15e-6;
/// Per sequence per layer per step: the attention kernel's fixed work per sequence (its share of
/// the KV cache gets small as TP grows), the KV append and rotary embedding.
const SEQ_LAYER_OVERHEAD_S: f64 = 0.4e-6;
const ALLREDUCE_NVLINK_S: f64 = 8e-6;
const ALLREDUCE_PCIE_S: f64 = 25e-6;
const ALLREDUCE_PER_RANK_S: f64 = 5e-6;
/// Tokens of a prompt prefilled per step (chunked prefill).
const PREFILL_CHUNK_TOKENS: u32 = 2048;
/// The most sequences an engine batches per replica.
pub const MAX_SEQS_PER_REPLICA: u32 = 2048;
/// The searched concurrency is the smallest within this fraction of the best throughput.
const NEAR_BEST: f64 = 0.99;

/// Fraction of the peak (of the math precision: FP8 where the GPU has FP8 tensor cores and the
/// weights are FP8, else BF16) that prefill and compute-bound decode reach, fitted to TensorRT-LLM's
/// published throughput; and whether it was (the rest are guesses).
pub fn compute_efficiency(gpu: &GpuSpec, fp8_math: bool) -> (f64, bool) {
    match gpu.key.as_str() {
        "a100-40g" | "a100-80g" => (0.65, true),
        "h100" | "h200" => (if fp8_math { 0.5 } else { 0.52 }, true),
        "b200" => (if fp8_math { 0.42 } else { 0.5 }, false),
        _ => (if fp8_math { 0.35 } else { 0.4 }, false),
    }
}

/// The latency of one tensor-parallel all-reduce of a few kilobytes.
fn allreduce_latency(link: LinkKind, tp: u32) -> f64 {
    let base = match link {
        LinkKind::Nvlink => ALLREDUCE_NVLINK_S,
        LinkKind::Pcie => ALLREDUCE_PCIE_S,
    };
    base + ALLREDUCE_PER_RANK_S * f64::from(tp)
}

fn precision_bytes(p: Precision) -> f64 {
    if p == Precision::Fp8 { 1.0 } else { 2.0 }
}

/// The cost model of one replica split (`tp`, `pp`) at the workload's lengths.
#[derive(Debug, Clone, Copy)]
pub struct Replica {
    pub tp: u32,
    pub pp: u32,
    /// Bytes of weights each GPU streams per decode step (all stages, one after the other).
    weights_read: f64,
    /// KV bytes per token of context one GPU reads per decode step (all stages, one after the other).
    kv_per_token: f64,
    layers: f64,
    hidden: f64,
    bw: f64,
    peak_eff: f64,
    decode_flops: f64,
    /// Seconds of prefill per request (all its prompt tokens).
    prefill_s: f64,
    /// Decode steps a prompt's prefill spans.
    prefill_chunks: f64,
    allreduce_lat: f64,
    tp_bw: f64,
    pp_bw: f64,
    pp_lat: f64,
    avg_context: f64,
    output: f64,
}

/// What `B` sequences in flight cost on one replica.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    pub concurrency: u32,
    pub decode_step_s: f64,
    pub tpot_s: f64,
    pub ttft_s: f64,
    /// Generated tokens/s of the replica.
    pub tokens_per_s: f64,
    pub memory_bound: bool,
    /// Communication seconds per decode step.
    pub comm_s: f64,
}

impl Replica {
    /// The replica split `tp x pp` of `model` on `cluster` at `spec`'s lengths and precisions.
    pub fn new(model: &ModelArch, cluster: &Cluster, spec: &InferenceSpec, tp: u32, pp: u32) -> Self {
        let net = Net::new(cluster);
        let t = f64::from(tp);
        let l = f64::from(model.layers);
        let h = f64::from(model.hidden);
        let q = f64::from(model.heads) * model.head_dim() as f64;
        // The input embedding is looked up, not multiplied nor streamed (a tied one is the LM head).
        let lookup = if model.tied_embeddings { 0.0 } else { model.embedding_params() as f64 };
        let matmul = (model.active_param_count() as f64 - lookup).max(1.0);
        let streamed = (model.param_count() as f64 - lookup).max(1.0);
        let fp8_math = spec.precision == Precision::Fp8 && cluster.gpu.fp8_tflops.is_some();
        let peak =
            if fp8_math { cluster.gpu.fp8_tflops.unwrap_or(cluster.gpu.bf16_tflops) } else { cluster.gpu.bf16_tflops };
        let (eff, _) = compute_efficiency(&cluster.gpu, fp8_math);
        let peak_eff = peak * 1e12 * eff;
        let kv_split = f64::from(tp.min(model.kv_heads.max(1)));
        let kv_per_token = model.kv_bytes_per_token() as f64 / 2.0 * precision_bytes(spec.kv_precision) / kv_split;
        let input = f64::from(spec.input_len);
        let output = f64::from(spec.output_len);
        let (tp_bw, _) = if tp > 1 { net.tp(tp) } else { (f64::INFINITY, 0.0) };
        let (pp_bw, pp_lat) = if pp > 1 { net.group(pp, tp) } else { (f64::INFINITY, 0.0) };
        let allreduce_lat = if tp > 1 { allreduce_latency(cluster.gpu.link, tp) } else { 0.0 };
        let act_bytes = h * 2.0;
        let prefill_flops = 2.0 * matmul + 2.0 * l * q * input;
        let mut per_token = prefill_flops / t / peak_eff;
        if tp > 1 {
            per_token += 2.0 * l * 2.0 * (t - 1.0) / t * act_bytes / tp_bw;
        }
        if pp > 1 {
            per_token += (f64::from(pp) - 1.0) * act_bytes / pp_bw;
        }
        let prefill_chunks = (f64::from(spec.input_len) / f64::from(PREFILL_CHUNK_TOKENS)).ceil().max(1.0);
        let avg_context = input + output / 2.0;
        Replica {
            tp,
            pp,
            weights_read: streamed * precision_bytes(spec.precision) / t,
            kv_per_token,
            layers: l,
            hidden: h,
            bw: cluster.gpu.mem_bandwidth_gb_s * 1e9,
            peak_eff,
            decode_flops: 2.0 * matmul + 4.0 * l * q * avg_context,
            prefill_s: input * per_token,
            prefill_chunks,
            allreduce_lat,
            tp_bw,
            pp_bw,
            pp_lat,
            avg_context,
            output,
        }
    }

    /// Seconds to prefill one request's prompt on this replica (alone).
    pub fn prefill_s(&self) -> f64 {
        self.prefill_s
    }

    /// Prompt tokens/s of the replica when it does nothing else.
    pub fn prefill_tokens_per_s(&self, input_len: u32) -> f64 {
        f64::from(input_len) / self.prefill_s.max(1e-12)
    }

    /// The cost of `b` sequences in flight.
    pub fn load(&self, b: u32) -> Load {
        let bf = f64::from(b);
        let t = f64::from(self.tp);
        let kv_read = bf * self.avg_context * self.kv_per_token;
        let mem_time = self.weights_read / (self.bw * WEIGHT_BW_EFF) + kv_read / (self.bw * KV_BW_EFF);
        let compute_time = bf * self.decode_flops / t / self.peak_eff;
        let act = bf * self.hidden * 2.0;
        let mut comm = 0.0;
        if self.tp > 1 {
            comm += 2.0 * self.layers * (self.allreduce_lat + 2.0 * (t - 1.0) / t * act / self.tp_bw);
        }
        if self.pp > 1 {
            comm += (f64::from(self.pp) - 1.0) * (act / self.pp_bw + self.pp_lat);
        }
        let overhead = STEP_FIXED_S + self.layers * (LAYER_OVERHEAD_S + bf * SEQ_LAYER_OVERHEAD_S);
        let decode = mem_time.max(compute_time) + comm + overhead;
        let prefill_share = bf * self.prefill_s / self.output;
        let tpot = decode + prefill_share;
        // The fraction of the time the replica prefills: a new prompt waits behind the others (M/D/1),
        // never longer than for every other sequence's prompt.
        let rho = (prefill_share / tpot).min(0.99);
        let wait = (rho / (2.0 * (1.0 - rho)) * self.prefill_s).min((bf - 1.0) * self.prefill_s);
        let ttft = self.prefill_s + self.prefill_chunks * decode + wait;
        Load {
            concurrency: b,
            decode_step_s: decode,
            tpot_s: tpot,
            ttft_s: ttft,
            tokens_per_s: bf / tpot,
            memory_bound: mem_time >= compute_time,
            comm_s: comm,
        }
    }
}

fn meets(load: &Load, spec: &InferenceSpec) -> bool {
    spec.ttft_s.is_none_or(|b| load.ttft_s <= b) && spec.tpot_s.is_none_or(|b| load.tpot_s <= b)
}

/// The concurrency to plan at among `1..=max_b` (or the fixed one): the smallest within 1% of the
/// most tokens/s that meets the bounds; `None` when none does.
pub fn pick_concurrency(replica: &Replica, spec: &InferenceSpec, max_b: u32) -> Option<Load> {
    if spec.fixed_concurrency {
        let load = replica.load(spec.concurrent_seqs);
        return meets(&load, spec).then_some(load);
    }
    let loads: Vec<Load> = (1..=max_b).map(|b| replica.load(b)).filter(|l| meets(l, spec)).collect();
    let best = loads.iter().map(|l| l.tokens_per_s).fold(0.0, f64::max);
    loads.into_iter().find(|l| l.tokens_per_s >= best * NEAR_BEST)
}

/// Searches `(tp, pp)` and the concurrency of each; plans ranked by tokens/s, then memory.
pub fn search(model: &ModelArch, cluster: &Cluster, spec: &InferenceSpec, pins: &Pins, top_n: usize) -> Outcome {
    let n = cluster.total_gpus();
    let usable = usable_bytes(&cluster.gpu);
    let fp8_math = spec.precision == Precision::Fp8 && cluster.gpu.fp8_tflops.is_some();
    let weight_only = spec.precision == Precision::Fp8 && !fp8_math;
    let (_, calibrated) = compute_efficiency(&cluster.gpu, fp8_math);
    let mut out = Outcome::empty();
    let weight_bytes = model.param_count() as f64 * precision_bytes(spec.precision);
    let kv_token = model.kv_bytes_per_token() as f64 / 2.0 * precision_bytes(spec.kv_precision);
    let gpn = cluster.gpus_per_node;
    let mut cands: Vec<(f64, Plan)> = Vec::new();
    let mut splits: Vec<Split> = Vec::new();
    // The best latencies any split that fits reaches (at one sequence), for the message when none meets the bounds.
    let mut fastest: Option<(f64, f64)> = None;

    for tp in divisors(n) {
        if pins.tp.is_some_and(|x| x != tp)
            || !model.heads.is_multiple_of(tp)
            || !(model.kv_heads.is_multiple_of(tp) || tp % model.kv_heads == 0)
            || !(gpn.is_multiple_of(tp) || tp % gpn == 0)
        {
            continue;
        }
        for pp in divisors(n / tp) {
            if pins.pp.is_some_and(|x| x != pp) || pp > model.layers {
                continue;
            }
            // Uneven stages are fine for serving (vLLM's layer partition): the largest stage counts.
            Split::options(model.layers, pp, 1, &mut splits);
            let Some(split) = splits.first().copied() else {
                continue;
            };
            let stage_share = f64::from(split.max_layers(pp)) / f64::from(model.layers.max(1));
            let replicas = n / tp / pp;
            if pins.dp.is_some_and(|x| x != replicas) {
                continue;
            }
            out.evaluated += 1;
            out.any_divisible = true;
            let kv_split = f64::from(tp.min(model.kv_heads));
            let weights = weight_bytes / f64::from(tp) * stage_share;
            let kv_seq = kv_token * f64::from(spec.context_len) / kv_split * stage_share;
            let act = WORKSPACE_BYTES + 0.02 * weights;
            let buffers = if tp > 1 { 0.1e9 } else { 0.0 };
            let mem_at = |b: u32| breakdown(weights, kv_seq * f64::from(b), act, buffers, usable);
            let least = if spec.fixed_concurrency { spec.concurrent_seqs } else { 1 };
            out.min_needed = out.min_needed.min(mem_at(least).total as f64);
            let room = usable / (1.0 + crate::cost::FRAGMENTATION) - weights - act - buffers;
            let fit = if room <= 0.0 { 0 } else { (room / kv_seq).floor().min(f64::from(u32::MAX)) as u32 };
            if fit < least {
                continue;
            }
            out.feasible += 1;
            let replica = Replica::new(model, cluster, spec, tp, pp);
            let one = replica.load(least);
            fastest = Some(fastest.map_or((one.ttft_s, one.tpot_s), |(a, b)| (a.min(one.ttft_s), b.min(one.tpot_s))));
            let max_b = fit.min(MAX_SEQS_PER_REPLICA);
            let Some(load) = pick_concurrency(&replica, spec, max_b) else {
                continue;
            };
            let b = load.concurrency;
            let mem = mem_at(b);
            let mut plan = to_plan(model, cluster, spec, &replica, &load, mem, replicas, fit, split, usable);
            plan.calibrated = calibrated;
            if weight_only {
                plan.notes.push(format!(
                    "weight-only FP8: {} has no FP8 tensor cores, so the FP8 weights (1 byte each) are computed in BF16 (W8A16, as vLLM's Marlin kernels serve them)",
                    cluster.gpu.name
                ));
            }
            cands.push((plan.tokens_per_s, plan));
        }
    }
    if cands.is_empty()
        && out.feasible > 0
        && let Some((ttft, tpot)) = fastest
    {
        out.unmet_bounds = Some(format!(
            "no split and concurrency meets the latency bounds ({}); the fastest, one sequence per replica, gives a time to first token of {} and {} per output token",
            bounds_text(spec),
            duration(ttft),
            duration(tpot)
        ));
    }
    cands.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then(a.1.memory_per_gpu_bytes.cmp(&b.1.memory_per_gpu_bytes))
            .then((a.1.tp, a.1.pp).cmp(&(b.1.tp, b.1.pp)))
    });
    out.plans = cands.into_iter().take(top_n).map(|(_, p)| p).collect();
    out
}

fn bounds_text(spec: &InferenceSpec) -> String {
    let mut parts = Vec::new();
    if let Some(b) = spec.ttft_s {
        parts.push(format!("time to first token at most {}", duration(b)));
    }
    if let Some(b) = spec.tpot_s {
        parts.push(format!("at most {} per output token", duration(b)));
    }
    parts.join(", ")
}

#[allow(clippy::too_many_arguments)]
fn to_plan(
    model: &ModelArch,
    cluster: &Cluster,
    spec: &InferenceSpec,
    replica: &Replica,
    load: &Load,
    mem: crate::types::MemoryBreakdown,
    replicas: u32,
    fit: u32,
    split: Split,
    usable: f64,
) -> Plan {
    let (tp, pp) = (replica.tp, replica.pp);
    let n = cluster.total_gpus();
    let b = load.concurrency;
    let tokens = f64::from(replicas) * load.tokens_per_s;
    let requests = tokens / f64::from(spec.output_len);
    let prompt_tokens = requests * f64::from(spec.input_len);
    let prefill_capacity = f64::from(replicas) * replica.prefill_tokens_per_s(spec.input_len);
    let flops_per_request = f64::from(spec.input_len) * (2.0 * model.active_param_count() as f64)
        + f64::from(spec.output_len) * replica.decode_flops;
    let tflops = requests * flops_per_request / f64::from(n) / 1e12;
    let peak = if spec.precision == Precision::Fp8 {
        cluster.gpu.fp8_tflops.unwrap_or(cluster.gpu.bf16_tflops)
    } else {
        cluster.gpu.bf16_tflops
    };
    let mut plan = base_plan(Base {
        tp,
        pp,
        replicas,
        concurrent: b,
        mem,
        step: load.tpot_s,
        tokens_per_s: tokens,
        tflops,
        mfu: tflops / peak,
        comm_fraction: load.comm_s / load.tpot_s,
        calibrated: false,
    });
    plan.prefill_tokens_per_s = Some(prefill_capacity);
    plan.layers_per_stage = split.layers_per_stage(pp);
    plan.stage_split = split.kind;
    plan.serving = Some(ServingMetrics {
        concurrency: b,
        concurrency_searched: !spec.fixed_concurrency,
        max_concurrency: fit,
        input_len: spec.input_len,
        output_len: spec.output_len,
        ttft_s: load.ttft_s,
        tpot_s: load.tpot_s,
        decode_step_s: load.decode_step_s,
        requests_per_s: requests,
        kv_cache_precision: spec.kv_precision,
        weight_only_fp8: spec.precision == Precision::Fp8 && cluster.gpu.fp8_tflops.is_none(),
    });
    let bound = if load.memory_bound { "memory-bandwidth" } else { "compute" };
    let split_text = if pp > 1 { format!("TP {tp} x PP {pp}") } else { format!("TP {tp}") };
    let chosen = if spec.fixed_concurrency {
        format!("{} per replica (as asked)", count(b, "sequence", "sequences"))
    } else if b >= fit.min(MAX_SEQS_PER_REPLICA) {
        format!("{} per replica (as many as the KV cache holds)", count(b, "sequence", "sequences"))
    } else {
        format!("{} per replica (searched: the most tokens/s within the bounds)", count(b, "sequence", "sequences"))
    };
    let kv_gpu = mem.kv_cache as f64;
    let mut text = format!(
        "{split_text} per replica ({} each), {}; {chosen}; weights {:.1} GB + KV cache {:.1} GB ({} bits, {} tokens per sequence) fit in {:.1} of {:.1} GB per GPU (up to {} per replica); \
         each request reads {} prompt tokens and generates {}: prefill {:.0} ms per prompt, decode step {:.1} ms ({bound} bound), {:.1} ms per output token with the prefills interleaved, \
         time to first token {}; {:.0} generated tokens/s and {:.0} prompt tokens/s in total ({:.2} requests/s).",
        count(tp * pp, "GPU", "GPUs"),
        count(replicas, "replica", "replicas"),
        mem.weights as f64 / 1e9,
        kv_gpu / 1e9,
        precision_bytes(spec.kv_precision) as u32 * 8,
        spec.context_len,
        mem.total as f64 / 1e9,
        usable / 1e9,
        count(fit.min(MAX_SEQS_PER_REPLICA), "sequence", "sequences"),
        spec.input_len,
        spec.output_len,
        replica.prefill_s() * 1e3,
        load.decode_step_s * 1e3,
        load.tpot_s * 1e3,
        duration(load.ttft_s),
        tokens,
        prompt_tokens,
        requests,
    );
    if !compute_efficiency(&cluster.gpu, spec.precision == Precision::Fp8 && cluster.gpu.fp8_tflops.is_some()).1 {
        text.push_str(" Uncalibrated: no published serving runs for this GPU.");
    }
    plan.summary = format!(
        "{} of the model{} serve {} at once: about {:.0} generated tokens/s in total ({:.1} requests/s of {} prompt and {} generated tokens), \
         a new token for every sequence each {}, the first after about {}.",
        count(replicas, "copy", "copies"),
        if tp * pp > 1 { format!(", each on {} GPUs,", tp * pp) } else { ", each on one GPU,".to_string() },
        count(b * replicas, "sequence", "sequences"),
        tokens,
        requests,
        spec.input_len,
        spec.output_len,
        duration(load.tpot_s),
        duration(load.ttft_s),
    );
    plan.explanation = text;
    plan
}
