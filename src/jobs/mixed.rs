//! A job on a lease across pools (issue #37 item 4): the mixed planner (`gpuplane_planner::mixed`) plans the split
//! over the lease's parts, and the job runs the best plan that one pipeline with one TP degree can run (the
//! gpuplane runtime builds uneven stages from `layers_per_stage`), its ranks stage after stage, so the parts' nodes
//! go in the order their stages run. No I/O here: the handler reads the parts and renders.

use uuid::Uuid;

use crate::error::{ApiError, FieldError};
use crate::planner::{ClusterFields, GpuSpec, ModelRef, Pins, Plan, WorkloadFields};
use crate::planner::{MixedPlan, MixedPlanRequest, MixedPlanResult};

use super::templates::Builtin;

/// Plans the mixed planner returns for a job to choose from: enough that the best runnable one (all GPUs, one TP
/// degree) is among them.
pub const CANDIDATES: u32 = 200;

/// One part of the lease as the planner sees it: its GPU, its nodes with their GPU counts (hostname order), and
/// its GPUs per node as the lease's nodes are planned (the job routes' rule, as for a single-pool lease).
#[derive(Debug, Clone)]
pub struct PartNodes {
    pub spec: GpuSpec,
    pub nodes: Vec<(Uuid, u32)>,
    pub gpus_per_node: u32,
}

/// The mixed planner's request for exactly the parts' GPUs: per part its GPU, GPUs in all, GPUs per node, the
/// lease's slowest network.
pub fn plan_request(
    model: ModelRef,
    workload: WorkloadFields,
    parts: &[PartNodes],
    inter_node_gbps: f64,
    rdma: bool,
) -> MixedPlanRequest {
    let clusters = parts
        .iter()
        .map(|part| ClusterFields {
            gpu: None,
            gpu_spec: Some(part.spec.clone()),
            gpus: part.nodes.iter().map(|n| n.1).sum(),
            gpus_per_node: Some(part.gpus_per_node),
            inter_node_gbps: Some(inter_node_gbps),
            rdma: Some(rdma),
            host_memory_gb: None,
        })
        .collect();
    MixedPlanRequest { model, workload, parts: clusters, top_n: Some(CANDIDATES) }
}

/// What a job on a lease across pools may ask: the gpuplane runtime (`auto` picks it), no pins (the mixed planner
/// takes none: a pin would contradict one part or another), no retuning (its candidates are planned per pool).
pub fn check_request(template: &str, pins: &Pins, retune_off: bool) -> Result<(), ApiError> {
    let mut errors = Vec::new();
    if template != "auto" && template != Builtin::Runtime.name() {
        errors.push(FieldError::new(
            "template",
            format!(
                "a lease across pools runs the `{}` template (or `auto`): its stages hold uneven layer counts on \
                 unlike GPUs, which Megatron-LM (one layer count per middle stage), DeepSpeed, FSDP and DDP do not run",
                Builtin::Runtime.name()
            ),
        ));
    }
    if *pins != Pins::default() {
        errors.push(FieldError::new(
            "pins",
            "a lease across pools is split by the mixed planner, which takes no pins: each part's TP stays inside \
             its nodes and its stages get the layers its GPUs' speed and memory give",
        ));
    }
    if !retune_off {
        errors.push(FieldError::new("retune.mode", "jobs on a lease across pools are not retuned yet: leave it off"));
    }
    if errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(errors)) }
}

/// The best plan one pipeline of uneven stages with one TP degree runs on every GPU of the parts, as the
/// homogeneous `Plan` the runtime reads ([`MixedPlan::as_uniform_plan`]), with the mix it came from; 422
/// `plan_infeasible`-style field error on `workload` naming why the best mixes cannot run.
pub fn pick(result: &MixedPlanResult) -> Result<(MixedPlan, Plan), ApiError> {
    let mut reasons: Vec<String> = Vec::new();
    for mix in &result.plans {
        match mix.as_uniform_plan() {
            Ok(plan) => return Ok((mix.clone(), plan)),
            Err(why) if reasons.len() < 3 && !reasons.contains(&why) => reasons.push(why),
            Err(_) => {}
        }
    }
    Err(ApiError::field(
        "workload",
        format!(
            "no plan over the lease's parts runs every GPU with one TP degree (of {} plans: {})",
            result.plans.len(),
            if reasons.is_empty() { "none found".to_string() } else { reasons.join("; ") }
        ),
    ))
}

/// The lease's nodes in rank order for `mix`: the parts in the order their stages run, each part's nodes in
/// hostname order (the runtime's mesh puts pipeline stages outermost, so a stage's ranks follow each other).
pub fn node_order(mix: &MixedPlan, parts: &[PartNodes]) -> Vec<Uuid> {
    mix.part_order()
        .into_iter()
        .filter_map(|part| parts.get(part as usize))
        .flat_map(|part| part.nodes.iter().map(|n| n.0))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_runtime_without_pins_or_retuning_runs_on_a_mix() {
        assert!(check_request("auto", &Pins::default(), true).is_ok());
        assert!(check_request("gpuplane-runtime", &Pins::default(), true).is_ok());
        let fields = |r: Result<(), ApiError>| match r {
            Err(ApiError::Validation(errors)) => errors.into_iter().map(|e| e.field).collect::<Vec<_>>(),
            other => panic!("{other:?}"),
        };
        assert_eq!(fields(check_request("megatron", &Pins::default(), true)), ["template"]);
        let pinned = Pins { tp: Some(2), ..Pins::default() };
        assert_eq!(fields(check_request("auto", &pinned, false)), ["pins", "retune.mode"]);
    }
}
