//! Exhaustive search over training configurations.
//!
//! Divisibility rules (Megatron-LM's):
//! - `tp * pp * dp == gpus`; `heads % tp == 0`, `kv_heads % tp == 0` (query groups are split,
//!   never replicated, in training), `hidden % tp == 0`;
//! - `tp` divides `gpus_per_node`, or is a multiple of it (crossing nodes, costed over the
//!   node network with a heavy penalty);
//! - `layers % (pp * vp) == 0`; `vp > 1` needs `pp > 1` and `grad_accum % pp == 0`;
//! - `global_batch % (micro_batch * dp) == 0`, micro-batch at most 64;
//! - sequence parallelism only with `tp > 1`; ZeRO stages 1-3 only with `dp > 1`.
//!
//! Pruning: memory is monotone in the micro-batch and smallest at `vp == 1`, so the
//! micro-batch loop stops at the first size whose leanest variant does not fit; the time
//! model only runs on configurations that fit. Only the top N are kept (sorted insertion).

use super::cost::{self, Config, Timing, TrainCtx};
use super::types::{MemoryBreakdown, Pins, Plan, Recompute, WorkloadKind};
use std::cmp::Ordering;

/// Largest micro-batch the search considers.
pub const MAX_MICRO_BATCH: u32 = 64;

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
    pub timing: Timing,
    pub tokens_per_s: f64,
}

fn rc_index(r: Recompute) -> u8 {
    match r {
        Recompute::None => 0,
        Recompute::Selective => 1,
        Recompute::Full => 2,
    }
}

/// Best first: more tokens/s, then less memory, then a fixed order of the knobs.
pub fn rank(a: &Candidate, b: &Candidate) -> Ordering {
    b.tokens_per_s.total_cmp(&a.tokens_per_s).then(a.mem.total.cmp(&b.mem.total)).then_with(|| {
        let key = |c: &Config| (c.tp, c.pp, c.vp, c.micro_batch, c.zero, c.sp, rc_index(c.recompute));
        key(&a.cfg).cmp(&key(&b.cfg))
    })
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
    pub any_divisible: bool,
}

/// Searches all configurations; with `first_only` it stops at the first one that fits.
pub fn search(c: &TrainCtx, pins: &Pins, top_n: usize, first_only: bool) -> Outcome {
    let mut out =
        Outcome { top: TopN::new(top_n), evaluated: 0, feasible: 0, min_needed: f64::INFINITY, any_divisible: false };
    let n = c.gpus;
    let gpn = c.gpus_per_node;
    let rcs: Vec<Recompute> = match pins.recompute {
        Some(r) => vec![r],
        None => Recompute::ALL.to_vec(),
    };
    let mut bs: Vec<u32> = Vec::new();
    let mut nv: Vec<u64> = Vec::new();
    for tp in divisors(n) {
        if pins.tp.is_some_and(|x| x != tp)
            || !c.heads.is_multiple_of(tp)
            || !c.kv_heads.is_multiple_of(tp)
            || !c.hidden_u.is_multiple_of(tp)
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
        for pp in divisors(n / tp) {
            if pins.pp.is_some_and(|x| x != pp) || !c.layers.is_multiple_of(pp) {
                continue;
            }
            let dp = n / tp / pp;
            if pins.dp.is_some_and(|x| x != dp) || !c.global_batch.is_multiple_of(dp) {
                continue;
            }
            let per_dp = c.global_batch / dp;
            bs.clear();
            bs.extend(
                divisors(per_dp)
                    .into_iter()
                    .filter(|&b| b <= MAX_MICRO_BATCH && pins.micro_batch.is_none_or(|x| x == b)),
            );
            let vs: Vec<u32> = divisors(c.layers / pp)
                .into_iter()
                .filter(|&v| (v == 1 || pp > 1) && pins.vp.is_none_or(|x| x == v))
                .collect();
            if bs.is_empty() || vs.is_empty() {
                continue;
            }
            nv.clear();
            for &b in &bs {
                let m = per_dp / b;
                let cnt = vs.iter().filter(|&&v| v == 1 || m.is_multiple_of(pp)).count() as u64;
                nv.push(cnt);
            }
            let per_rc_sp: u64 = nv.iter().sum();
            let inner = per_rc_sp * rcs.len() as u64 * sps.len() as u64;
            if inner == 0 {
                continue;
            }
            let zeros: &[u8] = match pins.zero_stage {
                Some(0) => &[0],
                Some(1) => &[1],
                Some(2) => &[2],
                Some(3) => &[3],
                Some(_) => &[],
                None if dp == 1 => &[0],
                None => &[0, 1, 2, 3],
            };
            for &zero in zeros {
                out.evaluated += inner;
                out.any_divisible = true;
                let st = cost::model_states(c, tp, pp, dp, zero);
                for &rc in &rcs {
                    for &sp in sps {
                        for (bi, &b) in bs.iter().enumerate() {
                            let mut cfg = Config { tp, pp, dp, vp: vs[0], micro_batch: b, zero, sp, recompute: rc };
                            // Leanest variant first: memory only grows with b and vp.
                            let lean = cost::memory(c, &cfg, &st);
                            out.min_needed = out.min_needed.min(lean.total as f64);
                            if lean.total as f64 > c.usable {
                                break;
                            }
                            if nv[bi] == 0 {
                                continue;
                            }
                            let m = per_dp / b;
                            for &v in &vs {
                                if v > 1 && !m.is_multiple_of(pp) {
                                    continue;
                                }
                                cfg.vp = v;
                                let mem = if v == vs[0] { lean } else { cost::memory(c, &cfg, &st) };
                                if mem.total as f64 > c.usable {
                                    continue;
                                }
                                out.feasible += 1;
                                let timing = cost::timing(c, &cfg, &st);
                                let tokens = f64::from(c.global_batch) * c.seq / timing.step;
                                out.top.push(Candidate { cfg, mem, timing, tokens_per_s: tokens });
                                if first_only {
                                    return out;
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

fn gb(bytes: f64) -> String {
    format!("{:.1}", bytes / 1e9)
}

/// Turns a candidate into a public plan with its explanation.
pub fn to_plan(c: &TrainCtx, cand: &Candidate, kind: WorkloadKind, gpu_name: &str, link: &str) -> Plan {
    let cfg = cand.cfg;
    let t = &cand.timing;
    let gpus = f64::from(c.gpus);
    let tflops = c.model_flops_per_step / t.step / gpus / 1e12;
    let hw = t.hardware_flops_per_step / t.step / gpus / 1e12;
    let mfu = tflops * 1e12 / c.peak;
    let bubble_fraction = t.bubble / t.step;
    let comm_fraction = (t.tp_comm + t.pp_comm + t.dp_comm) / t.step;
    let grad_accum = cfg.grad_accum(c.global_batch);

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
    if cfg.pp > 1 {
        let sched = if cfg.vp > 1 {
            format!("{} virtual stages per GPU (interleaved 1F1B)", cfg.vp)
        } else {
            "1F1B".to_string()
        };
        parts.push(format!("PP {} with {}, bubble {:.1}%", cfg.pp, sched, bubble_fraction * 100.0));
    }
    if cfg.dp > 1 {
        let zero = match cfg.zero {
            0 => "plain DDP (no ZeRO)",
            1 => "ZeRO-1 shards the optimizer states",
            2 => "ZeRO-2 shards optimizer states and gradients",
            _ => "ZeRO-3 shards weights, gradients and optimizer states",
        };
        parts.push(format!("DP {} with {}", cfg.dp, zero));
    }
    parts.push(format!("micro-batch {} x {} accumulation steps", cfg.micro_batch, grad_accum));
    let mut knobs = match cfg.recompute {
        Recompute::None => "no recompute".to_string(),
        r => format!("{} recompute", r.as_str()),
    };
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
    Plan {
        workload: kind,
        tp: cfg.tp,
        pp: cfg.pp,
        dp: cfg.dp,
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
        tflops_per_gpu: tflops,
        hardware_tflops_per_gpu: hw,
        mfu,
        bubble_fraction,
        comm_fraction,
        calibrated: c.calibrated,
        explanation: text,
    }
}
