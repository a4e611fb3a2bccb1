//! Inference planning: the smallest tensor-parallel degree that holds the weights and the
//! KV cache, replicated over the cluster.
//!
//! - Weights: `2P` bytes (bf16/fp16) or `1P` (fp8), split over `tp` and, by the largest stage's
//!   share of the layers, over `pp` (stages may be uneven, as vLLM's layer partition allows).
//! - KV cache: `2 * layers * kv_heads * head_dim * 2` bytes per token, times context times
//!   sequences in flight, split over `min(tp, kv_heads) * pp` (KV heads are replicated when
//!   `tp > kv_heads`, as vLLM does; so inference allows `tp % kv_heads == 0`).
//! - Decode is memory-bandwidth bound: one step of all sequences reads the weights and the
//!   whole KV cache (context taken at its full length, conservative) at 75% of the HBM
//!   bandwidth, or is compute bound at 50% of peak, whichever is slower; plus 2 TP
//!   all-reduces per layer and the pipeline hops. Tokens/s = replicas * sequences / step.
//! - Prefill tokens/s: `2 * P_active + 2 * l * h * context` flops per token at 55% of peak.
//! - Diffusion models: data-parallel replicas; images/s = GPUs * 40% peak / (steps * 2
//!   (classifier-free guidance) * flops per step). Uncalibrated.

use super::cost::{self, FRAGMENTATION, Net, Split};
use super::train::divisors;
use super::types::{
    Cluster, InferenceSpec, MemoryBreakdown, ModelArch, Offload, Pins, Plan, Precision, Recompute, StageSplit,
    WorkloadKind, count,
};

const WORKSPACE_BYTES: f64 = 1.0e9;
const DIFFUSION_WORKSPACE_BYTES: f64 = 4.0e9;
const DECODE_BW_EFF: f64 = 0.75;
const DECODE_COMPUTE_EFF: f64 = 0.5;
const PREFILL_EFF: f64 = 0.55;
const DIFFUSION_EFF: f64 = 0.4;

/// Outcome of an inference search.
pub struct Outcome {
    pub plans: Vec<Plan>,
    pub evaluated: u64,
    pub feasible: u64,
    pub min_needed: f64,
    pub any_divisible: bool,
}

fn peak(cluster: &Cluster, precision: Precision) -> f64 {
    match precision {
        Precision::Fp8 => cluster.gpu.fp8_tflops.unwrap_or(cluster.gpu.bf16_tflops) * 1e12,
        _ => cluster.gpu.bf16_tflops * 1e12,
    }
}

fn breakdown(weights: f64, kv: f64, act: f64, buffers: f64, usable: f64) -> MemoryBreakdown {
    let allocated = weights + kv + act + buffers;
    let frag = allocated * FRAGMENTATION;
    MemoryBreakdown {
        weights: weights as u64,
        gradients: 0,
        optimizer: 0,
        activations: act as u64,
        kv_cache: kv as u64,
        comm_buffers: buffers as u64,
        fragmentation: frag as u64,
        total: (allocated + frag) as u64,
        usable: usable as u64,
    }
}

#[allow(clippy::too_many_arguments)]
fn base_plan(
    tp: u32,
    pp: u32,
    replicas: u32,
    concurrent: u32,
    mem: MemoryBreakdown,
    step: f64,
    tokens_per_s: f64,
    tflops: f64,
    mfu: f64,
    comm_fraction: f64,
    calibrated: bool,
) -> Plan {
    Plan {
        workload: WorkloadKind::Inference,
        tp,
        pp,
        dp: replicas,
        cp: 1,
        ep: 1,
        etp: None,
        layers_per_stage: Vec::new(),
        stage_split: StageSplit::Even,
        offload: Offload::None,
        host_memory_per_node_bytes: 0,
        global_batch: 0,
        idle_gpus: 0,
        notes: Vec::new(),
        vp: 1,
        micro_batch: concurrent,
        grad_accum: 1,
        zero_stage: 0,
        sequence_parallel: false,
        recompute: Recompute::None,
        replicas,
        memory_per_gpu_bytes: mem.total,
        memory: mem,
        step_time_s: step,
        tokens_per_s,
        prefill_tokens_per_s: None,
        images_per_s: None,
        tflops_per_gpu: tflops,
        hardware_tflops_per_gpu: tflops,
        mfu,
        bubble_fraction: 0.0,
        comm_fraction,
        calibrated,
        summary: String::new(),
        explanation: String::new(),
    }
}

/// Searches (tp, pp) for serving; plans ranked by tokens/s (images/s), then memory.
pub fn search(model: &ModelArch, cluster: &Cluster, spec: &InferenceSpec, pins: &Pins, top_n: usize) -> Outcome {
    let n = cluster.total_gpus();
    let usable = cost::usable_bytes(cluster.gpu.memory_bytes);
    let calibrated = cost::profile(&cluster.gpu).calibrated;
    let pk = peak(cluster, spec.precision);
    let mut out =
        Outcome { plans: Vec::new(), evaluated: 0, feasible: 0, min_needed: f64::INFINITY, any_divisible: false };

    if let Some(d) = model.diffusion {
        out.evaluated = 1;
        out.any_divisible = true;
        if pins.tp.is_some_and(|x| x != 1) || pins.pp.is_some_and(|x| x != 1) || pins.dp.is_some_and(|x| x != n) {
            out.any_divisible = false;
            return out;
        }
        let mem = breakdown(model.param_count() as f64 * 2.0, 0.0, DIFFUSION_WORKSPACE_BYTES, 0.0, usable);
        out.min_needed = mem.total as f64;
        if mem.total as f64 > usable {
            return out;
        }
        out.feasible = 1;
        let flops_per_image = f64::from(d.steps) * 2.0 * d.tflops_per_step * 1e12;
        let per_gpu = pk * DIFFUSION_EFF / flops_per_image;
        let images = per_gpu * f64::from(n);
        let mut plan =
            base_plan(1, 1, n, 1, mem, 1.0 / per_gpu, 0.0, per_gpu * flops_per_image / 1e12, DIFFUSION_EFF, 0.0, false);
        plan.images_per_s = Some(images);
        plan.summary = format!(
            "Each of the {} GPUs makes images on its own, about one every {}: {:.2} images/s in total.",
            n,
            super::types::duration(1.0 / per_gpu),
            images
        );
        plan.explanation = format!(
            "{}, one per GPU; each image takes about {:.1} s ({} steps with classifier-free guidance), {:.2} images/s in total; {:.1} of {:.1} GB used. Images/s estimate, uncalibrated.",
            count(n, "data-parallel replica", "data-parallel replicas"),
            1.0 / per_gpu,
            d.steps,
            images,
            mem.total as f64 / 1e9,
            usable / 1e9
        );
        out.plans.push(plan);
        return out;
    }

    let net = Net::new(cluster);
    let weight_bytes = model.param_count() as f64 * if spec.precision == Precision::Fp8 { 1.0 } else { 2.0 };
    let active = model.active_param_count() as f64;
    let kv_total = model.kv_bytes_per_token() as f64 * f64::from(spec.context_len) * f64::from(spec.concurrent_seqs);
    let h = f64::from(model.hidden);
    let l = f64::from(model.layers);
    let conc = f64::from(spec.concurrent_seqs);
    let bw = cluster.gpu.mem_bandwidth_gb_s * 1e9 * DECODE_BW_EFF;
    let gpn = cluster.gpus_per_node;
    let mut cands: Vec<(f64, Plan)> = Vec::new();
    let mut splits: Vec<Split> = Vec::new();

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
            let t = f64::from(tp);
            let p = f64::from(pp);
            let kv_split = f64::from(tp.min(model.kv_heads));
            let weights = weight_bytes / t * stage_share;
            let kv = kv_total / kv_split * stage_share;
            let act = WORKSPACE_BYTES + 0.02 * weights;
            let buffers = if tp > 1 { 0.1e9 } else { 0.0 };
            let mem = breakdown(weights, kv, act, buffers, usable);
            out.min_needed = out.min_needed.min(mem.total as f64);
            if mem.total as f64 > usable {
                continue;
            }
            out.feasible += 1;
            let mem_time = (weight_bytes / t + kv_total / kv_split) / bw;
            let compute_time = 2.0 * active * conc / t / (pk * DECODE_COMPUTE_EFF);
            let mut comm = 0.0;
            if tp > 1 {
                let (tbw, lat) = net.tp(tp);
                let bytes = conc * h * 2.0;
                comm += l * 2.0 * (2.0 * f64::from(tp - 1) / t * bytes / tbw + lat);
            }
            if pp > 1 {
                let (pbw, lat) = net.group(pp, tp);
                comm += (p - 1.0) * (conc * h * 2.0 / pbw + lat);
            }
            let step = mem_time.max(compute_time) + comm;
            let tokens = f64::from(replicas) * conc / step;
            let tflops = tokens * 2.0 * active / f64::from(n) / 1e12;
            let prefill_flop_per_token = 2.0 * active + 2.0 * l * h * f64::from(spec.context_len);
            let prefill = f64::from(n) * pk * PREFILL_EFF / prefill_flop_per_token;
            let mut plan = base_plan(
                tp,
                pp,
                replicas,
                spec.concurrent_seqs,
                mem,
                step,
                tokens,
                tflops,
                tflops * 1e12 / pk,
                comm / step,
                calibrated,
            );
            plan.prefill_tokens_per_s = Some(prefill);
            plan.layers_per_stage = split.layers_per_stage(pp);
            plan.stage_split = split.kind;
            let bound = if mem_time >= compute_time { "memory-bandwidth" } else { "compute" };
            let split = if pp > 1 { format!("TP {tp} x PP {pp}") } else { format!("TP {tp}") };
            let mut text = format!(
                "{split} per replica ({} each), {}; weights {:.1} GB + KV cache {:.1} GB ({} x {} tokens) fit in {:.1} of {:.1} GB per GPU; decode is {bound} bound: {:.0} generated tokens/s in total ({:.1} ms per step), prefill about {:.0} tokens/s.",
                count(tp * pp, "GPU", "GPUs"),
                count(replicas, "replica", "replicas"),
                weights / 1e9,
                kv / 1e9,
                count(spec.concurrent_seqs, "sequence", "sequences"),
                spec.context_len,
                mem.total as f64 / 1e9,
                usable / 1e9,
                tokens,
                step * 1e3,
                prefill,
            );
            if !calibrated {
                text.push_str(" Uncalibrated, conservative: no published runs for this GPU.");
            }
            plan.summary = format!(
                "{} of the model{} serve {} at once: about {:.0} generated tokens/s in total, a new token for every \
                 sequence each {}; prompts are read at about {:.0} tokens/s.",
                count(replicas, "copy", "copies"),
                if tp * pp > 1 { format!(", each on {} GPUs,", tp * pp) } else { ", each on one GPU,".to_string() },
                count(spec.concurrent_seqs * replicas, "sequence", "sequences"),
                tokens,
                super::types::duration(step),
                prefill,
            );
            plan.explanation = text;
            cands.push((tokens, plan));
        }
    }
    cands.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then(a.1.memory_per_gpu_bytes.cmp(&b.1.memory_per_gpu_bytes))
            .then((a.1.tp, a.1.pp).cmp(&(b.1.tp, b.1.pp)))
    });
    out.plans = cands.into_iter().take(top_n).map(|(_, p)| p).collect();
    out
}
