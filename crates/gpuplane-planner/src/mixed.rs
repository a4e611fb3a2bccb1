//! Training plans over unlike GPUs: a cluster made of *parts*, each part one GPU model in
//! nodes of the same size (e.g. one node of 8 x A100 80GB plus two nodes of 4 x RTX 4090).
//!
//! The search space is small and exact (see `docs/planner-mixed.md` for a worked example):
//!
//! - every **replica** (data-parallel rank) is the same pipeline; `dp` divides the GPU count of
//!   every part used, and a part used gives all its GPUs (a part can be left out entirely);
//! - inside a replica, each part used holds a whole number of consecutive **pipeline stages**,
//!   all with the same **TP degree**; a TP group never leaves a node, so it is one GPU type
//!   (`tp` divides the part's GPUs per node and the heads, KV heads and hidden size, as in the
//!   homogeneous search), and the part's stages per replica are `gpus / (dp * tp)`;
//! - the parts used are tried in every order along the pipeline (the first stage keeps the most
//!   micro-batches in flight and the embedding, the last the LM head and the logits);
//! - **layers per stage** are uneven: each stage gets at least one layer and at most what its
//!   GPU's memory holds ([`cost::stage_memory`], binary search), and the rest go where they
//!   finish soonest: the layers are unit jobs on stages of speed `1 / per-layer time`
//!   ([`cost::layer_time`] on that stage's GPU and TP), which minimises the slowest stage
//!   exactly. The assignment starts from the proportional share (every slot that finishes by
//!   `layers / sum(1 / per-layer time)`), then adds layers one by one;
//! - knobs shared by the whole pipeline: the micro-batch, recompute `none` or `full`; sequence
//!   parallelism is on in every TP group and ZeRO-1 (distributed optimizer) on whenever
//!   `dp > 1`: in this cost model each of them is never slower and never needs more memory,
//!   and `selective` recompute needs the same memory as `none` (FlashAttention) but is slower,
//!   so the search does not try the dominated variants. No CP, EP, virtual stages or offload in
//!   a mix (a single part keeps them, see below);
//! - a mix whose ideal split (the slowest stage at `layers / sum(1 / per-layer time)`, the step
//!   `m + p - 1` of that) cannot beat the plans already kept is dropped before its memory caps
//!   are searched; the best plans are unchanged.
//!
//! Step time: the slowest stage sets the pace of the 1F1B pipeline, `m * T + (p - 1) * T`,
//! plus the pipeline p2p over its slowest boundary ([`cost::pipeline_p2p`]; a boundary between
//! two parts crosses the node network at the slower of the two sides' share of its node's NICs),
//! plus the slowest stage's data-parallel reduction and optimizer update
//! ([`cost::dp_comm`], [`cost::optimizer_time`]); replicas are identical, so the slowest replica
//! is every replica.
//!
//! Every part **alone** is also a candidate, planned by the homogeneous planner
//! ([`crate::plan`]) with all its knobs; so the best mixed plan is never predicted slower than
//! the best plan on the fastest single part, by construction. Plans are ranked as the
//! homogeneous planner ranks them: the requested batch on every GPU of the parts used first,
//! then more tokens/s, then less memory, then fewer parts.
//!
//! Not modelled yet: uneven data-parallel batch shares between unlike replicas (every replica
//! here is the same pipeline, so their shares are equal), and serving (inference) over a mix.

use super::cost::{self, Config, LayerTime, MemoryTerms, Split, TrainCtx};
use super::search;
use super::train::{MAX_MICRO_BATCH, batch_for, divisors, recompute_phrase};
use super::types::{
    Cluster, ClusterFields, MixedPartUse, MixedPlan, MixedPlanResult, MixedStage, ModelArch, ModelRef, Offload, Pins,
    Plan, PlanError, PlanInput, PlanRequest, Recompute, StageSplit, TrainSpec, Workload, WorkloadFields, WorkloadKind,
};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// Most parts a mixed request may have.
pub const MAX_PARTS: usize = 4;

/// A mixed-cluster planning request: the model and workload of a [`PlanRequest`], and the parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MixedPlanRequest {
    pub model: ModelRef,
    pub workload: WorkloadFields,
    /// One to [`MAX_PARTS`] parts, each one GPU model (`gpu` or `gpu_spec`), its GPU count,
    /// GPUs per node and node network, as a homogeneous request's `cluster`.
    pub parts: Vec<ClusterFields>,
    /// Plans to return (default 10, at most 1000).
    #[serde(default)]
    pub top_n: Option<u32>,
}

/// The validated input of [`plan_mixed`].
#[derive(Debug, Clone, PartialEq)]
pub struct MixedInput {
    /// Display name (preset name or "custom").
    pub model_name: String,
    pub model: ModelArch,
    /// Training or LoRA.
    pub workload: Workload,
    /// The parts, in request order.
    pub parts: Vec<Cluster>,
    /// Plans to return.
    pub top_n: usize,
}

impl MixedInput {
    /// The homogeneous request of part `i` alone (no pins).
    pub fn part_input(&self, i: usize) -> PlanInput {
        PlanInput {
            model_name: self.model_name.clone(),
            model: self.model.clone(),
            workload: self.workload,
            cluster: self.parts[i].clone(),
            pins: Pins::default(),
            top_n: self.top_n,
        }
    }

    /// The training workload, and whether it is LoRA; mixed plans cover training only.
    fn train_spec(&self) -> Result<(TrainSpec, bool), PlanError> {
        match self.workload {
            Workload::Train(t) => Ok((t, false)),
            Workload::Lora(t) => Ok((t, true)),
            Workload::Inference(_) => Err(inference_error()),
        }
    }
}

impl MixedPlanRequest {
    /// Validates the request: each part as a homogeneous request's cluster would be (errors
    /// name `parts[i].field`), training or LoRA only.
    pub fn resolve(&self) -> Result<MixedInput, PlanError> {
        if self.parts.is_empty() || self.parts.len() > MAX_PARTS {
            return Err(PlanError::invalid("parts", format!("give 1 to {MAX_PARTS} parts, got {}", self.parts.len())));
        }
        if self.workload.kind == WorkloadKind::Inference {
            return Err(inference_error());
        }
        let mut parts = Vec::with_capacity(self.parts.len());
        let mut first: Option<PlanInput> = None;
        for (i, part) in self.parts.iter().enumerate() {
            let req = PlanRequest {
                model: self.model.clone(),
                workload: self.workload.clone(),
                cluster: part.clone(),
                pins: Pins::default(),
                top_n: self.top_n,
            };
            let input = req.resolve().map_err(|e| part_field(e, i))?;
            parts.push(input.cluster.clone());
            first.get_or_insert(input);
        }
        let first = first.ok_or_else(|| PlanError::invalid("parts", "give at least one part"))?;
        Ok(MixedInput {
            model_name: first.model_name,
            model: first.model,
            workload: first.workload,
            parts,
            top_n: first.top_n,
        })
    }
}

fn inference_error() -> PlanError {
    PlanError::invalid("workload.kind", "mixed plans cover training and LoRA; plan serving on each pool on its own")
}

/// Renames a homogeneous request's `cluster.x` error to `parts[i].x` (and says which part a
/// precision error is about).
fn part_field(e: PlanError, i: usize) -> PlanError {
    match e {
        PlanError::Invalid { field, message } => match field.strip_prefix("cluster.") {
            Some(rest) => PlanError::Invalid { field: format!("parts[{i}].{rest}"), message },
            None if field == "workload.precision" => {
                PlanError::Invalid { field, message: format!("parts[{i}]: {message}") }
            }
            None => PlanError::Invalid { field, message },
        },
        other => other,
    }
}

impl MixedPlan {
    /// The plan as one pipeline of uneven stages that a runtime with one TP degree runs (the gpuplane runtime
    /// builds any `layers_per_stage`): the homogeneous [`Plan`] shape with this plan's degrees, its stages' layers
    /// and its predictions, for a job on exactly the parts' GPUs. Its ranks run stage after stage, so the parts'
    /// nodes go in the order of [`MixedPlan::part_order`]. Refused, with the reason: a plan that leaves GPUs of a
    /// part idle (the job starts every GPU it is given), runs on one part alone (its own homogeneous plan is
    /// `single_part`), or gives its parts different TP degrees (one tensor-parallel mesh dimension).
    pub fn as_uniform_plan(&self) -> Result<Plan, String> {
        if self.single_part.is_some() {
            return Err("it runs on one part alone".into());
        }
        if let Some(idle) = self.parts.iter().find(|p| p.idle_gpus > 0) {
            return Err(format!("it leaves {} GPUs of part {} idle", idle.idle_gpus, idle.part));
        }
        let tp = self.stages.first().map_or(1, |s| s.tp);
        if self.stages.iter().any(|s| s.tp != tp) {
            return Err("its parts have different TP degrees (the runtime runs one)".into());
        }
        let heaviest = self.stages.iter().max_by_key(|s| s.memory.total).map(|s| s.memory).unwrap_or_default();
        let comm =
            if self.step_time_s > 0.0 { (self.pp_comm_s + self.dp_and_optimizer_s) / self.step_time_s } else { 0.0 };
        let mut notes = self.notes.clone();
        notes.push(format!(
            "a mix of {} parts: stages hold {} layers, in the order of their parts along the pipeline; per-GPU TFLOP/s \
             and MFU are not given for unlike GPUs",
            self.parts_used,
            self.stages.iter().map(|s| s.layers.to_string()).collect::<Vec<_>>().join("+")
        ));
        Ok(Plan {
            workload: self.workload,
            tp,
            pp: self.pp,
            dp: self.dp,
            cp: 1,
            ep: 1,
            etp: None,
            layers_per_stage: self.stages.iter().map(|s| s.layers).collect(),
            stage_split: StageSplit::Uneven,
            offload: Offload::None,
            host_memory_per_node_bytes: 0,
            global_batch: self.global_batch,
            idle_gpus: 0,
            notes,
            vp: 1,
            micro_batch: self.micro_batch,
            grad_accum: self.grad_accum,
            zero_stage: self.zero_stage,
            sequence_parallel: self.sequence_parallel,
            recompute: self.recompute,
            replicas: self.dp,
            memory_per_gpu_bytes: self.memory_per_gpu_bytes,
            memory: heaviest,
            step_time_s: self.step_time_s,
            tokens_per_s: self.tokens_per_s,
            prefill_tokens_per_s: None,
            images_per_s: None,
            serving: None,
            tflops_per_gpu: 0.0,
            hardware_tflops_per_gpu: 0.0,
            mfu: 0.0,
            bubble_fraction: self.bubble_fraction,
            comm_fraction: comm,
            calibrated: self.calibrated,
            summary: format!(
                "One pipeline across GPUs of {} pools: one step in about {} ({:.0} tokens/s).",
                self.parts_used,
                super::types::duration(self.step_time_s),
                self.tokens_per_s
            ),
            explanation: self.explanation.clone(),
        })
    }

    /// The parts in the order their stages run along the pipeline (each part's stages are consecutive).
    pub fn part_order(&self) -> Vec<u32> {
        let mut order: Vec<u32> = Vec::new();
        for stage in &self.stages {
            if order.last() != Some(&stage.part) {
                order.push(stage.part);
            }
        }
        order
    }
}

/// Validates and plans a mixed request.
pub fn plan_mixed_request(req: &MixedPlanRequest) -> Result<MixedPlanResult, PlanError> {
    plan_mixed(&req.resolve()?)
}

/// The stages one part holds in every replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Member {
    part: usize,
    tp: u32,
    stages: u32,
}

/// A part's cost context.
struct PartCtx {
    ctx: TrainCtx,
    cluster: Cluster,
}

/// Knobs shared by the whole pipeline.
#[derive(Debug, Clone, Copy)]
struct Knobs {
    dp: u32,
    micro_batch: u32,
    recompute: Recompute,
    global_batch: u32,
}

impl Knobs {
    fn zero(&self) -> u8 {
        u8::from(self.dp > 1)
    }

    /// The homogeneous cost model's configuration of a stage of `member` in a pipeline of `pp`
    /// stages.
    fn config(&self, member: &Member, pp: u32) -> Config {
        Config {
            tp: member.tp,
            cp: 1,
            pp,
            dp: self.dp,
            ep: 1,
            etp: member.tp,
            vp: 1,
            micro_batch: self.micro_batch,
            zero: self.zero(),
            sp: member.tp > 1,
            recompute: self.recompute,
            offload: Offload::None,
            // Unused by the per-stage functions.
            split: Split { kind: StageSplit::Even, first: 0, mid: 0, last: 0 },
            global_batch: self.global_batch,
        }
    }
}

/// A costed, feasible mixed configuration.
#[derive(Debug, Clone)]
struct Candidate {
    members: Vec<Member>,
    knobs: Knobs,
    layers: Vec<u32>,
    step: f64,
    per_mb: f64,
    pp_comm: f64,
    tail: f64,
    tokens_per_s: f64,
    tier: u8,
    max_memory: f64,
}

/// A member's cost terms for one set of knobs.
struct MemberCost {
    cfg: Config,
    time: LayerTime,
    terms: MemoryTerms,
}

/// The pipeline of one replica: member of each stage.
fn stage_members(members: &[Member]) -> Vec<usize> {
    members.iter().enumerate().flat_map(|(j, m)| std::iter::repeat_n(j, m.stages as usize)).collect()
}

/// Most layers stage `stage` of `mc` holds within usable memory, at most `limit`; 0 when not even
/// one layer fits.
fn layer_cap(ctx: &TrainCtx, mc: &MemberCost, stage: u32, limit: u32) -> u32 {
    let fits = |l: u32| cost::stage_memory(ctx, &mc.cfg, &mc.terms, stage, l).total <= ctx.usable;
    if limit == 0 || !fits(1) {
        return 0;
    }
    let (mut lo, mut hi) = (1u32, limit);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(mid) { lo = mid } else { hi = mid - 1 }
    }
    lo
}

/// Layers per stage minimising the slowest stage: stage `s` takes `per_layer[s]` per layer plus
/// `fixed[s]`, holds 1 to `caps[s]` layers; `None` when the caps hold fewer than `layers`.
/// Layers are unit jobs: taking every slot that finishes by the proportional time first, then
/// adding the one that finishes soonest, picks the `layers` earliest slots, which is optimal.
pub fn assign_layers(layers: u32, per_layer: &[f64], fixed: &[f64], caps: &[u32]) -> Option<Vec<u32>> {
    let n = per_layer.len();
    if n == 0 || caps.contains(&0) || caps.iter().map(|&c| u64::from(c)).sum::<u64>() < u64::from(layers) {
        return None;
    }
    if (n as u64) > u64::from(layers) {
        return None;
    }
    let speed: f64 = per_layer.iter().map(|t| 1.0 / t.max(1e-30)).sum();
    let target = f64::from(layers) / speed;
    let mut out: Vec<u32> = (0..n)
        .map(|s| {
            let by_target = ((target - fixed[s]) / per_layer[s].max(1e-30)).floor();
            let take =
                if by_target.is_finite() && by_target > 1.0 { by_target.min(f64::from(caps[s])) as u32 } else { 1 };
            take.clamp(1, caps[s])
        })
        .collect();
    if out.iter().map(|&l| u64::from(l)).sum::<u64>() > u64::from(layers) {
        out.iter_mut().for_each(|l| *l = 1);
    }
    let mut placed: u32 = out.iter().sum();
    while placed < layers {
        let mut best: Option<(f64, usize)> = None;
        for s in 0..n {
            if out[s] < caps[s] {
                let t = f64::from(out[s] + 1) * per_layer[s] + fixed[s];
                if best.is_none_or(|(bt, _)| t < bt) {
                    best = Some((t, s));
                }
            }
        }
        let (_, s) = best?;
        out[s] += 1;
        placed += 1;
    }
    Some(out)
}

/// What costing one mixed pipeline found.
enum Costed {
    Fits(Candidate),
    /// Some stage cannot hold its layers (nor can it with a larger micro-batch).
    DoesNotFit,
    /// Even its ideal split cannot beat `to_beat`; not costed further.
    CannotWin,
}

/// Costs one mixed pipeline. `to_beat` is the tokens/s of the worst plan kept when the kept list
/// is full and of this candidate's tier: the candidate is dropped early when its upper bound does
/// not beat it (the slowest stage takes at least `layers / sum(1 / per-layer time)`, and the step
/// at least `(m + p - 1)` of that).
fn evaluate(
    parts: &[PartCtx],
    members: &[Member],
    knobs: Knobs,
    layers: u32,
    seq: f64,
    to_beat: Option<f64>,
) -> Costed {
    let pp: u32 = members.iter().map(|m| m.stages).sum();
    let costs: Vec<MemberCost> = members
        .iter()
        .map(|m| {
            let ctx = &parts[m.part].ctx;
            let cfg = knobs.config(m, pp);
            MemberCost { cfg, time: cost::layer_time(ctx, &cfg), terms: cost::memory_terms(ctx, &cfg) }
        })
        .collect();
    if let Some(to_beat) = to_beat {
        let speed: f64 = members.iter().zip(&costs).map(|(m, c)| f64::from(m.stages) / c.time.per_layer).sum();
        let m = f64::from(knobs.global_batch / (knobs.dp * knobs.micro_batch));
        let step = (m + f64::from(pp) - 1.0) * f64::from(layers) / speed;
        if f64::from(knobs.global_batch) * seq / step < to_beat {
            return Costed::CannotWin;
        }
    }
    match cost_fitting(parts, members, &costs, knobs, layers, seq) {
        Some(c) => Costed::Fits(c),
        None => Costed::DoesNotFit,
    }
}

/// Caps, layer split and step time of a pipeline whose member costs are `costs`; `None` when it
/// does not fit.
fn cost_fitting(
    parts: &[PartCtx],
    members: &[Member],
    costs: &[MemberCost],
    knobs: Knobs,
    layers: u32,
    seq: f64,
) -> Option<Candidate> {
    let pp: u32 = members.iter().map(|m| m.stages).sum();
    let of_stage = stage_members(members);
    let limit = layers - (pp - 1);
    let mut caps = Vec::with_capacity(pp as usize);
    let mut per_layer = Vec::with_capacity(pp as usize);
    let mut fixed = Vec::with_capacity(pp as usize);
    // Stages of one member with the same micro-batches in flight and role share a cap.
    let mut last_key: Option<(usize, u32, bool, bool)> = None;
    let mut last_cap = 0;
    let m = knobs.global_batch / (knobs.dp * knobs.micro_batch);
    for (s, &j) in of_stage.iter().enumerate() {
        let s = s as u32;
        let ends = (s == 0, s + 1 == pp);
        let key = (j, (pp - s).min(m), ends.0, ends.1);
        let cap =
            if last_key == Some(key) { last_cap } else { layer_cap(&parts[members[j].part].ctx, &costs[j], s, limit) };
        if cap == 0 {
            return None;
        }
        last_key = Some(key);
        last_cap = cap;
        caps.push(cap);
        per_layer.push(costs[j].time.per_layer);
        fixed.push(if ends.1 { costs[j].time.head } else { 0.0 });
    }
    let split = assign_layers(layers, &per_layer, &fixed, &caps)?;
    let stage_time = |s: usize| f64::from(split[s]) * per_layer[s] + fixed[s];
    let per_mb = (0..pp as usize).map(stage_time).fold(0.0, f64::max);
    let (p, mf) = (f64::from(pp), f64::from(m));
    let bubble = (p - 1.0) * per_mb;

    // The slowest stage boundary, each way.
    let mut one_max = 0.0f64;
    for s in 0..(pp as usize - 1) {
        let (a, b) = (of_stage[s], of_stage[s + 1]);
        let (ma, mb) = (&members[a], &members[b]);
        let (ca, cb) = (&parts[ma.part].ctx, &parts[mb.part].ctx);
        let (bw, lat) = if a == b {
            ca.net.group(ma.stages, ma.tp)
        } else {
            let (bwa, la) = ca.net.crossing(ma.tp);
            let (bwb, lb) = cb.net.crossing(mb.tp);
            (bwa.min(bwb), la.max(lb))
        };
        let bytes = cost::p2p_bytes(ca, &costs[a].cfg).max(cost::p2p_bytes(cb, &costs[b].cfg));
        one_max = one_max.max(bytes / bw + lat);
    }
    let pp_comm = cost::pipeline_p2p(one_max, p, mf, 1.0);

    // The slowest stage's gradient reduction and optimizer update.
    let mut tail = 0.0f64;
    let mut max_memory = 0.0f64;
    for (s, &j) in of_stage.iter().enumerate() {
        let member = &members[j];
        let ctx = &parts[member.part].ctx;
        let sm = cost::stage_memory(ctx, &costs[j].cfg, &costs[j].terms, s as u32, split[s]);
        max_memory = max_memory.max(sm.total);
        let group = ctx.net.group(knobs.dp, member.tp * member.stages);
        let dp = cost::dp_comm(ctx, &costs[j].cfg, &sm.states, group, per_mb, f64::from(split[s]));
        let (opt, _) = cost::optimizer_time(ctx, &costs[j].cfg, &sm.states);
        tail = tail.max(dp + opt);
    }
    let step = mf * per_mb + bubble + pp_comm + tail;
    Some(Candidate {
        members: members.to_vec(),
        knobs,
        layers: split,
        step,
        per_mb,
        pp_comm,
        tail,
        tokens_per_s: f64::from(knobs.global_batch) * seq / step,
        tier: 0,
        max_memory,
    })
}

/// Every order of `0..n`.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for rest in permutations(n - 1) {
        for pos in 0..=rest.len() {
            let mut p = rest.clone();
            p.insert(pos, n - 1);
            out.push(p);
        }
    }
    out
}

/// TP degrees a part can give its stages with `dp` replicas: inside a node, dividing the heads,
/// KV heads and hidden size (the homogeneous search's rules), and the part's share per replica.
fn tp_options(model: &ModelArch, cluster: &Cluster, dp: u32) -> Vec<u32> {
    let per_replica = cluster.total_gpus() / dp;
    divisors(cluster.gpus_per_node)
        .into_iter()
        .filter(|&t| {
            per_replica.is_multiple_of(t)
                && model.heads.is_multiple_of(t)
                && model.kv_heads.is_multiple_of(t)
                && model.hidden.is_multiple_of(t)
        })
        .collect()
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Best first: tier (the requested batch on every GPU of the parts used first), more tokens/s,
/// less memory.
fn rank(a: &Candidate, b: &Candidate) -> Ordering {
    a.tier.cmp(&b.tier).then(b.tokens_per_s.total_cmp(&a.tokens_per_s)).then(a.max_memory.total_cmp(&b.max_memory))
}

/// The multi-part search: every subset of two or more parts, every order, `dp`, TP per part,
/// recompute and micro-batch. Returns the best `top_n`, evaluated and feasible counts.
fn search_mixes(input: &MixedInput, spec: &TrainSpec, parts: &[PartCtx], top_n: usize) -> (Vec<Candidate>, u64, u64) {
    let layers = input.model.layers;
    let seq = f64::from(spec.seq_len);
    let n = parts.len();
    let mut top: Vec<Candidate> = Vec::new();
    let (mut evaluated, mut feasible) = (0u64, 0u64);
    for mask in 1u32..(1 << n) {
        if mask.count_ones() < 2 {
            continue;
        }
        let used: Vec<usize> = (0..n).filter(|i| mask & (1 << i) != 0).collect();
        let common = used.iter().fold(0, |g, &i| gcd(g, parts[i].cluster.total_gpus()));
        let orders = permutations(used.len());
        for dp in divisors(common) {
            let global_batch = batch_for(spec.global_batch, dp);
            if global_batch == 0 {
                continue;
            }
            let tier = u8::from(global_batch != spec.global_batch);
            let options: Vec<Vec<u32>> =
                used.iter().map(|&i| tp_options(&input.model, &parts[i].cluster, dp)).collect();
            if options.iter().any(Vec::is_empty) {
                continue;
            }
            let bs: Vec<u32> = divisors(global_batch / dp).into_iter().filter(|&b| b <= MAX_MICRO_BATCH).collect();
            // Every combination of TP degrees (one per part used).
            let mut pick = vec![0usize; used.len()];
            loop {
                let chosen: Vec<Member> = used
                    .iter()
                    .enumerate()
                    .map(|(k, &i)| {
                        let tp = options[k][pick[k]];
                        Member { part: i, tp, stages: parts[i].cluster.total_gpus() / dp / tp }
                    })
                    .collect();
                let pp: u32 = chosen.iter().map(|m| m.stages).sum();
                if pp <= layers {
                    for order in &orders {
                        let members: Vec<Member> = order.iter().map(|&k| chosen[k]).collect();
                        for recompute in [Recompute::None, Recompute::Full] {
                            for &micro_batch in &bs {
                                let knobs = Knobs { dp, micro_batch, recompute, global_batch };
                                evaluated += 1;
                                let to_beat = match top.last() {
                                    Some(last) if top.len() >= top_n && last.tier == tier => Some(last.tokens_per_s),
                                    Some(last) if top.len() >= top_n && last.tier < tier => Some(f64::INFINITY),
                                    _ => None,
                                };
                                match evaluate(parts, &members, knobs, layers, seq, to_beat) {
                                    Costed::Fits(mut cand) => {
                                        feasible += 1;
                                        cand.tier = tier;
                                        push_top(&mut top, cand, top_n);
                                    }
                                    // Memory only grows with the micro-batch.
                                    Costed::DoesNotFit => break,
                                    Costed::CannotWin => {}
                                }
                            }
                        }
                    }
                }
                // Next combination.
                let mut k = 0;
                while k < pick.len() {
                    pick[k] += 1;
                    if pick[k] < options[k].len() {
                        break;
                    }
                    pick[k] = 0;
                    k += 1;
                }
                if k == pick.len() {
                    break;
                }
            }
        }
    }
    (top, evaluated, feasible)
}

fn push_top(top: &mut Vec<Candidate>, c: Candidate, n: usize) {
    if top.len() >= n && top.last().is_some_and(|last| rank(&c, last) != Ordering::Less) {
        return;
    }
    let pos = top.partition_point(|x| rank(x, &c) != Ordering::Greater);
    top.insert(pos, c);
    top.truncate(n.max(1));
}

/// Plans `input`: the best `top_n` plans over every mix of two or more parts and every part
/// alone, best first.
///
/// Errors with [`PlanError::Infeasible`] when no mix and no single part fits; the reason gives
/// each part's own reason.
pub fn plan_mixed(input: &MixedInput) -> Result<MixedPlanResult, PlanError> {
    let (spec, kind, parts) = part_contexts(input)?;
    let (mixes, mut evaluated, mut feasible) = search_mixes(input, &spec, &parts, input.top_n);
    // (tier, plan) of every kept candidate.
    let mut ranked: Vec<(u8, MixedPlan)> = mixes.iter().map(|c| (c.tier, to_plan(&spec, &parts, c, kind))).collect();
    for i in 0..parts.len() {
        let result = search::plans_only(&input.part_input(i));
        evaluated += result.evaluated;
        feasible += result.feasible;
        for plan in result.plans {
            let tier = if plan.idle_gpus > 0 { 2 } else { u8::from(plan.global_batch != spec.global_batch) };
            ranked.push((tier, single_part_plan(input, &parts, i, plan, kind)));
        }
    }
    // Ties go to the plan on fewer parts.
    ranked.sort_by(|(ta, a), (tb, b)| {
        ta.cmp(tb)
            .then(b.tokens_per_s.total_cmp(&a.tokens_per_s))
            .then(a.memory_per_gpu_bytes.cmp(&b.memory_per_gpu_bytes))
            .then(a.parts_used.cmp(&b.parts_used))
    });
    ranked.truncate(input.top_n.max(1));
    if ranked.is_empty() {
        // Why each part alone does not fit (with its smallest fit), only now that it matters.
        let errors: Vec<(usize, PlanError)> =
            (0..parts.len()).filter_map(|i| search::plan(&input.part_input(i)).err().map(|e| (i, e))).collect();
        return Err(infeasible(input, &errors));
    }
    Ok(MixedPlanResult { plans: ranked.into_iter().map(|(_, p)| p).collect(), evaluated, feasible })
}

/// The best plan that uses two parts or more, as [`plan_mixed`] ranks them; `None` when no mix
/// fits. No part is planned alone: for a caller that has weighed every part alone already (the
/// advice prices every pool alone), which saves the homogeneous search of each part.
pub fn best_mix(input: &MixedInput) -> Result<Option<MixedPlan>, PlanError> {
    let (spec, kind, parts) = part_contexts(input)?;
    let (mixes, _, _) = search_mixes(input, &spec, &parts, 1);
    Ok(mixes.first().map(|c| to_plan(&spec, &parts, c, kind)))
}

/// The training workload, its kind, and each part's cost context.
fn part_contexts(input: &MixedInput) -> Result<(TrainSpec, WorkloadKind, Vec<PartCtx>), PlanError> {
    let (spec, lora) = input.train_spec()?;
    let kind = if lora { WorkloadKind::Lora } else { WorkloadKind::Train };
    let parts = input
        .parts
        .iter()
        .map(|cluster| PartCtx {
            ctx: TrainCtx::new(
                &input.model,
                cluster,
                spec.seq_len,
                spec.global_batch,
                spec.precision,
                lora.then_some(spec.lora_rank),
            ),
            cluster: cluster.clone(),
        })
        .collect();
    Ok((spec, kind, parts))
}

/// "2 x A100 80GB SXM + 8 x GeForce RTX 4090".
fn describe_parts(parts: &[Cluster]) -> String {
    parts.iter().map(|c| format!("{} x {}", c.total_gpus(), c.gpu.name)).collect::<Vec<_>>().join(" + ")
}

fn infeasible(input: &MixedInput, errors: &[(usize, PlanError)]) -> PlanError {
    if let [(_, only)] = errors
        && input.parts.len() == 1
    {
        // One part: the homogeneous planner's own answer (with its smallest fit).
        return only.clone();
    }
    let label = match input.workload {
        Workload::Lora(_) => "LoRA fine-tune",
        _ => "full fine-tune",
    };
    let mut needed = u64::MAX;
    let mut available = 0u64;
    let mut why = Vec::new();
    for (i, e) in errors {
        if let PlanError::Infeasible { needed_bytes_min, available_bytes, reason, .. } = e {
            if *needed_bytes_min > 0 {
                needed = needed.min(*needed_bytes_min);
            }
            available = available.max(*available_bytes);
            why.push(format!("part {i} alone: {reason}"));
        } else {
            why.push(format!("part {i} alone: {e}"));
        }
    }
    PlanError::Infeasible {
        reason: format!(
            "{} {label}: no mix of {} fits (every pipeline stage needs at least one layer in its GPUs' memory) and no part fits alone; {}",
            input.model_name,
            describe_parts(&input.parts),
            why.join("; ")
        ),
        needed_bytes_min: if needed == u64::MAX { 0 } else { needed },
        available_bytes: available,
        smallest_fit: None,
        hints: Vec::new(),
    }
}

/// The per-part summaries of a plan whose stages are `stages` (one replica) with `dp` replicas.
fn part_uses(parts: &[PartCtx], stages: &[MixedStage], dp: u32, per_mb: f64) -> Vec<MixedPartUse> {
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mine: Vec<&MixedStage> = stages.iter().filter(|s| s.part as usize == i).collect();
            let tp = mine.first().map_or(0, |s| s.tp);
            let gpus_used = (mine.iter().map(|s| s.tp).sum::<u32>() * dp).min(p.cluster.total_gpus());
            let busiest = mine.iter().map(|s| s.time_per_micro_batch_s).fold(0.0, f64::max);
            MixedPartUse {
                part: i as u32,
                gpu_key: p.cluster.gpu.key.clone(),
                gpu_name: p.cluster.gpu.name.clone(),
                gpus: p.cluster.total_gpus(),
                gpus_used,
                idle_gpus: p.cluster.total_gpus() - gpus_used,
                tp,
                stages_per_replica: mine.len() as u32,
                layers_per_replica: mine.iter().map(|s| s.layers).sum(),
                memory_per_gpu_bytes: mine.iter().map(|s| s.memory.total).max().unwrap_or(0),
                usable_bytes: p.ctx.usable as u64,
                busy_fraction: if per_mb > 0.0 { busiest / per_mb } else { 0.0 },
            }
        })
        .collect()
}

fn gb(bytes: f64) -> String {
    format!("{:.1}", bytes / 1e9)
}

/// Turns a mixed candidate into a public plan with per-stage and per-part figures.
fn to_plan(spec: &TrainSpec, parts: &[PartCtx], cand: &Candidate, kind: WorkloadKind) -> MixedPlan {
    let knobs = cand.knobs;
    let pp: u32 = cand.members.iter().map(|m| m.stages).sum();
    let of_stage = stage_members(&cand.members);
    let stages: Vec<MixedStage> = of_stage
        .iter()
        .enumerate()
        .map(|(s, &j)| {
            let member = &cand.members[j];
            let ctx = &parts[member.part].ctx;
            let cfg = knobs.config(member, pp);
            let time = cost::layer_time(ctx, &cfg);
            let terms = cost::memory_terms(ctx, &cfg);
            let layers = cand.layers[s];
            let last = s + 1 == of_stage.len();
            MixedStage {
                part: member.part as u32,
                gpu_key: parts[member.part].cluster.gpu.key.clone(),
                tp: member.tp,
                layers,
                memory: cost::stage_memory(ctx, &cfg, &terms, s as u32, layers).breakdown,
                time_per_micro_batch_s: f64::from(layers) * time.per_layer + if last { time.head } else { 0.0 },
            }
        })
        .collect();
    let uses = part_uses(parts, &stages, knobs.dp, cand.per_mb);
    let grad_accum = knobs.global_batch / (knobs.dp * knobs.micro_batch);
    let bubble = f64::from(pp - 1) * cand.per_mb;
    let slowest = stages
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.time_per_micro_batch_s.total_cmp(&b.1.time_per_micro_batch_s))
        .map_or(0, |(s, _)| s);
    let calibrated = cand.members.iter().all(|m| parts[m.part].ctx.calibrated);
    let mut notes = Vec::new();
    if knobs.global_batch != spec.global_batch {
        notes.push(format!(
            "global batch {} does not divide by the {} replicas; this plan runs {} sequences per step",
            spec.global_batch, knobs.dp, knobs.global_batch
        ));
    }
    for u in uses.iter().filter(|u| u.gpus_used == 0) {
        notes.push(format!("part {} ({} x {}) is not used", u.part, u.gpus, u.gpu_name));
    }
    let mut tps: Vec<u32> = cand.members.iter().map(|m| m.tp).collect();
    tps.sort_unstable();
    tps.dedup();
    if tps.len() > 1 {
        let listed: Vec<String> = tps.iter().map(u32::to_string).collect();
        notes.push(format!(
            "stages use TP degrees {}: Megatron-LM runs one TP degree on every stage, so this plan needs a runtime with a TP degree per stage",
            listed.join(" and ")
        ));
    }
    let worst = stages.iter().max_by_key(|s| s.memory.total).map(|s| s.memory);
    if let Some(note) = worst.as_ref().and_then(cost::headroom_note) {
        notes.push(note);
    }
    if !calibrated {
        notes.push("uncalibrated: some GPUs of this mix have no published runs to calibrate against".to_string());
    }
    let per_part: Vec<String> = uses
        .iter()
        .filter(|u| u.gpus_used > 0)
        .map(|u| {
            format!(
                "part {} ({}): {} of TP {} with {} layers, {} GB of {} GB per GPU, busy {:.0}%",
                u.part,
                u.gpu_name,
                super::types::count(u.stages_per_replica, "stage", "stages"),
                u.tp,
                u.layers_per_replica,
                gb(u.memory_per_gpu_bytes as f64),
                gb(u.usable_bytes as f64),
                u.busy_fraction * 100.0
            )
        })
        .collect();
    let layers: Vec<String> = stages.iter().map(|s| s.layers.to_string()).collect();
    let mut explanation = format!(
        "{} x a {}-stage pipeline over {} (in pipeline order; layers {}); {}; micro-batch {} x {}, {}{}; predicted {:.0} tokens/s, {:.2} s per step; stage {} ({}) sets the pace.",
        super::types::count(knobs.dp, "replica", "replicas"),
        pp,
        describe_parts(&cand.members.iter().map(|m| parts[m.part].cluster.clone()).collect::<Vec<_>>()),
        layers.join("+"),
        per_part.join("; "),
        knobs.micro_batch,
        super::types::count(grad_accum, "accumulation step", "accumulation steps"),
        recompute_phrase(knobs.recompute),
        if knobs.zero() > 0 { ", ZeRO-1" } else { "" },
        cand.tokens_per_s,
        cand.step,
        slowest + 1,
        stages[slowest].gpu_key,
    );
    for note in &notes {
        explanation.push_str(&format!(" Note: {note}."));
    }
    MixedPlan {
        workload: kind,
        dp: knobs.dp,
        pp,
        micro_batch: knobs.micro_batch,
        grad_accum,
        global_batch: knobs.global_batch,
        zero_stage: knobs.zero(),
        sequence_parallel: cand.members.iter().any(|m| m.tp > 1),
        recompute: knobs.recompute,
        parts_used: cand.members.len() as u32,
        memory_per_gpu_bytes: stages.iter().map(|s| s.memory.total).max().unwrap_or(0),
        stages,
        parts: uses,
        step_time_s: cand.step,
        tokens_per_s: cand.tokens_per_s,
        bubble_fraction: bubble / cand.step,
        pp_comm_s: cand.pp_comm,
        dp_and_optimizer_s: cand.tail,
        calibrated,
        single_part: None,
        notes,
        explanation,
    }
}

/// A homogeneous plan of part `i` alone, with the mixed plan's per-stage and per-part figures
/// costed by the same functions (its configuration rebuilt from the plan).
fn single_part_plan(input: &MixedInput, parts: &[PartCtx], i: usize, plan: Plan, kind: WorkloadKind) -> MixedPlan {
    let ctx = &parts[i].ctx;
    let lps = &plan.layers_per_stage;
    let first = lps.first().copied().unwrap_or(input.model.layers);
    let split = Split {
        kind: plan.stage_split,
        first,
        mid: if lps.len() >= 3 { lps[1] } else { first },
        last: lps.last().copied().unwrap_or(first),
    };
    let cfg = Config {
        tp: plan.tp,
        cp: plan.cp,
        pp: plan.pp,
        dp: plan.dp,
        ep: plan.ep,
        etp: plan.etp.unwrap_or(plan.tp),
        vp: plan.vp,
        micro_batch: plan.micro_batch,
        zero: plan.zero_stage,
        sp: plan.sequence_parallel,
        recompute: plan.recompute,
        offload: plan.offload,
        split,
        global_batch: plan.global_batch,
    };
    let time = cost::layer_time(ctx, &cfg);
    let terms = cost::memory_terms(ctx, &cfg);
    let stages: Vec<MixedStage> = lps
        .iter()
        .enumerate()
        .map(|(s, &layers)| {
            let last = s + 1 == lps.len();
            MixedStage {
                part: i as u32,
                gpu_key: parts[i].cluster.gpu.key.clone(),
                tp: plan.tp,
                layers,
                memory: cost::stage_memory(ctx, &cfg, &terms, s as u32, layers).breakdown,
                time_per_micro_batch_s: f64::from(layers) * time.per_layer + if last { time.head } else { 0.0 },
            }
        })
        .collect();
    let per_mb = stages.iter().map(|s| s.time_per_micro_batch_s).fold(0.0, f64::max);
    let mem = cost::memory(ctx, &cfg);
    let timing = cost::timing(ctx, &cfg, &mem.states);
    let (optimizer, _) = cost::optimizer_time(ctx, &cfg, &mem.states);
    // A stage of one replica spans TP x CP GPUs, so `dp * cp` copies of each stage.
    let uses = part_uses(parts, &stages, plan.dp * plan.cp, per_mb);
    debug_assert_eq!(uses[i].gpus_used, plan.tp * plan.cp * plan.pp * plan.dp);
    let mut notes = plan.notes.clone();
    for u in uses.iter().filter(|u| u.gpus_used == 0) {
        notes.push(format!("part {} ({} x {}) is not used", u.part, u.gpus, u.gpu_name));
    }
    let explanation = format!(
        "Part {i} alone ({} x {}): {}{}",
        parts[i].cluster.total_gpus(),
        parts[i].cluster.gpu.name,
        plan.explanation,
        notes.iter().skip(plan.notes.len()).map(|n| format!(" Note: {n}.")).collect::<String>()
    );
    MixedPlan {
        workload: kind,
        dp: plan.dp,
        pp: plan.pp,
        micro_batch: plan.micro_batch,
        grad_accum: plan.grad_accum,
        global_batch: plan.global_batch,
        zero_stage: plan.zero_stage,
        sequence_parallel: plan.sequence_parallel,
        recompute: plan.recompute,
        stages,
        parts: uses,
        parts_used: 1,
        step_time_s: plan.step_time_s,
        tokens_per_s: plan.tokens_per_s,
        bubble_fraction: plan.bubble_fraction,
        pp_comm_s: timing.pp_comm,
        dp_and_optimizer_s: timing.dp_comm + optimizer,
        memory_per_gpu_bytes: plan.memory_per_gpu_bytes,
        calibrated: plan.calibrated,
        notes,
        explanation,
        single_part: Some(plan),
    }
}
