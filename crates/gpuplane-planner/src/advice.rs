//! Rental advice: which pool, how many GPUs, how long, at what cost.
//!
//! For each pool and each GPU count free now (powers of two below a node, then whole nodes:
//! every count up to 16 nodes, then 24, 32, 48, 64, ... nodes) the best plan is searched;
//! training hours = tokens / predicted tokens/s; serving uses the smallest count that
//! sustains the load for `serving_hours`. Cost is in integer minor units, rounded up once:
//! `cost = ceil(gpus * hours * price_per_gpu_hour_minor)`.
//!
//! What is shown is the cost/time frontier over every (pool, GPU count) option ([`frontier`]):
//! an option is left out when another one is at least as fast and costs no more, or costs
//! within [`COST_TIE_BPS`] (1%) more: a cent never buys hours of waiting. Options meeting every
//! constraint come first, then the rest; each part cheapest (and so slowest) first. The labels
//! hold over what is shown: `cheapest` is the least cost of its currency, `fastest` the least
//! hours (serving: the most throughput). A pool with nothing shown is in `skipped`, with the
//! option that beats its best.
//!
//! Training and LoRA may also run on two pools at once ([`mixes`]): for each pair of pools of
//! one currency among the [`MIX_POOLS`] with the most free GPUs, the mixed planner
//! ([`best_mix`]) plans over both pools' free whole nodes, and its best plan using both is
//! priced per pool by the same rounding rule over the GPUs it uses. A mix is shown, in
//! `mixes`, when it is cheaper or faster than every single-pool option of its currency; the mixes
//! shown are their own cost/time frontier ([`frontier`]).

use super::mixed::{MixedInput, best_mix};
use super::render::money;
use super::search::best_plan;
use super::types::{
    AdviceMix, AdviceMixPart, AdviceOption, AdviceRequest, AdviceResult, ModelArch, Pins, PlanError, PlanInput,
    PoolOffer, SkippedPool, SmallestFit, Workload,
};
use super::validate::{resolve_cluster, resolve_model, resolve_workload, validate_gpu};

const MAX_POOLS: usize = 1000;

/// GPU counts to try in a pool with `free` GPUs.
fn pool_shapes(gpus_per_node: u32, free: u32) -> Vec<SmallestFit> {
    let mut out = Vec::new();
    let mut c = 1u32;
    while c < gpus_per_node && c <= free {
        out.push(SmallestFit { gpu_count: c, gpus_per_node: c, nodes: 1 });
        c *= 2;
    }
    let max_nodes = u64::from(free / gpus_per_node.max(1));
    // Every node count up to 16, then 1.5x and 2x powers of two: 24, 32, 48, 64, ...
    let mut counts: Vec<u64> = (1..=max_nodes.min(16)).collect();
    let mut k = 16u64;
    while k * 3 / 2 <= max_nodes {
        counts.push(k * 3 / 2);
        if k * 2 <= max_nodes {
            counts.push(k * 2);
        }
        k *= 2;
    }
    for nodes in counts {
        out.push(SmallestFit {
            gpu_count: (nodes * u64::from(gpus_per_node)) as u32,
            gpus_per_node,
            nodes: nodes as u32,
        });
    }
    out
}

fn cost_minor(gpus: u32, hours: f64, price: i64) -> i64 {
    let cost = (f64::from(gpus) * hours * price as f64).ceil();
    if cost.is_finite() && cost < i64::MAX as f64 { cost.max(0.0) as i64 } else { i64::MAX }
}

fn positive(field: &str, v: f64) -> Result<f64, PlanError> {
    if v.is_finite() && v > 0.0 { Ok(v) } else { Err(PlanError::invalid(field, "must be a finite positive number")) }
}

/// Advises which pool to rent (see the module docs). Pure and fast: no I/O.
pub fn advice(req: &AdviceRequest) -> Result<AdviceResult, PlanError> {
    let (model_name, model) = resolve_model(&req.model)?;
    if req.pools.len() > MAX_POOLS {
        return Err(PlanError::invalid("pools", format!("at most {MAX_POOLS} pools")));
    }
    if let Some(d) = req.deadline_hours {
        positive("deadline_hours", d)?;
    }
    if matches!(req.budget_minor, Some(b) if b < 0) {
        return Err(PlanError::invalid("budget_minor", "must not be negative"));
    }
    let serving = req.workload.kind == super::types::WorkloadKind::Inference;
    let t = &req.target;
    let (training_tokens, load, serving_hours) = if serving {
        let load = match (t.serving_tokens_per_s, t.requests_per_s) {
            (Some(x), _) => positive("target.serving_tokens_per_s", x)?,
            (None, Some(r)) => {
                positive("target.requests_per_s", r)? * f64::from(t.tokens_per_request.unwrap_or(256).max(1))
            }
            (None, None) => {
                return Err(PlanError::invalid("target", "inference needs serving_tokens_per_s or requests_per_s"));
            }
        };
        let hours = positive("target.serving_hours", t.serving_hours.unwrap_or(1.0))?;
        (0.0, load, hours)
    } else {
        let tokens = match t.training_tokens {
            Some(x) if x > 0 => x as f64,
            _ => {
                return Err(PlanError::invalid("target.training_tokens", "training needs a positive number of tokens"));
            }
        };
        (tokens, 0.0, 0.0)
    };

    let mut candidates: Vec<AdviceOption> = Vec::new();
    let mut skipped = Vec::new();
    // Pools whose GPUs run the workload, with it, for the mixes.
    let mut runnable: Vec<(usize, Workload)> = Vec::new();
    // Per pool: its best option by the old one-per-pool rule, to say why a pool shows nothing.
    let mut pool_best: Vec<(usize, AdviceOption)> = Vec::new();
    for (i, pool) in req.pools.iter().enumerate() {
        validate_gpu(&pool.gpu, &format!("pools[{i}].gpu"))?;
        if pool.price_per_gpu_hour_minor < 0 {
            return Err(PlanError::invalid(&format!("pools[{i}].price_per_gpu_hour_minor"), "must not be negative"));
        }
        if pool.gpus_per_node == 0 || pool.gpus_per_node > 1024 {
            return Err(PlanError::invalid(&format!("pools[{i}].gpus_per_node"), "must be between 1 and 1024"));
        }
        if !pool.inter_node_gbps.is_finite() || pool.inter_node_gbps < 0.0 {
            return Err(PlanError::invalid(
                &format!("pools[{i}].inter_node_gbps"),
                "must be a finite non-negative number",
            ));
        }
        let workload: Workload = match resolve_workload(&req.workload, &model, &pool.gpu) {
            Ok(w) => w,
            Err(PlanError::Invalid { field, message }) if field == "workload.precision" => {
                skipped.push(SkippedPool { pool_id: pool.pool_id.clone(), reason: message });
                continue;
            }
            Err(e) => return Err(e),
        };
        runnable.push((i, workload));
        let mut best: Option<AdviceOption> = None;
        for shape in pool_shapes(pool.gpus_per_node, pool.free_gpus) {
            let Ok(cluster) = resolve_cluster(
                pool.gpu.clone(),
                shape.gpu_count,
                Some(shape.gpus_per_node),
                Some(pool.inter_node_gbps),
                Some(pool.rdma),
                None,
            ) else {
                continue;
            };
            let input = PlanInput {
                model_name: model_name.clone(),
                model: model.clone(),
                workload,
                cluster,
                pins: Pins::default(),
                top_n: 1,
            };
            let Some(plan) = best_plan(&input) else {
                continue;
            };
            let throughput = plan.tokens_per_s.max(plan.images_per_s.unwrap_or(0.0));
            let (hours, meets_load) = if serving {
                (serving_hours, throughput >= load)
            } else {
                (training_tokens / throughput / 3600.0, true)
            };
            let cost = cost_minor(shape.gpu_count, hours, pool.price_per_gpu_hour_minor);
            let meets_deadline = serving || req.deadline_hours.is_none_or(|d| hours <= d);
            let meets_budget = req.budget_minor.is_none_or(|b| cost <= b);
            let opt = AdviceOption {
                pool_id: pool.pool_id.clone(),
                gpu_key: pool.gpu.key.clone(),
                gpu_count: shape.gpu_count,
                gpus_per_node: shape.gpus_per_node,
                nodes: shape.nodes,
                plan,
                hours,
                cost_minor: cost,
                currency: pool.currency.clone(),
                meets_deadline,
                meets_budget,
                meets_load,
                cheapest: false,
                fastest: false,
            };
            if best.as_ref().is_none_or(|b| better_in_pool(&opt, b, serving)) {
                best = Some(opt.clone());
            }
            candidates.push(opt);
        }
        match best {
            Some(b) => pool_best.push((i, b)),
            None => skipped.push(SkippedPool {
                pool_id: pool.pool_id.clone(),
                reason: format!("{model_name} does not fit on the {} free {} GPUs", pool.free_gpus, pool.gpu.name),
            }),
        }
    }

    let mixes = if serving {
        Vec::new()
    } else {
        let ask = MixAsk { req, model_name: &model_name, model: &model, training_tokens };
        mixes(&ask, &runnable, &candidates)
    };

    // The frontier, per currency (costs of different currencies do not compare).
    let mut currencies: Vec<String> = candidates.iter().map(|o| o.currency.clone()).collect();
    currencies.sort();
    currencies.dedup();
    let mut options: Vec<AdviceOption> = Vec::new();
    for cur in &currencies {
        let group: Vec<&AdviceOption> = candidates.iter().filter(|o| &o.currency == cur).collect();
        let points: Vec<Point> = group
            .iter()
            .map(|o| Point {
                cost_minor: o.cost_minor,
                speed: frontier_speed(o, serving, load),
                meets_all: meets_all(o),
            })
            .collect();
        let shown = frontier(&points);
        if let Some(&first) = shown.first() {
            let mut cheapest = group[first].clone();
            cheapest.cheapest = true;
            options.push(cheapest);
            options.extend(shown[1..].iter().map(|&k| group[k].clone()));
        }
    }
    if let Some(fastest) = (0..options.len())
        .max_by(|&i, &j| speed(&options[i], serving).total_cmp(&speed(&options[j], serving)).then(j.cmp(&i)))
    {
        options[fastest].fastest = true;
    }
    // Options meeting every constraint first; each part cheapest (so slowest) first.
    options.sort_by(|a, b| {
        meets_all(b).cmp(&meets_all(a)).then_with(|| a.currency.cmp(&b.currency)).then(a.cost_minor.cmp(&b.cost_minor))
    });

    // A pool with nothing shown says which shown option beats its best one.
    for (i, best) in pool_best {
        let pool = &req.pools[i];
        if options.iter().any(|o| o.pool_id == pool.pool_id) {
            continue;
        }
        let beaten_by = options
            .iter()
            .filter(|o| o.currency == best.currency && speed(o, serving) >= speed(&best, serving))
            .min_by_key(|o| o.cost_minor);
        let reason = match beaten_by {
            Some(o) => format!(
                "not on the cost/time frontier: its best option, {} x {} in {:.2} h for {}, is beaten by {} x {} in {:.2} h for {} (at least as fast, and cheaper or within {}%)",
                best.gpu_count,
                pool.gpu.name,
                best.hours,
                money(best.cost_minor, &best.currency),
                o.gpu_count,
                o.gpu_key,
                o.hours,
                money(o.cost_minor, &o.currency),
                COST_TIE_BPS as f64 / 100.0,
            ),
            None => "not on the cost/time frontier".to_string(),
        };
        skipped.push(SkippedPool { pool_id: pool.pool_id.clone(), reason });
    }
    Ok(AdviceResult { options, skipped, cost_tie_bps: COST_TIE_BPS as u32, mixes })
}

/// Most pools whose pairs are tried as mixes: those with the most free GPUs. Each pair is one
/// [`best_mix`] search (some ms), so at most 15 of them keep the advice fast.
pub const MIX_POOLS: usize = 6;

/// What a mix is planned and priced for.
struct MixAsk<'a> {
    req: &'a AdviceRequest,
    model_name: &'a str,
    model: &'a ModelArch,
    training_tokens: f64,
}

/// Whole nodes of `pool` free now.
fn free_nodes(pool: &PoolOffer) -> u32 {
    pool.free_gpus / pool.gpus_per_node.max(1)
}

/// The mixes to show (see the module docs): `runnable` are the pools (index, workload) whose GPUs
/// run the workload, `singles` every single-pool option tried.
fn mixes(ask: &MixAsk, runnable: &[(usize, Workload)], singles: &[AdviceOption]) -> Vec<AdviceMix> {
    let pools = &ask.req.pools;
    let mut picked: Vec<&(usize, Workload)> = runnable.iter().filter(|(i, _)| free_nodes(&pools[*i]) > 0).collect();
    // The most free GPUs first (stable: ties keep the request's order), then back in request order.
    picked.sort_by_key(|(i, _)| std::cmp::Reverse(free_nodes(&pools[*i]) * pools[*i].gpus_per_node));
    picked.truncate(MIX_POOLS);
    picked.sort_by_key(|(i, _)| *i);
    let mut shown: Vec<AdviceMix> = Vec::new();
    for (k, &&(a, workload)) in picked.iter().enumerate() {
        for &&(b, _) in &picked[k + 1..] {
            if pools[a].currency != pools[b].currency {
                continue;
            }
            let Some(mix) = mix_of(ask, workload, [a, b]) else {
                continue;
            };
            let of_currency = || singles.iter().filter(|o| o.currency == mix.currency);
            let (cheaper, faster) =
                (of_currency().all(|o| mix.cost_minor < o.cost_minor), of_currency().all(|o| mix.hours < o.hours));
            if cheaper || faster {
                shown.push(AdviceMix { cheaper, faster, ..mix });
            }
        }
    }
    // Of the mixes of one currency, those on their own cost/time frontier.
    let mut out: Vec<AdviceMix> = Vec::new();
    let mut currencies: Vec<&str> = shown.iter().map(|m| m.currency.as_str()).collect();
    currencies.sort_unstable();
    currencies.dedup();
    for cur in currencies {
        let group: Vec<&AdviceMix> = shown.iter().filter(|m| m.currency == cur).collect();
        let points: Vec<Point> = group
            .iter()
            .map(|m| Point {
                cost_minor: m.cost_minor,
                speed: if m.hours > 0.0 { 1.0 / m.hours } else { f64::INFINITY },
                meets_all: m.meets_deadline && m.meets_budget,
            })
            .collect();
        out.extend(frontier(&points).into_iter().map(|k| group[k].clone()));
    }
    // As the options: meeting every constraint first, then by currency, cheapest first.
    out.sort_by(|a, b| {
        (b.meets_deadline && b.meets_budget)
            .cmp(&(a.meets_deadline && a.meets_budget))
            .then_with(|| a.currency.cmp(&b.currency))
            .then(a.cost_minor.cmp(&b.cost_minor))
    });
    out
}

/// The best plan over the free whole nodes of pools `ids` together, using both (each pool alone
/// is an option already), priced; `None` when no mix fits. `cheaper` and `faster` are left false.
fn mix_of(ask: &MixAsk, workload: Workload, ids: [usize; 2]) -> Option<AdviceMix> {
    let pools = ids.map(|i| &ask.req.pools[i]);
    let parts = pools
        .iter()
        .map(|p| {
            resolve_cluster(
                p.gpu.clone(),
                free_nodes(p) * p.gpus_per_node,
                Some(p.gpus_per_node),
                Some(p.inter_node_gbps),
                Some(p.rdma),
                None,
            )
        })
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    let input =
        MixedInput { model_name: ask.model_name.to_string(), model: ask.model.clone(), workload, parts, top_n: 1 };
    let plan = best_mix(&input).ok()??;
    if plan.tokens_per_s <= 0.0 {
        return None;
    }
    let hours = ask.training_tokens / plan.tokens_per_s / 3600.0;
    let parts: Vec<AdviceMixPart> = pools
        .iter()
        .zip(&plan.parts)
        .map(|(p, used)| AdviceMixPart {
            pool_id: p.pool_id.clone(),
            gpu_key: p.gpu.key.clone(),
            gpu_count: used.gpus_used,
            gpus_per_node: p.gpus_per_node,
            nodes: free_nodes(p),
            price_per_gpu_hour_minor: p.price_per_gpu_hour_minor,
            cost_minor: cost_minor(used.gpus_used, hours, p.price_per_gpu_hour_minor),
        })
        .collect();
    let cost = parts.iter().fold(0i64, |sum, p| sum.saturating_add(p.cost_minor));
    Some(AdviceMix {
        parts,
        plan,
        hours,
        cost_minor: cost,
        currency: pools[0].currency.clone(),
        meets_deadline: ask.req.deadline_hours.is_none_or(|d| hours <= d),
        meets_budget: ask.req.budget_minor.is_none_or(|b| cost <= b),
        cheaper: false,
        faster: false,
    })
}

fn meets_all(o: &AdviceOption) -> bool {
    o.meets_deadline && o.meets_budget && o.meets_load
}

/// What the frontier weighs against cost: training, 1/hours; serving, throughput up to the load
/// (throughput beyond the load buys nothing, so the cheapest option that sustains it wins).
fn frontier_speed(o: &AdviceOption, serving: bool, load: f64) -> f64 {
    if serving { speed(o, serving).min(load) } else { speed(o, serving) }
}

/// Two costs of one currency are equal for the advice when they differ by at most this many
/// basis points of the smaller (100 = 1%): between such options the faster is shown and the
/// slower left out. The one place this tolerance is set; the response states it
/// (`cost_tie_bps`).
pub const COST_TIE_BPS: i64 = 100;

/// Whether two costs tie under [`COST_TIE_BPS`].
pub fn costs_tie(a: i64, b: i64) -> bool {
    let (lo, hi) = (i128::from(a.min(b)), i128::from(a.max(b)));
    (hi - lo) * 10_000 <= i128::from(COST_TIE_BPS) * lo.max(0)
}

/// One option as the frontier sees it: cost, speed (higher is better), and whether it meets
/// every constraint.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub cost_minor: i64,
    pub speed: f64,
    pub meets_all: bool,
}

/// The options to show, as indices into `points`, cheapest first:
/// 1. the Pareto set: a point is left out when another is at least as cheap and at least as
///    fast and meets every constraint if it does (of equal points the first is kept);
/// 2. ties: among the points that meet every constraint, and among the rest, walking from the
///    fastest down, a point whose cost ties ([`costs_tie`]) with the last one kept is left
///    out: the faster wins.
///
/// So every point left out has a shown one at least as fast, costing no more or within
/// [`COST_TIE_BPS`] more, that meets every constraint if it does; no two shown points tie in cost
/// unless one meets the constraints and the other does not; and within each of the two parts
/// cost rises as time falls.
pub fn frontier(points: &[Point]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..points.len()).filter(|&i| !points[i].speed.is_nan()).collect();
    order.sort_by(|&a, &b| {
        let (pa, pb) = (&points[a], &points[b]);
        pa.cost_minor.cmp(&pb.cost_minor).then(pb.speed.total_cmp(&pa.speed)).then(a.cmp(&b))
    });
    // The fastest seen so far (so no dearer) among points meeting every constraint, and among all.
    let (mut fastest_ok, mut fastest_any) = (f64::NEG_INFINITY, f64::NEG_INFINITY);
    let mut pareto: Vec<usize> = Vec::new();
    for i in order {
        let p = points[i];
        let beaten = if p.meets_all { fastest_ok >= p.speed } else { fastest_any >= p.speed };
        if !beaten {
            pareto.push(i);
        }
        if p.meets_all {
            fastest_ok = fastest_ok.max(p.speed);
        }
        fastest_any = fastest_any.max(p.speed);
    }
    let mut kept: Vec<usize> = Vec::new();
    for class in [true, false] {
        let mut last: Option<i64> = None;
        for &i in pareto.iter().rev().filter(|&&i| points[i].meets_all == class) {
            if last.is_some_and(|c| costs_tie(points[i].cost_minor, c)) {
                continue;
            }
            last = Some(points[i].cost_minor);
            kept.push(i);
        }
    }
    kept.sort_by(|&a, &b| {
        let (pa, pb) = (&points[a], &points[b]);
        pa.cost_minor.cmp(&pb.cost_minor).then(pa.speed.total_cmp(&pb.speed)).then(a.cmp(&b))
    });
    kept
}

/// Training: higher is faster (1/hours); serving: throughput.
fn speed(o: &AdviceOption, serving: bool) -> f64 {
    if serving {
        o.plan.tokens_per_s.max(o.plan.images_per_s.unwrap_or(0.0))
    } else if o.hours > 0.0 {
        1.0 / o.hours
    } else {
        f64::INFINITY
    }
}

/// Within a pool: the cheapest option that meets the deadline (serving: the load), else the
/// fastest.
fn better_in_pool(a: &AdviceOption, b: &AdviceOption, serving: bool) -> bool {
    let ok = |o: &AdviceOption| o.meets_deadline && o.meets_load;
    match (ok(a), ok(b)) {
        (true, false) => true,
        (false, true) => false,
        (true, true) => (a.cost_minor, -speed(a, serving)) < (b.cost_minor, -speed(b, serving)),
        (false, false) => speed(a, serving) > speed(b, serving),
    }
}
