//! What a job request does, apart from HTTP: a job planned for its lease and rendered into each node's launch
//! spec, replans and their candidates, the checks of a stop grace. Called by the jobs API (`routes`), the retune
//! worker (`retuning`) and the lease insights (`leases::insights`).

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::{Job, JobState};
use gpuplane_protocol::lease_network::lease_address;

use super::launch_specs::{self, DEFAULT_MASTER_PORT, NodeSlot, RenderInput, TemplateChoice};
use super::lifecycle;
use super::templates::{Builtin, TemplateParam, resolve_params};
use crate::db::decode_json;
use crate::error::{ApiError, ApiResult};
use crate::inventory::gpu_models::GpuModel;
use crate::planner::{self, ClusterFields, LinkKind, ModelRef, Pins, Plan, PlanInput, PlanRequest, WorkloadFields};
use crate::planning_api::{gpu_spec, plan_error};
use crate::state::AppState;
use gpuplane_store::inventory::gpu_models::pool_gpu_model;
use gpuplane_store::jobs as stored;

use super::requests::CreateJobRequest;

/// The lease's nodes and GPUs as a job sees them, rank 0 first (nodes by hostname, GPUs by index).
pub struct LeaseTopology {
    pub pool_id: Uuid,
    pub nodes: Vec<NodeSlot>,
    pub pcie_nodes: bool,
    pub min_network_gbps: i32,
}

pub async fn lease_topology(
    conn: &mut PgConnection,
    lease_id: Uuid,
    pool_id: Uuid,
) -> Result<LeaseTopology, sqlx::Error> {
    let rows = stored::lease_gpu_rows(conn, lease_id).await?;
    let mut nodes: Vec<NodeSlot> = Vec::new();
    let mut pcie_nodes = false;
    let mut min_network_gbps = i32::MAX;
    let mut subnets: Vec<Option<String>> = Vec::new();
    for stored::LeaseGpuRow { node_id, hostname, address, lease_subnet, rdma, intra_link, network_gbps, idx: index } in
        rows
    {
        pcie_nodes |= intra_link == "pcie";
        min_network_gbps = min_network_gbps.min(network_gbps);
        match nodes.last_mut() {
            Some(last) if last.node_id == node_id => last.gpu_indices.push(index),
            _ => {
                subnets.push(lease_subnet);
                nodes.push(NodeSlot { node_id, hostname, address, lease_address: None, gpu_indices: vec![index], rdma })
            }
        }
    }
    for (node, subnet) in nodes.iter_mut().zip(&subnets) {
        node.lease_address = lease_address(subnet.as_deref(), &node.gpu_indices).map(|a| a.to_string());
    }
    Ok(LeaseTopology { pool_id, nodes, pcie_nodes, min_network_gbps })
}

/// What each of these nodes can launch jobs with, in hostname order.
async fn node_launchers(
    conn: &mut PgConnection,
    node_ids: &[Uuid],
) -> Result<Vec<crate::inventory::launchers::NodeLaunchers>, sqlx::Error> {
    let rows = stored::node_launcher_rows(conn, node_ids).await?;
    rows.into_iter()
        .map(|(node_id, hostname, external, launchers)| {
            Ok(crate::inventory::launchers::NodeLaunchers {
                node_id,
                hostname,
                external,
                launchers: launchers.map(decode_json).transpose()?,
            })
        })
        .collect()
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// GPUs per node as a lease's nodes are planned: uneven holdings as groups of their greatest common divisor, so a
/// tensor-parallel group never straddles nodes.
fn planned_gpus_per_node(counts: impl IntoIterator<Item = u32>) -> u32 {
    counts.into_iter().fold(0, gcd).max(1)
}

/// The GPU of a pool as the lease's nodes hold it: over PCIe when a node of the lease says so.
fn lease_gpu_spec(gpu: &GpuModel, topology: &LeaseTopology) -> crate::planner::GpuSpec {
    let mut spec = gpu_spec(gpu);
    if topology.pcie_nodes && spec.link == LinkKind::Nvlink {
        spec.link = LinkKind::Pcie;
        spec.link_gb_s = if gpu.host_link == "pcie5" { 64.0 } else { 32.0 };
    }
    spec
}

/// The planner's request for exactly the lease's GPUs: the pool's model (over PCIe when a node says so), GPUs
/// per node as the lease holds them (uneven holdings are planned as groups of their greatest common divisor,
/// so a tensor-parallel group never straddles nodes), the slowest node's network, RDMA only if all have it.
fn lease_plan_request(
    model: ModelRef,
    workload: WorkloadFields,
    pins: Pins,
    gpu: &GpuModel,
    topology: &LeaseTopology,
) -> PlanRequest {
    let spec = lease_gpu_spec(gpu, topology);
    let counts: Vec<u32> = topology.nodes.iter().map(|n| n.gpu_indices.len() as u32).collect();
    let total: u32 = counts.iter().sum();
    let per_node = planned_gpus_per_node(counts.iter().copied());
    PlanRequest {
        model,
        workload,
        cluster: ClusterFields {
            gpu: None,
            gpu_spec: Some(spec),
            gpus: total,
            gpus_per_node: Some(per_node),
            inter_node_gbps: Some(f64::from(topology.min_network_gbps.max(1))),
            rdma: Some(topology.nodes.iter().all(|n| n.rdma)),
            host_memory_gb: None,
        },
        pins,
        top_n: Some(1),
    }
}

/// The template a request names: built-in, or a custom one at the asked (or latest) version.
enum Resolved {
    Auto,
    Builtin(Builtin),
    Custom { version: i32, argv: Vec<String>, parameters: Vec<TemplateParam> },
}

async fn resolve_template(conn: &mut PgConnection, req: &CreateJobRequest) -> ApiResult<Resolved> {
    if req.template == "auto" || Builtin::by_name(&req.template).is_some() {
        if req.template_version.is_some() {
            return Err(ApiError::field("template_version", "built-in templates have no versions"));
        }
        if req.model.is_none() {
            return Err(ApiError::field("model", format!("`{}` is planned: give a model and workload", req.template)));
        }
        return Ok(Builtin::by_name(&req.template).map_or(Resolved::Auto, Resolved::Builtin));
    }
    let row = stored::template_version(conn, &req.template, req.template_version).await?;
    match row {
        Some((version, argv, parameters)) => {
            let parameters: Vec<TemplateParam> = decode_json(parameters)?;
            Ok(Resolved::Custom { version, argv, parameters })
        }
        None if req.template_version.is_some() => Err(ApiError::field("template_version", "no such version")),
        None => Err(ApiError::field("template", "no such template; see GET /v1/templates")),
    }
}

/// A job's generation planned and rendered for exactly its lease's GPUs: what `create_job` stores as the
/// first, and a replan as the next.
pub struct Rendered {
    /// The template's name (`auto` resolved) and a custom one's version.
    pub template_name: String,
    pub template_version: Option<i32>,
    pub planned: Option<(PlanInput, Plan)>,
    /// (node id, spec) in rank order.
    pub parts: Vec<(Uuid, launch_specs::LaunchSpec)>,
}

/// The lease's nodes and GPUs, and its pool's GPU model.
pub async fn lease_gpus(
    conn: &mut PgConnection,
    lease_id: Uuid,
    pool_id: Uuid,
) -> Result<(LeaseTopology, GpuModel), sqlx::Error> {
    let topology = lease_topology(conn, lease_id, pool_id).await?;
    let gpu = pool_gpu_model(conn, topology.pool_id).await?;
    Ok((topology, gpu))
}

/// The parts of a lease across pools as the mixed planner sees them (each part's GPU, over PCIe when a node of the
/// lease says so, and its nodes with their GPU counts), and whether every part's GPUs talk peer to peer; None for
/// a single-pool lease.
pub async fn lease_parts(
    conn: &mut PgConnection,
    lease_id: Uuid,
    topology: &LeaseTopology,
) -> Result<Option<(Vec<super::mixed::PartNodes>, bool)>, sqlx::Error> {
    let mut parts: Vec<super::mixed::PartNodes> = Vec::new();
    let mut all_p2p = true;
    for (part, pool_id, node_id) in gpuplane_store::leases::parts::part_nodes(conn, lease_id).await? {
        let part = part as usize;
        if parts.len() <= part {
            let gpu = pool_gpu_model(conn, pool_id).await?;
            all_p2p &= gpu.gpu_link != "none";
            parts.push(super::mixed::PartNodes {
                spec: lease_gpu_spec(&gpu, topology),
                nodes: Vec::new(),
                gpus_per_node: 0,
            });
        }
        let gpus = topology.nodes.iter().find(|n| n.node_id == node_id).map_or(0, |n| n.gpu_indices.len() as u32);
        parts[part].nodes.push((node_id, gpus));
    }
    for part in &mut parts {
        part.gpus_per_node = planned_gpus_per_node(part.nodes.iter().map(|n| n.1));
    }
    Ok((!parts.is_empty()).then_some((parts, all_p2p)))
}

/// Most candidate plans a retune weighs.
const RETUNE_CANDIDATES: u32 = 64;

/// The plans a running job could move to on its lease's GPUs: the planner's best, under the job's template's
/// limits only (the tenant's first pins are where the job started, not a bound), best predicted first.
pub async fn retune_candidates(state: &AppState, job: &Job) -> ApiResult<Vec<Plan>> {
    let req: CreateJobRequest = serde_json::from_value(job_request(state, job.id).await?)
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("job {}'s stored request: {e}", job.id)))?;
    let (Some(model), Some(workload), Some(builtin)) = (req.model, req.workload, Builtin::by_name(&job.template))
    else {
        return Ok(Vec::new());
    };
    let mut conn = state.db.acquire().await?;
    let pool_id = stored::lease_pool(&mut conn, job.lease_id).await?;
    let (topology, gpu) = lease_gpus(&mut conn, job.lease_id, pool_id).await?;
    drop(conn);
    let (_, arch) = planner::validate::resolve_model(&model).map_err(plan_error)?;
    let pins = launch_specs::template_pins(builtin, &Pins::default(), workload.kind, &arch)
        .map_err(|e| ApiError::Validation(vec![e]))?;
    let mut request = lease_plan_request(model, workload, pins, &gpu, &topology);
    request.top_n = Some(RETUNE_CANDIDATES);
    tokio::task::spawn_blocking(move || Ok::<_, planner::PlanError>(planner::plan(&request.resolve()?)?.plans))
        .await
        .map_err(|e| ApiError::Internal(e.into()))?
        .map_err(plan_error)
}

async fn job_request(state: &AppState, job_id: Uuid) -> Result<serde_json::Value, sqlx::Error> {
    let mut conn = state.db.acquire().await?;
    Ok(stored::job_request(&mut conn, job_id).await?)
}

/// Plan `req` for the lease's GPUs (the pins as given: a template's own limits added), check every node can
/// launch the template, and render each node's spec. Bad input, nodes that cannot reach each other, a plan that
/// does not fit or uses fewer than all the GPUs, and a missing launcher are 422s.
pub async fn plan_and_render(
    state: &AppState,
    lease_id: Uuid,
    pool_id: Uuid,
    job_id: Uuid,
    req: &CreateJobRequest,
) -> ApiResult<Rendered> {
    let mut conn = state.db.acquire().await?;
    let (mut topology, gpu) = lease_gpus(&mut conn, lease_id, pool_id).await?;
    if topology.nodes.len() > 1 {
        let pairs = gpuplane_store::leases::network::load_pairs(&mut conn, lease_id).await?;
        if let Some(why) = super::reachability::why_unreachable(&topology.nodes, &pairs) {
            return Err(ApiError::field("lease_id", why));
        }
    }
    let mut gpu_p2p = gpu.gpu_link != "none";
    let mut resolved = resolve_template(&mut conn, req).await?;
    // A lease across pools is planned by the mixed planner, for the runtime.
    let across = lease_parts(&mut conn, lease_id, &topology).await?;
    if across.is_some() {
        super::mixed::check_request(&req.template, &req.pins, req.retune.mode == super::RetuneMode::Off)?;
        resolved = Resolved::Builtin(Builtin::Runtime);
    }
    drop(conn);

    // Plan for the lease's GPUs (CPU-bound: off the async workers).
    let planned: Option<(PlanInput, Plan)> = match (&req.model, &req.workload, across) {
        (Some(model), Some(workload), Some((parts, all_p2p))) => {
            gpu_p2p = all_p2p;
            let request = super::mixed::plan_request(
                model.clone(),
                workload.clone(),
                &parts,
                f64::from(topology.min_network_gbps.max(1)),
                topology.nodes.iter().all(|n| n.rdma),
            );
            let (input, result) = tokio::task::spawn_blocking(move || {
                let input = request.resolve()?;
                let result = planner::plan_mixed(&input)?;
                Ok::<_, planner::PlanError>((input, result))
            })
            .await
            .map_err(|e| ApiError::Internal(e.into()))?
            .map_err(plan_error)?;
            let (mix, plan) = super::mixed::pick(&result)?;
            // Ranks run stage after stage: the parts' nodes in the order their stages run.
            let order = super::mixed::node_order(&mix, &parts);
            topology.nodes.sort_by_key(|n| order.iter().position(|id| *id == n.node_id).unwrap_or(usize::MAX));
            let first = mix.part_order().first().copied().unwrap_or(0) as usize;
            Some((input.part_input(first), plan))
        }
        (Some(model), Some(workload), None) => {
            let mut pins = req.pins.clone();
            let (_, arch) = planner::validate::resolve_model(model).map_err(plan_error)?;
            if let Resolved::Auto = resolved {
                // The template is chosen first: its abilities bound the plan.
                resolved = Resolved::Builtin(launch_specs::auto_template(workload.kind, &arch, &req.command));
            }
            if let Resolved::Builtin(builtin) = resolved {
                pins = launch_specs::template_pins(builtin, &pins, workload.kind, &arch)
                    .map_err(|e| ApiError::Validation(vec![e]))?;
            }
            let request = lease_plan_request(model.clone(), workload.clone(), pins, &gpu, &topology);
            let found = tokio::task::spawn_blocking(move || {
                let input = request.resolve()?;
                let plan = planner::plan(&input)?.plans.into_iter().next();
                Ok::<_, planner::PlanError>((input, plan))
            })
            .await
            .map_err(|e| ApiError::Internal(e.into()))?
            .map_err(plan_error)?;
            match found {
                // Launch specs start every GPU of the lease; a plan that idles some would not match them.
                (_, Some(plan)) if plan.idle_gpus > 0 => {
                    return Err(ApiError::field(
                        "pins",
                        format!(
                            "no split uses all {} GPUs of the lease (the best plan leaves {} idle: {}); pin a split that does",
                            plan.idle_gpus + plan.tp * plan.cp * plan.pp * plan.dp,
                            plan.idle_gpus,
                            plan.notes.join("; ")
                        ),
                    ));
                }
                (input, Some(plan)) => Some((input, plan)),
                (_, None) => return Err(ApiError::Internal(anyhow::anyhow!("the planner returned no plan"))),
            }
        }
        _ => None,
    };

    // Every node of the lease must be able to launch the template (an `auto` pick included).
    let (template_label, needed): (&str, &[&str]) = match (&resolved, req.image.is_some()) {
        (_, true) => (req.template.as_str(), super::templates::IMAGE_LAUNCHERS),
        (Resolved::Builtin(builtin), false) => (builtin.name(), builtin.launchers()),
        _ => (req.template.as_str(), &[]),
    };
    let mut conn = state.db.acquire().await?;
    let node_ids: Vec<Uuid> = topology.nodes.iter().map(|n| n.node_id).collect();
    crate::inventory::launchers::missing_launchers(
        template_label,
        needed,
        &node_launchers(&mut conn, &node_ids).await?,
    )?;
    drop(conn);

    let (choice, template_name, template_version, params) = match &resolved {
        Resolved::Auto => return Err(ApiError::field("workload", "`auto` is planned: give a model and workload")),
        Resolved::Builtin(builtin) => {
            let params = resolve_params(&builtin.parameters(), &req.parameters).map_err(ApiError::Validation)?;
            (TemplateChoice::Builtin(*builtin), builtin.name().to_string(), None, params)
        }
        Resolved::Custom { version, argv, parameters } => {
            let params = resolve_params(parameters, &req.parameters).map_err(ApiError::Validation)?;
            (TemplateChoice::Custom(argv), req.template.clone(), Some(*version), params)
        }
    };
    let specs = launch_specs::render(&RenderInput {
        job_id,
        nodes: &topology.nodes,
        gpu_p2p,
        master_port: req.master_port.unwrap_or(DEFAULT_MASTER_PORT),
        template: choice,
        planned: planned.as_ref().map(|(i, p)| (i, p)),
        command: &req.command,
        args: &req.args,
        env: &req.env,
        params: &params,
        image: req.image.as_deref(),
    })
    .map_err(ApiError::Validation)?;
    let specs = match &req.serve {
        Some(serve) => specs.into_iter().map(|spec| with_serve(spec, serve)).collect(),
        None => specs,
    };
    let specs = match &req.setup {
        Some(setup) => specs.into_iter().map(|spec| launch_specs::with_setup(spec, setup)).collect(),
        None => specs,
    };
    let specs: Vec<_> =
        specs.into_iter().map(|spec| launch_specs::LaunchSpec { workdir: req.workdir.clone(), ..spec }).collect();
    Ok(Rendered { template_name, template_version, planned, parts: node_ids.into_iter().zip(specs).collect() })
}

/// A part that serves: its server's port in its environment, and what its agent forwards to and probes.
fn with_serve(
    mut spec: launch_specs::LaunchSpec,
    serve: &crate::services::requests::ServeRequest,
) -> launch_specs::LaunchSpec {
    let port = u16::try_from(serve.port).unwrap_or(0);
    spec.env.insert(launch_specs::SERVE_PORT_ENV.into(), port.to_string());
    spec.serve =
        Some(gpuplane_protocol::jobs::ServeSpec { port, health_path: serve.health_path.clone(), token: String::new() });
    spec
}

/// Seconds a stop notice gives a job that does not say.
pub const DEFAULT_STOP_GRACE_S: i32 = 60;

/// A job's grace: at most the service's maximum, and no longer than its lease has left (a notice before the
/// lease's end must fit before it).
pub fn check_grace(grace: i32, max: std::time::Duration, ends_at: Option<DateTime<Utc>>) -> ApiResult<()> {
    let max_s = i32::try_from(max.as_secs()).unwrap_or(i32::MAX);
    if !(0..=max_s).contains(&grace) {
        return Err(ApiError::field("stop_grace_s", format!("0 to {max_s} seconds (the service's maximum)")));
    }
    if let Some(ends_at) = ends_at {
        let left = (ends_at - Utc::now()).num_seconds();
        if i64::from(grace) > left {
            return Err(ApiError::field(
                "stop_grace_s",
                format!(
                    "{grace} s is longer than the lease has left ({} s): extend the lease or ask for less",
                    left.max(0)
                ),
            ));
        }
    }
    Ok(())
}

/// Only the gpuplane runtime's jobs resume under another plan: it checkpoints on the notice and reshards the
/// checkpoint on load. Other templates restart from whatever their script saves, under their own rules.
pub fn replannable(template: &str, planned: bool) -> bool {
    planned && template == Builtin::Runtime.name()
}

pub fn not_replannable_message(template: &str) -> String {
    format!(
        "only `{}` jobs with a model are replanned (the runtime checkpoints on the notice and reshards on load); this job runs `{template}`",
        Builtin::Runtime.name()
    )
}

/// Plan and render the job's next generation with `pins` (the job's own request otherwise) and store it as its
/// pending replan, the running processes noticed. With `tenant_id`, only that tenant's job. Shared by the API
/// and retune `auto`. Returns the pending generation.
pub async fn start_replan(
    state: &AppState,
    tenant_id: Option<Uuid>,
    job_id: Uuid,
    pins: Pins,
    reason: &str,
    requested_by: Option<Uuid>,
    correction: Option<serde_json::Value>,
) -> ApiResult<i32> {
    let mut conn = state.db.acquire().await?;
    let row = stored::replan_subject(&mut conn, job_id, tenant_id).await?;
    drop(conn);
    let Some(stored::ReplanSubject { state: job_state, lease_id, template, request, pool_id, pending }) = row else {
        return Err(ApiError::NotFound("job"));
    };
    if job_state != JobState::Running {
        return Err(job_not_running(job_state));
    }
    if pending.is_some() {
        return Err(replan_in_progress());
    }
    let mut req: CreateJobRequest = serde_json::from_value(request)
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("job {job_id}'s stored request: {e}")))?;
    // A service planned from a model rolls over its nodes to the new plan (`replicas::roll`).
    let rolls = req.serve.is_some() && req.model.is_some();
    if !replannable(&template, req.model.is_some()) && !rolls {
        let why = not_replannable_message(&template) + ", and no service with a model (whose replicas roll over)";
        return Err(ApiError::field("job", why));
    }
    // The template the job runs, its script and settings; only the split changes.
    req.template = template;
    req.pins = pins;
    let rendered = plan_and_render(state, lease_id, pool_id, job_id, &req).await?;
    let Some((_, plan)) = rendered.planned else {
        return Err(ApiError::field("job", not_replannable_message(&rendered.template_name)));
    };
    let mut tx = state.db.begin().await?;
    let generation = lifecycle::replan(
        &mut tx,
        lifecycle::NewGeneration { job_id, plan: &plan, parts: rendered.parts, reason, requested_by, correction },
    )
    .await
    .map_err(|err| match err {
        lifecycle::ReplanError::NotRunning(state) => job_not_running(state),
        lifecycle::ReplanError::InProgress => replan_in_progress(),
        lifecycle::ReplanError::Database(err) => err.into(),
    })?;
    tx.commit().await?;
    Ok(generation)
}

pub fn job_not_running(state: JobState) -> ApiError {
    ApiError::conflict("job_not_running", format!("the job is {}: only a running job is replanned", state.as_str()))
}

pub fn replan_in_progress() -> ApiError {
    ApiError::conflict(
        "replan_in_progress",
        "another replan of this job is pending: wait for `job.replanned` (or the job's generations)",
    )
}

/// The request as the job keeps it: secret values are not part of it (they live in `job_secrets`).
pub fn stored_request(req: &CreateJobRequest) -> serde_json::Value {
    let mut kept = req.clone();
    kept.secret_env.values_mut().for_each(|value| *value = "***".into());
    serde_json::to_value(&kept).unwrap_or_default()
}
