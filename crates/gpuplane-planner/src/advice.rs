//! Rental advice: which pool, how many GPUs, how long, at what cost.
//!
//! For each pool and each GPU count free now (powers of two below a node, then whole nodes:
//! every count up to 16 nodes, then 24, 32, 48, 64, ... nodes) the best plan is searched;
//! training hours = tokens / predicted tokens/s; serving uses the smallest count that
//! sustains the load for `serving_hours`. Cost is in integer minor units, rounded up once:
//! `cost = ceil(gpus * hours * price_per_gpu_hour_minor)`.
//!
//! Per pool the option kept is the cheapest one meeting the deadline (serving: meeting the
//! load), else the fastest. Across pools, options meeting every constraint come first,
//! cheapest first; the rest follow, fastest first.

use super::search::best_plan;
use super::types::{
    AdviceOption, AdviceRequest, AdviceResult, Pins, PlanError, PlanInput, SkippedPool, SmallestFit, Workload,
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

    let mut options: Vec<AdviceOption> = Vec::new();
    let mut skipped = Vec::new();
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
            best = Some(match best {
                None => opt,
                Some(b) => {
                    if better_in_pool(&opt, &b, serving) {
                        opt
                    } else {
                        b
                    }
                }
            });
        }
        match best {
            Some(b) => options.push(b),
            None => skipped.push(SkippedPool {
                pool_id: pool.pool_id.clone(),
                reason: format!("{model_name} does not fit on the {} free {} GPUs", pool.free_gpus, pool.gpu.name),
            }),
        }
    }

    options.sort_by(|a, b| {
        let ok = |o: &AdviceOption| o.meets_deadline && o.meets_budget && o.meets_load;
        ok(b).cmp(&ok(a)).then_with(|| {
            if ok(a) {
                a.cost_minor.cmp(&b.cost_minor).then(speed(b, serving).total_cmp(&speed(a, serving)))
            } else {
                speed(b, serving).total_cmp(&speed(a, serving))
            }
        })
    });
    if let Some(fastest) = (0..options.len())
        .max_by(|&i, &j| speed(&options[i], serving).total_cmp(&speed(&options[j], serving)).then(j.cmp(&i)))
    {
        options[fastest].fastest = true;
    }
    let currencies: Vec<String> = {
        let mut c: Vec<String> = options.iter().map(|o| o.currency.clone()).collect();
        c.sort();
        c.dedup();
        c
    };
    for cur in currencies {
        if let Some(i) =
            (0..options.len()).filter(|&i| options[i].currency == cur).min_by_key(|&i| (options[i].cost_minor, i))
        {
            options[i].cheapest = true;
        }
    }
    Ok(AdviceResult { options, skipped })
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
