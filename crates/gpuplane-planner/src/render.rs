//! Plain-text tables of a plan result and of advice, for the CLI.

use super::cost::{MEMORY_HEADROOM_MARGIN, Split, headroom_note};
use super::types::{AdviceResult, Offload, Plan, PlanResult, StageSplit, WorkloadKind, count};
use std::fmt::Write;

fn gb(bytes: u64) -> f64 {
    bytes as f64 / 1e9
}

/// "8" when every stage holds 8 layers, else "first/middle/last", e.g. "7/8/7".
pub fn stages_label(p: &Plan) -> String {
    match p.layers_per_stage.as_slice() {
        [] => "-".to_string(),
        [one] => one.to_string(),
        all => {
            let first = all[0];
            let last = all[all.len() - 1];
            let mid = if all.len() > 2 { all[1] } else { first };
            if first == mid && mid == last {
                first.to_string()
            } else if all.len() == 2 {
                format!("{first}/{last}")
            } else {
                format!("{first}/{mid}/{last}")
            }
        }
    }
}

fn render_diffusion(s: &mut String, plans: &[Plan]) {
    let _ = writeln!(
        s,
        "{:>4} {:>8} {:>6} {:>10} {:>10} {:>12}",
        "rank", "replicas", "batch", "mem GB", "images/s", "s per batch"
    );
    for (i, p) in plans.iter().enumerate() {
        let _ = writeln!(
            s,
            "{:>4} {:>8} {:>6} {:>10.1} {:>10.2} {:>12.1}",
            i + 1,
            p.replicas,
            p.micro_batch,
            gb(p.memory_per_gpu_bytes),
            p.images_per_s.unwrap_or(0.0),
            p.step_time_s,
        );
    }
}

fn render_inference(s: &mut String, plans: &[Plan]) {
    let _ = writeln!(
        s,
        "{:>4} {:>4} {:>4} {:>8} {:>6} {:>10} {:>14} {:>14} {:>9} {:>9}",
        "rank", "tp", "pp", "replicas", "conc", "mem GB", "decode tok/s", "prefill tok/s", "TTFT ms", "TPOT ms"
    );
    let mut tight = false;
    for (i, p) in plans.iter().enumerate() {
        let flag = headroom_note(&p.memory).is_some();
        tight |= flag;
        let ttft = p.serving.as_ref().map_or(0.0, |v| v.ttft_s);
        let _ = writeln!(
            s,
            "{:>4} {:>4} {:>4} {:>8} {:>6} {:>10} {:>14.0} {:>14.0} {:>9.0} {:>9.2}",
            i + 1,
            p.tp,
            p.pp,
            p.replicas,
            p.micro_batch,
            format!("{:.1}{}", gb(p.memory_per_gpu_bytes), if flag { "!" } else { "" }),
            p.tokens_per_s,
            p.prefill_tokens_per_s.unwrap_or(0.0),
            ttft * 1e3,
            p.step_time_s * 1e3,
        );
    }
    let _ = writeln!(
        s,
        "Columns: tp tensor-parallel and pp pipeline degrees of one replica; replicas serving side by side; conc\n\
         sequences in flight per replica; mem GB per GPU (weights, KV cache, activations); decode tokens/s of the\n\
         whole cluster with the prompts' prefill charged, and its prefill capacity alone; TTFT time to first token;\n\
         TPOT time per output token (a decode step of all sequences with the prefills interleaved)."
    );
    headroom_legend(s, tight);
}

fn headroom_legend(s: &mut String, tight: bool) {
    if tight {
        let _ = writeln!(
            s,
            "! memory within {:.0}% of the usable memory per GPU: little headroom for allocator peaks (see the plan's notes).",
            MEMORY_HEADROOM_MARGIN * 100.0
        );
    }
}

/// How the layers are split over the stages, as the `split` column shows it.
pub fn split_label(p: &Plan) -> &'static str {
    if p.pp <= 1 {
        return "-";
    }
    match p.stage_split {
        StageSplit::Even => "even",
        StageSplit::EmbeddingAndLoss => "emb+loss",
        StageSplit::Uneven => "uneven",
        StageSplit::Layout => "layout",
    }
}

/// Megatron-LM's flags (name without `--`, value) for how a training plan lays its model's
/// `layers` over the pipeline stages, next to `--pipeline-model-parallel-size`: the embedding-and-
/// loss split as `--account-for-embedding/loss-in-pipeline-split`, uneven stages as
/// `--decoder-first/last-pipeline-num-layers` (then the virtual degree only as
/// `--num-virtual-stages-per-pipeline-rank`, the one `validate_args` takes beside them), a layout
/// as `--pipeline-model-parallel-layout` (which replaces every virtual-stage flag: the degree is
/// its number of stages over `pp`), and otherwise `--num-layers-per-virtual-pipeline-stage`.
pub fn megatron_pipeline_args(plan: &Plan, layers: u32) -> Vec<(&'static str, Option<String>)> {
    let mut args: Vec<(&'static str, Option<String>)> = Vec::new();
    if plan.pp <= 1 {
        return args;
    }
    let (pp, vp) = (plan.pp, plan.vp.max(1));
    let per_chunk = |units: u32| Some((units / (pp * vp)).max(1).to_string());
    match plan.stage_split {
        StageSplit::Layout => {
            let split = Split::from_stages(plan.stage_split, &plan.layers_per_stage);
            args.push(("pipeline-model-parallel-layout", Some(split.pipeline_layout(pp, vp))));
        }
        StageSplit::Uneven => {
            if let (Some(first), Some(last)) = (plan.layers_per_stage.first(), plan.layers_per_stage.last()) {
                args.push(("decoder-first-pipeline-num-layers", Some(first.to_string())));
                args.push(("decoder-last-pipeline-num-layers", Some(last.to_string())));
            }
            if vp > 1 {
                args.push(("num-virtual-stages-per-pipeline-rank", Some(vp.to_string())));
            }
        }
        StageSplit::EmbeddingAndLoss => {
            args.push(("account-for-embedding-in-pipeline-split", None));
            args.push(("account-for-loss-in-pipeline-split", None));
            if vp > 1 {
                args.push(("num-layers-per-virtual-pipeline-stage", per_chunk(layers + 2)));
            }
        }
        StageSplit::Even => {
            if vp > 1 {
                args.push(("num-layers-per-virtual-pipeline-stage", per_chunk(layers)));
            }
        }
    }
    args
}

/// Megatron-LM's expert-parallel flags of a training plan of an MoE model: the EP degree, and the
/// expert tensor-parallel degree where it is not Megatron's default (`tp`).
pub fn megatron_expert_args(plan: &Plan) -> Vec<(&'static str, Option<String>)> {
    let mut args = vec![("expert-model-parallel-size", Some(plan.ep.max(1).to_string()))];
    if let Some(etp) = plan.etp.filter(|&e| e != plan.tp) {
        args.push(("expert-tensor-parallel-size", Some(etp.to_string())));
    }
    args
}

/// What the training table's columns mean, printed under it.
const TRAINING_LEGEND: &str = "\
Columns: tp tensor-parallel, cp context-parallel (ring attention), ep expert-parallel, pp pipeline stages
and dp data-parallel degrees; layers per pipeline stage (first/middle/last); split of the layers over the
stages (even; emb+loss: the embedding and the loss count as a layer each; uneven: first/last stages hold
fewer; layout: Megatron's pipeline layout, embedding and loss counted, any layer count); vp virtual stages
per GPU; mb micro-batch and gbs global batch, in sequences; accum
gradient-accumulation steps; zero ZeRO stage (0 = none; at dp 1 it shards nothing and only allows CPU
offload); sp sequence parallelism; recompute activation recomputation; offload CPU offload; mem GB per GPU
(the most loaded); step s per optimizer step; tokens/s of the whole cluster; TFLOP/s model FLOPs per GPU;
MFU% of the GPU's peak; bubble% pipeline idle and comm% exposed communication, shares of the step.";

/// The knobs of a training plan (what the table does not show is listed when two rows look alike).
fn knob_differences(a: &Plan, b: &Plan) -> Vec<&'static str> {
    let mut out = Vec::new();
    let mut check = |name: &'static str, same: bool| {
        if !same {
            out.push(name);
        }
    };
    check("stage_split", a.stage_split == b.stage_split);
    check("layers_per_stage", a.layers_per_stage == b.layers_per_stage);
    check("offload", a.offload == b.offload);
    check("etp", a.etp == b.etp);
    check("host_memory_per_node_bytes", a.host_memory_per_node_bytes == b.host_memory_per_node_bytes);
    check("zero_stage", a.zero_stage == b.zero_stage);
    check("recompute", a.recompute == b.recompute);
    check("sequence_parallel", a.sequence_parallel == b.sequence_parallel);
    check("idle_gpus", a.idle_gpus == b.idle_gpus);
    out
}

fn render_training(s: &mut String, plans: &[Plan]) {
    let offload = plans.iter().any(|p| p.offload != Offload::None);
    let _ = write!(
        s,
        "{:>4} {:>3} {:>3} {:>3} {:>3} {:>5} {:>9} {:>8} {:>3} {:>3} {:>5} {:>5} {:>4} {:>3} {:>9}",
        "rank", "tp", "cp", "ep", "pp", "dp", "layers", "split", "vp", "mb", "accum", "gbs", "zero", "sp", "recompute"
    );
    if offload {
        let _ = write!(s, " {:>9}", "offload");
    }
    let _ = writeln!(
        s,
        " {:>8} {:>9} {:>12} {:>8} {:>6} {:>7} {:>6}",
        "mem GB", "step s", "tokens/s", "TFLOP/s", "MFU%", "bubble%", "comm%"
    );
    let mut shown: Vec<String> = Vec::new();
    let mut tight = false;
    for (i, p) in plans.iter().enumerate() {
        let mut row = format!(
            "{:>3} {:>3} {:>3} {:>3} {:>5} {:>9} {:>8} {:>3} {:>3} {:>5} {:>5} {:>4} {:>3} {:>9}",
            p.tp,
            p.cp,
            p.ep,
            p.pp,
            p.dp,
            stages_label(p),
            split_label(p),
            p.vp,
            p.micro_batch,
            p.grad_accum,
            p.global_batch,
            p.zero_stage,
            if p.sequence_parallel { "on" } else { "off" },
            p.recompute.as_str(),
        );
        if offload {
            let label = match p.offload {
                Offload::None => "none",
                Offload::Optimizer => "optim",
                Offload::OptimizerAndParams => "optim+par",
            };
            let _ = write!(row, " {label:>9}");
        }
        let flag = headroom_note(&p.memory).is_some();
        tight |= flag;
        let mem = format!("{:.1}{}", gb(p.memory_per_gpu_bytes), if flag { "!" } else { "" });
        let _ = writeln!(
            s,
            "{:>4} {row} {:>8} {:>9.3} {:>12.0} {:>8.1} {:>6.1} {:>7.1} {:>6.1}",
            i + 1,
            mem,
            p.step_time_s,
            p.tokens_per_s,
            p.tflops_per_gpu,
            p.mfu * 100.0,
            p.bubble_fraction * 100.0,
            p.comm_fraction * 100.0,
        );
        shown.push(row);
    }
    for (i, row) in shown.iter().enumerate() {
        if let Some(j) = shown[..i].iter().position(|r| r == row) {
            let fields = knob_differences(&plans[j], &plans[i]);
            let what = if fields.is_empty() { "nothing the planner chooses".to_string() } else { fields.join(", ") };
            let _ =
                writeln!(s, "Rows {} and {} show the same columns; they differ in {what} (see --json).", j + 1, i + 1);
        }
    }
    let _ = writeln!(s, "{TRAINING_LEGEND}");
    headroom_legend(s, tight);
}

/// Renders the ranked plans as an aligned table (columns by kind of model and workload)
/// followed by the best plan's explanation and notes.
pub fn render_table(result: &PlanResult) -> String {
    let mut s = String::new();
    if let Some(best) = result.plans.first().filter(|p| !p.summary.is_empty()) {
        let _ = writeln!(s, "Best plan, in plain words: {}\n", best.summary);
    }
    match result.plans.first() {
        Some(p) if p.images_per_s.is_some() => render_diffusion(&mut s, &result.plans),
        Some(p) if p.workload == WorkloadKind::Inference => render_inference(&mut s, &result.plans),
        Some(_) => render_training(&mut s, &result.plans),
        None => {}
    }
    let _ = writeln!(
        s,
        "{} evaluated, {} in memory.",
        count(result.evaluated, "configuration", "configurations"),
        if result.feasible == 1 { "1 fits".to_string() } else { format!("{} fit", result.feasible) }
    );
    if let Some(alike) = indistinguishable(&result.plans) {
        let _ = writeln!(s, "{alike}");
    }
    if let Some(best) = result.plans.first() {
        let _ = writeln!(s, "Best, in the planner's terms: {}", best.explanation);
    }
    s
}

/// Plans whose predictions are this close are one plan as far as the cost model can tell.
const ALIKE: f64 = 0.01;

/// When the best plans' predicted throughputs are within [`ALIKE`] of the best's, says so: rows apart by
/// fractions of a percent are not a ranking the cost model can stand behind.
fn indistinguishable(plans: &[Plan]) -> Option<String> {
    let best = plans.first()?.tokens_per_s;
    let alike = plans.iter().take_while(|p| p.tokens_per_s >= best * (1.0 - ALIKE)).count();
    (alike > 1 && best > 0.0).then(|| {
        format!(
            "Rows 1 to {alike} predict within {:.0}% of each other: the model cannot tell them apart, so take the \
             first (or the one whose layout suits you).",
            ALIKE * 100.0
        )
    })
}

/// The options said in plain words before the table: the cheapest and the fastest (one line when they are
/// the same option).
fn plain_options(result: &AdviceResult) -> Vec<(&'static str, &super::types::AdviceOption)> {
    let cheapest = result.options.iter().find(|o| o.cheapest);
    let fastest = result.options.iter().find(|o| o.fastest);
    match (cheapest, fastest) {
        (Some(c), Some(f)) if std::ptr::eq(c, f) => vec![("Cheapest and fastest", c)],
        (c, f) => {
            let mut out = Vec::new();
            if let Some(c) = c {
                out.push(("Cheapest", c));
            }
            if let Some(f) = f {
                out.push(("Fastest", f));
            }
            out
        }
    }
}

/// Minor units as the console shows them: hundredths, two decimals.
pub(crate) fn money(minor: i64, currency: &str) -> String {
    format!("{}{}.{:02} {currency}", if minor < 0 { "-" } else { "" }, (minor / 100).abs(), (minor % 100).abs())
}

/// Renders advice as a table, the frontier cheapest first, with the tie rule and the skipped
/// pools; `name` turns a pool id into what to print.
pub fn render_advice(result: &AdviceResult, name: &dyn Fn(&str) -> String) -> String {
    let mut s = String::new();
    if result.options.is_empty() {
        let _ = writeln!(
            s,
            "{}",
            if result.mixes.is_empty() { "No pool can run this." } else { "No single pool can run this." }
        );
    } else {
        for (label, option) in plain_options(result) {
            let _ = writeln!(
                s,
                "{label}: {} x {} in {} for about {}, {}. {}",
                option.gpu_count,
                option.gpu_key,
                name(&option.pool_id),
                super::types::duration(option.hours * 3600.0),
                money(option.cost_minor, &option.currency),
                option.plan.summary
            );
        }
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "{:>3}  {:<24} {:>14} {:>22} {:>9} {:>14}  meets / label",
            "#", "pool", "GPUs", "layout", "hours", "cost"
        );
        for (i, o) in result.options.iter().enumerate() {
            let mut flags: Vec<&str> = Vec::new();
            if !o.meets_deadline {
                flags.push("misses the deadline");
            }
            if !o.meets_budget {
                flags.push("over budget");
            }
            if !o.meets_load {
                flags.push("below the load");
            }
            if o.cheapest {
                flags.push("cheapest");
            }
            if o.fastest {
                flags.push("fastest");
            }
            let mut pool = name(&o.pool_id);
            if pool.chars().count() > 24 {
                pool = pool.chars().take(23).collect::<String>() + "~";
            }
            let _ = writeln!(
                s,
                "{:>3}  {:<24} {:>14} {:>22} {:>9.2} {:>14}  {}",
                i + 1,
                pool,
                format!("{} x {}", o.gpu_count, o.gpu_key),
                format!("tp {} pp {} dp {}", o.plan.tp, o.plan.pp, o.plan.dp),
                o.hours,
                money(o.cost_minor, &o.currency),
                flags.join(", ")
            );
        }
        let _ = writeln!(
            s,
            "The cost/time frontier over every pool and GPU count: nothing left out is both cheaper and faster than \
             an option shown; costs within {:.0}% count as equal and the faster is shown. cheapest = least cost shown, \
             fastest = least hours shown (serving: most throughput).",
            f64::from(result.cost_tie_bps) / 100.0
        );
        if let Some(best) = result.options.first() {
            let _ = writeln!(s, "Option 1, in the planner's terms: {}", best.plan.explanation);
        }
    }
    for m in &result.mixes {
        let parts: Vec<String> = m
            .parts
            .iter()
            .map(|p| {
                format!(
                    "{} x {} in {} ({})",
                    p.gpu_count,
                    p.gpu_key,
                    name(&p.pool_id),
                    money(p.cost_minor, &m.currency)
                )
            })
            .collect();
        let mut flags: Vec<&str> = Vec::new();
        if m.cheaper {
            flags.push("cheaper than any one pool");
        }
        if m.faster {
            flags.push("faster than any one pool");
        }
        if !m.meets_deadline {
            flags.push("misses the deadline");
        }
        if !m.meets_budget {
            flags.push("over budget");
        }
        let _ = writeln!(
            s,
            "Mix: {} in {:.2} h for {} ({}). {}",
            parts.join(" + "),
            m.hours,
            money(m.cost_minor, &m.currency),
            flags.join(", "),
            m.plan.explanation
        );
    }
    for skipped in &result.skipped {
        let _ = writeln!(s, "Skipped {}: {}", name(&skipped.pool_id), skipped.reason);
    }
    s
}
