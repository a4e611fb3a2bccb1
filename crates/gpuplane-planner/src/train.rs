//! Exhaustive search over training configurations.
//!
//! Rules (Megatron-LM's):
//! - `tp * cp * pp * dp == gpus` (or, only when nothing fits that way, `<= gpus` with the rest
//!   idle); `heads % tp == 0`, `kv_heads % tp == 0` (query groups are split, never replicated,
//!   in training), `hidden % tp == 0`;
//! - `tp` divides `gpus_per_node`, or is a multiple of it (crossing nodes, costed over the
//!   node network with a heavy penalty);
//! - context parallelism: `seq_len % (2 * cp) == 0` (load-balanced causal chunks), `cp <= 64`,
//!   and, unless pinned, at least 4096 tokens per rank;
//! - expert parallelism (MoE only): `experts % ep == 0`, and the expert tensor-parallel degree
//!   `etp` is `tp` with `(dp * cp) % ep == 0` (EP carved out of the data-parallel ranks,
//!   Megatron-Core's default) or 1 with `(tp * dp * cp) % ep == 0` (experts whole, EP over the
//!   tensor- and data-parallel ranks, `--expert-tensor-parallel-size 1`); the rule is
//!   [`cost::expert_tp_options`];
//! - layers over stages: even (`layers % (pp * vp) == 0`), embedding and loss counted as a
//!   layer each (`(layers + 2) % (pp * vp) == 0`), or, when neither exists, uneven first/last
//!   stages whose every part divides by `vp` (`layers % vp == 0`) and, with `vp > 1`, for any
//!   layer count, Megatron's pipeline layout over the `pp * vp` virtual stages (see
//!   [`Split::options`]; Megatron's rule is [`Split::megatron_accepts`]; unpinned `vp`, only
//!   tight layouts, [`Split::layout_is_tight`]); `vp > 1` needs `pp > 1` and
//!   `grad_accum % pp == 0`;
//! - `global_batch % (micro_batch * dp) == 0`, micro-batch at most 64; when the requested batch
//!   does not divide by `dp`, the nearest multiple of `dp` is run instead and the plan says so
//!   (ranked after every plan that runs the requested batch);
//! - sequence parallelism only with `tp > 1`; ZeRO stages 1-3 only with `dp * cp > 1`, except
//!   with CPU offload (which needs ZeRO >= 1; parameter offload needs ZeRO-3). Offload is only
//!   tried where the plain variant does not fit.
//!
//! Pruning: memory is monotone in the micro-batch, so the micro-batch loop stops at the first
//! size none of whose split variants fits; the time model only runs on configurations that
//! fit. Only the top N are kept (sorted insertion).

use super::cost::{self, Config, Split, Timing, TrainCtx};
use super::types::{MemoryBreakdown, Offload, Pins, Plan, Recompute, StageSplit, WorkloadKind, count};
use std::cmp::Ordering;

/// Largest micro-batch the search considers.
pub const MAX_MICRO_BATCH: u32 = 64;
/// Largest context-parallel degree the search considers.
pub const MAX_CP: u32 = 64;
/// Fewest tokens per rank an unpinned context-parallel degree leaves (NeMo recipes start CP
/// at 8k-token sequences).
pub const MIN_CP_TOKENS: u32 = 4096;

/// The first of the model's dimensions tensor parallelism of `tp` cannot split, with its name: training splits the
/// attention heads, the key/value heads (query groups are split, never replicated) and the hidden size by `tp`.
pub fn tp_unsplittable(heads: u32, kv_heads: u32, hidden: u32, tp: u32) -> Option<(u32, &'static str)> {
    [(heads, "attention heads"), (kv_heads, "key/value heads"), (hidden, "hidden size")]
        .into_iter()
        .find(|(n, _)| !n.is_multiple_of(tp))
}

/// Divisors of `n`, ascending.
pub fn divisors(n: u32) -> Vec<u32> {
    let mut small = Vec::new();
    let mut large = Vec::new();
    let mut i = 1u32;
    while u64::from(i) * u64::from(i) <= u64::from(n) {
        if n.is_multiple_of(i) {
            small.push(i);
            if i != n / i {
                large.push(n / i);
            }
        }
        i += 1;
    }
    small.extend(large.into_iter().rev());
    small
}

/// A costed, feasible configuration.
#[derive(Debug, Clone, Copy)]
pub struct Candidate {
    pub cfg: Config,
    pub mem: MemoryBreakdown,
    pub host_per_node: f64,
    pub timing: Timing,
    pub tokens_per_s: f64,
    /// 0: the requested batch on every GPU; 1: an adjusted global batch; 2: some GPUs idle.
    pub tier: u8,
}

fn rc_index(r: Recompute) -> u8 {
    match r {
        Recompute::None => 0,
        Recompute::Selective => 1,
        Recompute::Full => 2,
    }
}

fn split_index(s: StageSplit) -> u8 {
    match s {
        StageSplit::Even => 0,
        StageSplit::EmbeddingAndLoss => 1,
        StageSplit::Uneven => 2,
        StageSplit::Layout => 3,
    }
}

/// Best first: the requested batch on all GPUs before departures from the request, then more
/// tokens/s, then less memory, then a fixed order of the knobs.
pub fn rank(a: &Candidate, b: &Candidate) -> Ordering {
    a.tier.cmp(&b.tier).then(b.tokens_per_s.total_cmp(&a.tokens_per_s)).then(a.mem.total.cmp(&b.mem.total)).then_with(
        || {
            let key = |c: &Config| {
                (
                    c.tp,
                    c.cp,
                    c.pp,
                    c.ep,
                    std::cmp::Reverse(c.etp),
                    c.vp,
                    c.micro_batch,
                    c.zero,
                    c.sp,
                    rc_index(c.recompute),
                    c.offload as u8,
                    split_index(c.split.kind),
                )
            };
            key(&a.cfg).cmp(&key(&b.cfg))
        },
    )
}

/// Keeps the best `n` candidates, sorted.
pub struct TopN {
    n: usize,
    pub items: Vec<Candidate>,
}

impl TopN {
    pub fn new(n: usize) -> Self {
        TopN { n: n.max(1), items: Vec::with_capacity(n.clamp(1, 64) + 1) }
    }

    pub fn push(&mut self, c: Candidate) {
        if self.items.len() == self.n
            && let Some(last) = self.items.last()
            && rank(&c, last) != Ordering::Less
        {
            return;
        }
        let pos = self.items.partition_point(|x| rank(x, &c) != Ordering::Greater);
        self.items.insert(pos, c);
        self.items.truncate(self.n);
    }
}

/// Outcome of a search.
pub struct Outcome {
    pub top: TopN,
    pub evaluated: u64,
    pub feasible: u64,
    /// Smallest per-GPU memory any divisible configuration needs.
    pub min_needed: f64,
    /// Smallest host memory per node among configurations that fit in GPU memory only with an
    /// offload the host cannot hold (infinite when none).
    pub min_host_needed: f64,
    pub any_divisible: bool,
}

/// The global batch a data-parallel degree runs: the requested one when it divides, else the
/// nearest multiple of `dp` (ties upwards).
pub fn batch_for(requested: u32, dp: u32) -> u32 {
    let dp = dp.max(1);
    if requested.is_multiple_of(dp) {
        return requested;
    }
    let down = requested / dp * dp;
    let up = down.saturating_add(dp);
    if down == 0 || requested - down >= up - requested { up } else { down }
}

/// Which parts of the space a search pass covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Model-parallel sizes that divide the cluster: every GPU works.
    AllGpus,
    /// Model-parallel sizes that do not divide it: `gpus % (tp*cp*pp)` GPUs stay idle.
    Idle,
}

/// Searches all configurations of one pass; with `first_only` it stops at the first one that
/// fits.
pub fn search(c: &TrainCtx, pins: &Pins, top_n: usize, first_only: bool, pass: Pass) -> Outcome {
    let mut out = Outcome {
        top: TopN::new(top_n),
        evaluated: 0,
        feasible: 0,
        min_needed: f64::INFINITY,
        min_host_needed: f64::INFINITY,
        any_divisible: false,
    };
    let n = c.gpus;
    let gpn = c.gpus_per_node;
    let idle = pass == Pass::Idle;
    let rcs: Vec<Recompute> = match pins.recompute {
        Some(r) => vec![r],
        None => Recompute::ALL.to_vec(),
    };
    let tps: Vec<u32> = if idle { (1..=n.min(c.heads)).collect() } else { divisors(n) };
    let mut bs: Vec<u32> = Vec::new();
    let mut nv: Vec<u64> = Vec::new();
    let mut variants: Vec<(u32, Split)> = Vec::new();
    let mut splits: Vec<Split> = Vec::new();
    for tp in tps {
        if pins.tp.is_some_and(|x| x != tp)
            || tp_unsplittable(c.heads, c.kv_heads, c.hidden_u, tp).is_some()
            || !(gpn.is_multiple_of(tp) || tp % gpn == 0)
        {
            continue;
        }
        let sps: &[bool] = match (tp > 1, pins.sequence_parallel) {
            (true, None) => &[false, true],
            (true, Some(true)) => &[true],
            (false, Some(true)) => &[],
            (_, Some(false)) | (false, None) => &[false],
        };
        let rest = n / tp;
        let cps: Vec<u32> = if idle { (1..=rest.min(MAX_CP)).collect() } else { divisors(rest) };
        for cp in cps {
            if pins.cp.unwrap_or(1) != cp && (pins.cp.is_some() || cp > MAX_CP) {
                continue;
            }
            if cp > 1 && !c.seq_u.is_multiple_of(2 * cp) {
                continue;
            }
            // Unpinned, CP is only tried while every rank keeps at least MIN_CP_TOKENS tokens:
            // shorter ring-attention chunks cannot hide their K/V exchange.
            if cp > 1 && pins.cp.is_none() && c.seq_u / cp < MIN_CP_TOKENS {
                continue;
            }
            let rest = n / tp / cp;
            let pps: Vec<u32> = if idle { (1..=rest.min(c.layers)).collect() } else { divisors(rest) };
            for pp in pps {
                if pins.pp.is_some_and(|x| x != pp) || pp > c.layers {
                    continue;
                }
                let mp = tp * cp * pp;
                let mut dp = n / mp;
                if idle {
                    if n.is_multiple_of(mp) && pins.dp.is_none_or(|x| x == dp) {
                        // Covered by the all-GPU pass.
                        continue;
                    }
                    if let Some(x) = pins.dp {
                        if u64::from(x) * u64::from(mp) > u64::from(n) {
                            continue;
                        }
                        dp = x;
                    }
                } else if pins.dp.is_some_and(|x| x != dp) {
                    continue;
                }
                if dp == 0 {
                    continue;
                }
                let global_batch = batch_for(c.global_batch, dp);
                if global_batch == 0 {
                    continue;
                }
                let tier = if idle {
                    2
                } else if global_batch != c.global_batch {
                    1
                } else {
                    0
                };
                let per_dp = global_batch / dp;
                bs.clear();
                bs.extend(
                    divisors(per_dp)
                        .into_iter()
                        .filter(|&b| b <= MAX_MICRO_BATCH && pins.micro_batch.is_none_or(|x| x == b)),
                );
                variants.clear();
                let max_v = if pp > 1 { (c.layers + 2) / pp } else { 1 };
                for v in 1..=max_v {
                    if pins.vp.is_some_and(|x| x != v) {
                        continue;
                    }
                    Split::options(c.layers, pp, v, &mut splits);
                    if pins.vp.is_none() && !Split::layout_is_tight(c.layers, pp, v) {
                        splits.retain(|s| s.kind != StageSplit::Layout);
                    }
                    variants.extend(splits.iter().map(|s| (v, *s)));
                }
                if bs.is_empty() || variants.is_empty() {
                    continue;
                }
                nv.clear();
                for &b in &bs {
                    let m = per_dp / b;
                    let cnt = variants.iter().filter(|(v, _)| *v == 1 || m.is_multiple_of(pp)).count() as u64;
                    nv.push(cnt);
                }
                let per_rc_sp: u64 = nv.iter().sum();
                let inner = per_rc_sp * rcs.len() as u64 * sps.len() as u64;
                if inner == 0 {
                    continue;
                }
                let reducers = dp * cp;
                // (ep, etp): dense models run neither; MoE experts split as Megatron-Core allows.
                let eps: Vec<(u32, u32)> = if c.experts == 0 {
                    if pins.ep.is_some_and(|x| x != 1) || pins.etp.is_some_and(|x| x != tp) {
                        Vec::new()
                    } else {
                        vec![(1, tp)]
                    }
                } else {
                    divisors(c.experts)
                        .into_iter()
                        .filter(|&e| pins.ep.is_none_or(|x| x == e))
                        .flat_map(|e| cost::expert_tp_options(tp, cp, dp, e).into_iter().map(move |etp| (e, etp)))
                        .filter(|&(_, etp)| pins.etp.is_none_or(|x| x == etp))
                        .collect()
                };
                let zeros: &[u8] = match pins.zero_stage {
                    Some(0) => &[0],
                    Some(1) => &[1],
                    Some(2) => &[2],
                    Some(3) => &[3],
                    Some(_) => &[],
                    None if reducers == 1 && c.lora => &[0],
                    None => &[0, 1, 2, 3],
                };
                for &(ep, etp) in &eps {
                    for &zero in zeros {
                        let base = Config {
                            tp,
                            cp,
                            pp,
                            dp,
                            ep,
                            etp,
                            vp: 1,
                            micro_batch: bs[0],
                            zero,
                            sp: false,
                            recompute: Recompute::None,
                            offload: Offload::None,
                            split: variants[0].1,
                            global_batch,
                        };
                        let offloads = offload_options(c, pins, base, &variants);
                        for &offload in offloads.iter() {
                            if zero > 0 && reducers == 1 && offload == Offload::None && pins.zero_stage.is_none() {
                                continue;
                            }
                            out.evaluated += inner;
                            out.any_divisible = true;
                            for &rc in &rcs {
                                for &sp in sps {
                                    let template = Config { sp, recompute: rc, offload, ..base };
                                    if scan_micro_batches(c, &mut out, template, &bs, &nv, &variants, tier, first_only)
                                    {
                                        return out;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// Costs `template` at every micro-batch in `bs` (ascending) and every (vp, split) variant,
/// keeping the feasible ones in `out`; stops at the first micro-batch none of whose variants
/// fits (memory only grows with it). Returns true when `first_only` found a fit.
#[allow(clippy::too_many_arguments)]
fn scan_micro_batches(
    c: &TrainCtx,
    out: &mut Outcome,
    template: Config,
    bs: &[u32],
    nv: &[u64],
    variants: &[(u32, Split)],
    tier: u8,
    first_only: bool,
) -> bool {
    let per_dp = template.global_batch / template.dp;
    for (bi, &b) in bs.iter().enumerate() {
        let m = per_dp / b;
        let mut any_fit = false;
        let mut lean = f64::INFINITY;
        for &(v, split) in variants {
            if v > 1 && !m.is_multiple_of(template.pp) {
                continue;
            }
            let cfg = Config { vp: v, micro_batch: b, split, ..template };
            let mem = cost::memory(c, &cfg);
            lean = lean.min(mem.breakdown.total as f64);
            if !mem.fits(c) {
                if mem.breakdown.total as f64 <= c.usable {
                    out.min_host_needed = out.min_host_needed.min(mem.host_per_node);
                }
                continue;
            }
            any_fit = true;
            out.feasible += 1;
            let timing = cost::timing(c, &cfg, &mem.states);
            let tokens = f64::from(cfg.global_batch) * c.seq / timing.step;
            out.top.push(Candidate {
                cfg,
                mem: mem.breakdown,
                host_per_node: mem.host_per_node,
                timing,
                tokens_per_s: tokens,
                tier,
            });
            if first_only {
                return true;
            }
        }
        out.min_needed = out.min_needed.min(lean);
        if !any_fit && nv[bi] > 0 {
            break;
        }
    }
    false
}

/// CPU offload variants worth trying for `base` (its ZeRO stage set): pinned, or (full
/// training only) when the leanest variant without offload does not fit.
fn offload_options(c: &TrainCtx, pins: &Pins, base: Config, variants: &[(u32, Split)]) -> Vec<Offload> {
    let zero = base.zero;
    let allowed = |o: Offload| match o {
        Offload::None => true,
        Offload::Optimizer => zero >= 1 && !c.lora,
        Offload::OptimizerAndParams => zero == 3 && !c.lora,
    };
    if let Some(o) = pins.offload {
        return if allowed(o) { vec![o] } else { Vec::new() };
    }
    if c.lora || zero == 0 {
        return vec![Offload::None];
    }
    // Leanest variant: the smallest micro-batch, full recompute, sequence parallel, vp 1.
    let lean = variants.iter().filter(|(v, _)| *v == 1).any(|&(_, split)| {
        let cfg = Config {
            sp: base.tp > 1 && pins.sequence_parallel != Some(false),
            recompute: pins.recompute.unwrap_or(Recompute::Full),
            split,
            ..base
        };
        cost::memory(c, &cfg).fits(c)
    });
    if lean && base.dp * base.cp > 1 {
        vec![Offload::None]
    } else {
        Offload::ALL.into_iter().filter(|&o| allowed(o)).collect()
    }
}

fn gb(bytes: f64) -> String {
    format!("{:.1}", bytes / 1e9)
}

/// A global batch (a multiple of `unit`) that would take about `target_s` per step.
pub fn suggested_batch(global_batch: u32, unit: u32, step_s: f64, target_s: f64) -> u32 {
    let unit = unit.max(1);
    let want = (f64::from(global_batch) * target_s / step_s.max(1e-9)).floor() as u32;
    (want / unit * unit).max(unit)
}

/// "the middle one" / "the 6 middle ones": the stages between the first and the last (pp >= 3).
fn middle_stages(pp: u32) -> String {
    if pp == 3 { "the middle one".to_string() } else { format!("the {} middle ones", pp.saturating_sub(2)) }
}

/// "no recompute", "full recompute": a recompute policy in a plan's explanation.
pub fn recompute_phrase(r: Recompute) -> String {
    match r {
        Recompute::None => "no recompute".to_string(),
        r => format!("{} recompute", r.as_str()),
    }
}

/// The plan in plain words: what runs where, how long a step takes, the memory it needs.
fn plain_summary(c: &TrainCtx, cand: &Candidate, gpu_name: &str) -> String {
    let cfg = cand.cfg;
    let gpus = cfg.gpus();
    let nodes = gpus.div_ceil(c.gpus_per_node.max(1));
    let group = cfg.tp * cfg.pp * cfg.cp;
    let mut how: Vec<String> = Vec::new();
    if cfg.tp > 1 {
        let inside = if cfg.tp <= c.gpus_per_node { " of one node" } else { " across nodes" };
        how.push(format!("every layer is split over {} GPUs{inside}", cfg.tp));
    }
    if cfg.cp > 1 {
        how.push(format!("every sequence is split over {} GPUs", cfg.cp));
    }
    if cfg.pp > 1 {
        how.push(format!(
            "the {} layers run as a pipeline of {} groups of GPUs, each holding consecutive layers",
            c.layers, cfg.pp
        ));
    }
    if cfg.ep > 1 {
        how.push(format!("each GPU holds {} of the {} experts", c.experts / cfg.ep, c.experts));
    }
    let copies = if cfg.dp > 1 {
        let each = if group > 1 { format!(", each on {group} GPUs,") } else { String::new() };
        let sharded = if cfg.zero > 0 { " and share the optimizer's memory" } else { "" };
        format!("{} copies of the model{each} train on different sequences of every batch{sharded}", cfg.dp)
    } else if group > 1 {
        "one copy of the model spans all of them".to_string()
    } else {
        "one GPU holds the whole model".to_string()
    };
    let layout = if how.is_empty() { copies } else { format!("{}; {copies}", how.join(", ")) };
    let offload = if cfg.offload == Offload::None { "" } else { ", with part of it kept in the host's memory" };
    format!(
        "{} on {}: {layout}. One step trains on {} of {} tokens in about {} ({:.0} tokens/s) and needs {} of the \
         {} GB of each GPU{offload}.",
        count(gpus, &format!("{gpu_name} GPU"), &format!("{gpu_name} GPUs")),
        count(nodes, "node", "nodes"),
        count(cfg.global_batch, "sequence", "sequences"),
        c.seq_u,
        super::types::duration(cand.timing.step),
        cand.tokens_per_s,
        gb(cand.mem.total as f64),
        gb(cand.mem.usable as f64),
    )
}

/// Turns a candidate into a public plan with its explanation.
pub fn to_plan(c: &TrainCtx, cand: &Candidate, kind: WorkloadKind, gpu_name: &str, link: &str) -> Plan {
    let cfg = cand.cfg;
    let t = &cand.timing;
    let used = f64::from(cfg.gpus().max(1));
    let tflops = c.model_flops_per_step(cfg.global_batch) / t.step / used / 1e12;
    let hw = t.hardware_flops_per_step / t.step / used / 1e12;
    let mfu = tflops * 1e12 / c.peak;
    let bubble_fraction = t.bubble / t.step;
    let comm_fraction = (t.tp_comm + t.cp_comm + t.ep_comm + t.pp_comm + t.dp_comm) / t.step;
    let grad_accum = cfg.grad_accum();
    let layers_per_stage = cfg.split.layers_per_stage(cfg.pp);

    let mut parts: Vec<String> = Vec::new();
    if cfg.tp > 1 {
        if cfg.tp <= c.gpus_per_node {
            parts.push(format!("TP {} inside each {} node", cfg.tp, link));
        } else {
            parts.push(format!("TP {} crossing nodes (over the node network, expensive)", cfg.tp));
        }
    } else {
        parts.push("no tensor parallelism".to_string());
    }
    if cfg.cp > 1 {
        parts.push(format!("CP {} (ring attention, {} tokens of each sequence per GPU)", cfg.cp, c.seq_u / cfg.cp));
    }
    if cfg.ep > 1 {
        let whole = if cfg.etp == 1 && cfg.tp > 1 {
            format!(
                ", experts whole (expert TP 1), EP over the {} TP x DP{} ranks",
                cfg.tp * cfg.dp * cfg.cp,
                if cfg.cp > 1 { " x CP" } else { "" }
            )
        } else {
            String::new()
        };
        parts.push(format!(
            "EP {} ({} of {} experts per GPU{whole}, all-to-all {:.1}% of the step)",
            cfg.ep,
            c.experts / cfg.ep,
            c.experts,
            t.ep_comm / t.step * 100.0
        ));
    } else if c.experts > 0 {
        parts.push(format!("all {} experts on every GPU (no expert parallelism)", c.experts));
    }
    if cfg.pp > 1 {
        let sched = if cfg.vp > 1 {
            format!("{} virtual stages per GPU (interleaved 1F1B)", cfg.vp)
        } else {
            "1F1B".to_string()
        };
        let split = match cfg.split.kind {
            StageSplit::Even => format!("{} layers per stage", cfg.split.first),
            // With two stages there is no middle one to name.
            StageSplit::EmbeddingAndLoss if cfg.pp == 2 => format!(
                "embedding and loss counted as a layer each: {} layers on each of the two stages",
                cfg.split.first
            ),
            StageSplit::EmbeddingAndLoss => format!(
                "embedding and loss counted as a layer each: first and last stages {} layers, {} {}",
                cfg.split.first,
                middle_stages(cfg.pp),
                cfg.split.mid
            ),
            StageSplit::Uneven if cfg.pp == 2 => {
                format!("uneven stages: first {}, last {} layers", cfg.split.first, cfg.split.last)
            }
            StageSplit::Uneven => format!(
                "uneven stages: first {}, last {}, {} {} layers",
                cfg.split.first,
                cfg.split.last,
                middle_stages(cfg.pp),
                cfg.split.mid
            ),
            StageSplit::Layout => {
                let stages = if cfg.pp == 2 {
                    format!("first {}, last {} layers", cfg.split.first, cfg.split.last)
                } else {
                    format!(
                        "first {}, last {}, {} {} layers",
                        cfg.split.first,
                        cfg.split.last,
                        middle_stages(cfg.pp),
                        cfg.split.mid
                    )
                };
                format!(
                    "pipeline layout {}: embedding and loss counted as a layer each, spread over the {} virtual stages; {stages}",
                    cfg.split.pipeline_layout(cfg.pp, cfg.vp),
                    cfg.pp * cfg.vp
                )
            }
        };
        // Uneven stages with interleaving: say what each virtual chunk holds.
        let split = if cfg.split.kind == StageSplit::Uneven && cfg.vp > 1 {
            let v = cfg.vp;
            if cfg.pp == 2 {
                format!("{split}; {}/{} per virtual stage", cfg.split.first / v, cfg.split.last / v)
            } else {
                let (f, m, l) = (cfg.split.first / v, cfg.split.mid / v, cfg.split.last / v);
                format!("{split}; {f}/{m}/{l} per virtual stage")
            }
        } else {
            split
        };
        parts.push(format!("PP {} with {} ({split}), bubble {:.1}%", cfg.pp, sched, bubble_fraction * 100.0));
    }
    if cfg.dp * cfg.cp == 1 && cfg.zero > 0 {
        parts.push(format!("ZeRO-{} for the CPU offload (one data-parallel rank: nothing sharded)", cfg.zero));
    } else if cfg.dp > 1 || cfg.zero > 0 {
        let zero = match cfg.zero {
            0 => "plain DDP (no ZeRO)",
            1 => "ZeRO-1 shards the optimizer states",
            2 => "ZeRO-2 shards optimizer states and gradients",
            _ => "ZeRO-3 shards weights, gradients and optimizer states",
        };
        let over = if cfg.cp > 1 { format!(" over the {} DP x CP ranks", cfg.dp * cfg.cp) } else { String::new() };
        parts.push(format!("DP {} with {}{over}", cfg.dp, zero));
    }
    match cfg.offload {
        Offload::None => {}
        o => parts.push(format!(
            "CPU offload of the {} ({} GB of host memory per node, {:.1} s per step in PCIe transfers and the CPU Adam step)",
            if o == Offload::Optimizer { "optimizer states" } else { "optimizer states and parameters" },
            gb(cand.host_per_node),
            t.offload
        )),
    }
    parts.push(format!(
        "micro-batch {} x {}",
        cfg.micro_batch,
        count(grad_accum, "accumulation step", "accumulation steps")
    ));
    let mut knobs = recompute_phrase(cfg.recompute);
    if cfg.sp {
        knobs.push_str(", sequence parallel");
    }
    parts.push(knobs);
    let m = &cand.mem;
    let mut text = format!(
        "{}; fits in {} of {} GB per {} (weights {}, grads {}, optimizer {}, activations {} GB); predicted {:.0} tokens/s, {:.0} TFLOP/s per GPU ({:.0}% MFU vs {} peak), communication {:.1}% of the step.",
        parts.join(", "),
        gb(m.total as f64),
        gb(m.usable as f64),
        gpu_name,
        gb(m.weights as f64),
        gb(m.gradients as f64),
        gb(m.optimizer as f64),
        gb(m.activations as f64),
        cand.tokens_per_s,
        tflops,
        mfu * 100.0,
        if c.precision == super::types::Precision::Fp8 { "FP8" } else { "BF16" },
        comm_fraction * 100.0,
    );
    if !c.calibrated {
        text.push_str(
            " Uncalibrated, conservative: no published runs for this GPU; PCIe-only cards make TP expensive.",
        );
    }
    let mut notes = Vec::new();
    let idle_gpus = c.gpus - cfg.gpus();
    if cfg.global_batch != c.global_batch {
        notes.push(format!(
            "global batch {} does not divide by the {} data-parallel ranks; this plan runs {} sequences per step (the nearest multiple of {})",
            c.global_batch, cfg.dp, cfg.global_batch, cfg.dp
        ));
    }
    if idle_gpus > 0 {
        notes.push(format!(
            "uses {} of {} GPUs ({} idle): no split over all {} fits and divides (heads {}, layers {})",
            cfg.gpus(),
            c.gpus,
            idle_gpus,
            c.gpus,
            c.heads,
            c.layers
        ));
    }
    if t.step > 60.0 {
        notes.push(format!(
            "one optimizer step takes {:.1} min at a global batch of {} sequences x {} tokens; a global batch of {} would take about 20 s per step",
            t.step / 60.0,
            cfg.global_batch,
            c.seq_u,
            suggested_batch(cfg.global_batch, cfg.dp * cfg.micro_batch, t.step, 20.0),
        ));
    }
    for note in &notes {
        text.push_str(&format!(" Note: {note}."));
    }
    Plan {
        workload: kind,
        tp: cfg.tp,
        pp: cfg.pp,
        dp: cfg.dp,
        cp: cfg.cp,
        ep: cfg.ep,
        etp: (cfg.etp != cfg.tp).then_some(cfg.etp),
        layers_per_stage,
        stage_split: cfg.split.kind,
        offload: cfg.offload,
        host_memory_per_node_bytes: cand.host_per_node as u64,
        global_batch: cfg.global_batch,
        idle_gpus,
        notes,
        vp: cfg.vp,
        micro_batch: cfg.micro_batch,
        grad_accum,
        zero_stage: cfg.zero,
        sequence_parallel: cfg.sp,
        recompute: cfg.recompute,
        replicas: cfg.dp,
        memory_per_gpu_bytes: m.total,
        memory: *m,
        step_time_s: t.step,
        tokens_per_s: cand.tokens_per_s,
        prefill_tokens_per_s: None,
        images_per_s: None,
        serving: None,
        tflops_per_gpu: tflops,
        hardware_tflops_per_gpu: hw,
        mfu,
        bubble_fraction,
        comm_fraction,
        calibrated: c.calibrated,
        summary: plain_summary(c, cand, gpu_name),
        explanation: text,
    }
}
