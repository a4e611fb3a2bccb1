//! Job and template endpoints for tenants and operators, the agents' assignment endpoints, and lease insights.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::insights::{self, Insight, InsightInput, Measured};
use super::protocol::{AssignmentList, AssignmentStatus, AssignmentStatusResponse};
use super::{Job, JobState};
use gpuplane_protocol::lease_network::lease_address;

use super::launch_specs::{self, DEFAULT_MASTER_PORT, NodeSlot, RESERVED_ENV, RenderInput, TemplateChoice};
use super::lifecycle::{self, NewJob, ReportError, decode_json};
use super::problems::{check_image, lease_not_active, stale_credential};
use super::templates::{Builtin, TemplateParam, TemplateSpec, check_args, resolve_params};
use crate::auth::{AgentAuth, AnyAuth, OperatorAuth, TenantAdminAuth, TenantAuth};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{ApiJson, ApiPath, ApiQuery, Page, PageParams, new_id};
use crate::inventory::gpu_models::GpuModel;
use crate::leases::LeaseState;
use crate::planner::{self, ClusterFields, LinkKind, ModelRef, Pins, Plan, PlanInput, PlanRequest, WorkloadFields};
use crate::planning_api::{gpu_spec, plan_error};
use crate::secrets::{NO_STORE, NoStore};
use crate::state::AppState;
use gpuplane_store::inventory::gpu_models::pool_gpu_model;
use gpuplane_store::jobs as stored;

crate::page_schema!(JobPage, Job);

// ---------------------------------------------------------------------------------------------------------------
// Templates

/// A launch template: built-in, or an operator's custom argv template at one version.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Template {
    pub name: String,
    /// Custom templates' version (the latest unless asked otherwise); absent for built-in ones.
    pub version: Option<i32>,
    pub builtin: bool,
    pub description: String,
    /// The custom template's argv with `{placeholders}` (built-in templates render theirs from the plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    pub parameters: Vec<TemplateParam>,
    pub created_at: Option<DateTime<Utc>>,
}

fn builtin_template(b: Builtin) -> Template {
    Template {
        name: b.name().into(),
        version: None,
        builtin: true,
        description: b.description().into(),
        argv: None,
        parameters: b.parameters(),
        created_at: None,
    }
}

fn custom_template(row: stored::TemplateRow) -> Result<Template, sqlx::Error> {
    let stored::TemplateRow { name, version, description, argv, parameters, created_at } = row;
    Ok(Template {
        name,
        version: Some(version),
        builtin: false,
        description,
        argv: Some(argv),
        parameters: decode_json(parameters)?,
        created_at: Some(created_at),
    })
}

/// Launch templates: the built-in ones, then the latest version of each custom one, with their parameters.
#[utoipa::path(
    get, path = "/v1/templates", tag = "jobs", operation_id = "list_templates",
    responses((status = 200, description = "Every template a job can name", body = Vec<Template>))
)]
pub async fn list_templates(State(state): State<AppState>, _auth: AnyAuth) -> ApiResult<Json<Vec<Template>>> {
    let mut conn = state.db.acquire().await?;
    let rows = stored::latest_templates(&mut conn).await?;
    drop(conn);
    let mut out: Vec<Template> = Builtin::ALL.into_iter().map(builtin_template).collect();
    for row in rows {
        out.push(custom_template(row)?);
    }
    Ok(Json(out))
}

/// Add a custom template, or a new version of one (version n+1 under an existing name). Validated: unknown
/// placeholders, values of the wrong type and shell metacharacters are 422 with the offending fields.
#[utoipa::path(
    post, path = "/v1/admin/templates", tag = "admin", operation_id = "create_template",
    request_body = TemplateSpec,
    responses((status = 201, description = "The template at its new version", body = Template))
)]
pub async fn create_template(
    State(state): State<AppState>,
    op: OperatorAuth,
    ApiJson(spec): ApiJson<TemplateSpec>,
) -> ApiResult<(StatusCode, Json<Template>)> {
    spec.validate().map_err(ApiError::Validation)?;
    let mut tx = state.db.begin().await?;
    // Versions of one name are numbered one at a time.
    stored::lock_template_name(&mut tx, &spec.name).await?;
    let row = stored::insert_template_version(
        &mut tx,
        new_id(),
        &spec.name,
        &spec.description,
        &spec.argv,
        &spec.parameters,
        op.key_id,
    )
    .await?;
    tx.commit().await?;
    let template = custom_template(row)?;
    tracing::info!(template = %template.name, version = ?template.version, "template created");
    Ok((StatusCode::CREATED, Json(template)))
}

// ---------------------------------------------------------------------------------------------------------------
// Jobs

/// A job to run on a lease's GPUs.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"template": "auto", "model": {"preset": "llama3-70b"},
    "workload": {"kind": "train", "seq_len": 4096, "global_batch": 512}, "command": ["pretrain_gpt.py"],
    "args": ["--train-iters", "1000"], "env": {"WANDB_PROJECT": "llama"}}))]
pub struct CreateJobRequest {
    /// `auto` (the planner picks a built-in template), a built-in name, or a custom template's name.
    pub template: String,
    /// A custom template's version (default: the latest).
    #[serde(default)]
    pub template_version: Option<i32>,
    /// The model, as for the planner. Required for `auto` and built-in templates.
    #[serde(default)]
    pub model: Option<ModelRef>,
    /// Workload settings, as for the planner (with `model`).
    #[serde(default)]
    pub workload: Option<WorkloadFields>,
    /// Planner pins (e.g. `{"tp": 2}`).
    #[serde(default)]
    pub pins: Pins,
    /// Run in this container image (`docker run` with only the leased GPUs); otherwise directly on the host.
    #[serde(default)]
    pub image: Option<String>,
    /// The program: the training script for torchrun templates (e.g. `["train.py"]`), `{command}` of a custom one.
    #[serde(default)]
    pub command: Vec<String>,
    /// Extra arguments, appended (or spliced at a custom template's `{args}`).
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment: names `[A-Z_][A-Z0-9_]*`, not the launch's own variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Secret environment (tokens, passwords), same name rules as `env`, values of 8 to 32768 bytes: never
    /// returned by any read of the API (to members and admins alike), never logged, replaced by `***` in output
    /// tails, and delivered only to the agents of the job's nodes.
    #[serde(default)]
    pub secret_env: BTreeMap<String, String>,
    /// Values of the template's parameters.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub parameters: BTreeMap<String, serde_json::Value>,
    /// Rendezvous port on the first node (default 29500).
    #[serde(default)]
    #[schema(maximum = 65535)]
    pub master_port: Option<u16>,
    /// What the service does with the job's measured steps (`gpuplane-runtime` jobs with a model).
    #[serde(default)]
    pub retune: super::Retune,
    /// Seconds a stop notice (a replan, the lease released or reaching its end, the balance running out) gives
    /// the job to checkpoint and exit; default 60, at most the service's `--max-stop-grace-secs` and the lease's
    /// remaining time.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 86400)]
    pub stop_grace_s: Option<i32>,
}

/// Most extra environment variables, and bytes per value.
const MAX_ENV: usize = 128;
const MAX_ENV_VALUE: usize = 32 * 1024;
/// Fewest bytes of a secret value: masking a very short value would garble unrelated output.
const MIN_SECRET_VALUE: usize = 8;

impl CreateJobRequest {
    fn validate(&self) -> Result<(), ApiError> {
        let mut errors = Vec::new();
        check_args("command", &self.command, &mut errors);
        check_args("args", &self.args, &mut errors);
        if self.env.len() + self.secret_env.len() > MAX_ENV {
            errors.push(FieldError::new("env", format!("at most {MAX_ENV} variables, secret ones included")));
        }
        for name in self.secret_env.keys().filter(|name| self.env.contains_key(*name)) {
            errors.push(FieldError::new(format!("secret_env.{name}"), "also given in `env`"));
        }
        for (name, value) in &self.secret_env {
            if value.len() < MIN_SECRET_VALUE {
                errors.push(FieldError::new(
                    format!("secret_env.{name}"),
                    format!("at least {MIN_SECRET_VALUE} bytes (a shorter value could not be masked in output)"),
                ));
            }
        }
        let all = self.env.iter().map(|e| ("env", e)).chain(self.secret_env.iter().map(|e| ("secret_env", e)));
        for (map, (name, value)) in all {
            let field = format!("{map}.{name}");
            let mut chars = name.chars();
            let well_formed = matches!(chars.next(), Some(c) if c.is_ascii_uppercase() || c == '_')
                && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                && name.len() <= 128;
            if !well_formed {
                errors.push(FieldError::new(field, "names are [A-Z_][A-Z0-9_]*, at most 128 characters"));
            } else if RESERVED_ENV.contains(&name.as_str()) {
                errors.push(FieldError::new(field, "set by the launch itself"));
            } else if value.contains('\0') {
                errors.push(FieldError::new(field, "must not contain NUL"));
            } else if value.len() > MAX_ENV_VALUE {
                errors.push(FieldError::new(field, format!("at most {MAX_ENV_VALUE} bytes")));
            }
        }
        if let Some(image) = &self.image {
            check_image(image, &mut errors);
        }
        if self.master_port.is_some_and(|p| p < 1024) {
            errors.push(FieldError::new("master_port", "1024-65535"));
        }
        if !(1..=90).contains(&self.retune.min_gain_pct) {
            errors.push(FieldError::new("retune.min_gain_pct", "1 to 90 (percent of the measured step time)"));
        }
        if self.model.is_some() != self.workload.is_some() {
            errors.push(FieldError::new("workload", "give a model and its workload together"));
        }
        if errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(errors)) }
    }
}

/// The lease's nodes and GPUs as a job sees them, rank 0 first (nodes by hostname, GPUs by index).
struct LeaseTopology {
    pool_id: Uuid,
    nodes: Vec<NodeSlot>,
    pcie_nodes: bool,
    min_network_gbps: i32,
}

async fn lease_topology(conn: &mut PgConnection, lease_id: Uuid, pool_id: Uuid) -> Result<LeaseTopology, sqlx::Error> {
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
) -> Result<Vec<crate::agent_api::launchers::NodeLaunchers>, sqlx::Error> {
    let rows = stored::node_launcher_rows(conn, node_ids).await?;
    rows.into_iter()
        .map(|(node_id, hostname, external, launchers)| {
            Ok(crate::agent_api::launchers::NodeLaunchers {
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
struct Rendered {
    /// The template's name (`auto` resolved) and a custom one's version.
    template_name: String,
    template_version: Option<i32>,
    planned: Option<(PlanInput, Plan)>,
    /// (node id, spec) in rank order.
    parts: Vec<(Uuid, launch_specs::LaunchSpec)>,
}

/// The lease's nodes and GPUs, and its pool's GPU model.
async fn lease_gpus(
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
async fn lease_parts(
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
/// launch the template, and render each node's spec. Bad input, a plan that does not fit or uses fewer than
/// all the GPUs, and a missing launcher are 422s.
async fn plan_and_render(
    state: &AppState,
    lease_id: Uuid,
    pool_id: Uuid,
    job_id: Uuid,
    req: &CreateJobRequest,
) -> ApiResult<Rendered> {
    let mut conn = state.db.acquire().await?;
    let (mut topology, gpu) = lease_gpus(&mut conn, lease_id, pool_id).await?;
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
    crate::agent_api::launchers::missing_launchers(
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
    Ok(Rendered { template_name, template_version, planned, parts: node_ids.into_iter().zip(specs).collect() })
}

/// Run a job on the lease's GPUs. The planner plans it for exactly those GPUs; the response holds the plan and
/// each node's rendered launch spec. The nodes' agents fetch and start it.
#[utoipa::path(
    post, path = "/v1/leases/{lease_id}/jobs", tag = "jobs", operation_id = "create_job",
    params(("lease_id" = Uuid, Path, description = "Lease id")),
    request_body = CreateJobRequest,
    responses(
        (status = 201, description = "The job, pending, with its plan and per-node launch specs", body = Job),
        (status = 409, description = "The lease is not active (`lease_not_active`), or is being released (`release_under_way`)", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid values (`validation_failed`: among them a `stop_grace_s` above the service's maximum or the lease's remaining time, or `retune` on a job that cannot resume: see the field; on a lease across pools, a `template` other than `gpuplane-runtime` or `auto`, `pins` or `retune`), nothing fits the lease's GPUs (`plan_infeasible`), or a node of the lease cannot launch the template (`launcher_missing`: the node and what it lacks; an external node runs no jobs)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn create_job(
    State(state): State<AppState>,
    auth: TenantAdminAuth,
    ApiPath(lease_id): ApiPath<Uuid>,
    ApiJson(req): ApiJson<CreateJobRequest>,
) -> ApiResult<(StatusCode, Json<Job>)> {
    let mut conn = state.db.acquire().await?;
    let lease = stored::tenant_lease(&mut conn, lease_id, auth.tenant_id).await?;
    let Some(stored::JobLease { state: lease_state, pool_id, ends_at }) = lease else {
        return Err(ApiError::NotFound("lease"));
    };
    if lease_state != LeaseState::Active {
        return Err(lease_not_active(lease_state));
    }
    drop(conn);
    req.validate()?;
    let grace = req.stop_grace_s.unwrap_or(DEFAULT_STOP_GRACE_S);
    check_grace(grace, state.settings.max_stop_grace, ends_at)?;
    let job_id = new_id();
    let rendered = plan_and_render(&state, lease_id, pool_id, job_id, &req).await?;
    if req.retune.mode != super::RetuneMode::Off && !replannable(&rendered.template_name, rendered.planned.is_some()) {
        return Err(ApiError::field("retune.mode", not_replannable_message(&rendered.template_name)));
    }

    let mut tx = state.db.begin().await?;
    // Hold the lease against a concurrent end until the job is stored (ending it then ends the job too).
    let (lease_state, releasing) = stored::share_lease(&mut tx, lease_id).await?;
    if lease_state != LeaseState::Active {
        return Err(lease_not_active(lease_state));
    }
    if let Some(deadline) = releasing {
        return Err(ApiError::conflict(
            "release_under_way",
            format!("the lease is being released (by {}): no new job starts on it", deadline.to_rfc3339()),
        ));
    }
    lifecycle::insert_job(
        &mut tx,
        &state.settings.keyring,
        NewJob {
            id: job_id,
            tenant_id: auth.tenant_id,
            lease_id,
            template: &rendered.template_name,
            template_version: rendered.template_version,
            request: stored_request(&req),
            plan: rendered.planned.as_ref().map(|p| &p.1),
            created_by: auth.key_id,
            nodes: rendered.parts,
            secrets: &req.secret_env,
            retune: req.retune,
            stop_grace_s: grace,
        },
    )
    .await?;
    let job = lifecycle::load_job(&mut tx, Some(auth.tenant_id), job_id).await?.ok_or(ApiError::NotFound("job"))?;
    tx.commit().await?;
    tracing::info!(job.id = %job_id, lease.id = %lease_id, template = %rendered.template_name, nodes = job.nodes.len(), "job created");
    Ok((StatusCode::CREATED, Json(job)))
}

/// Seconds a stop notice gives a job that does not say.
pub const DEFAULT_STOP_GRACE_S: i32 = 60;

/// A job's grace: at most the service's maximum, and no longer than its lease has left (a notice before the
/// lease's end must fit before it).
fn check_grace(grace: i32, max: std::time::Duration, ends_at: Option<DateTime<Utc>>) -> ApiResult<()> {
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
fn replannable(template: &str, planned: bool) -> bool {
    planned && template == Builtin::Runtime.name()
}

fn not_replannable_message(template: &str) -> String {
    format!(
        "only `{}` jobs with a model are replanned (the runtime checkpoints on the notice and reshards on load); this job runs `{template}`",
        Builtin::Runtime.name()
    )
}

/// A replan of a running job: the plan to move to.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"pins": {"dp": 4, "tp": 1, "pp": 1, "zero_stage": 3}, "reason": "more data parallel"}))]
pub struct ReplanRequest {
    /// Planner pins for the new plan; none: the planner's best for the lease's GPUs.
    #[serde(default)]
    pub pins: Pins,
    /// Why, kept in the job's history (at most 200 characters).
    #[serde(default)]
    pub reason: Option<String>,
}

/// Re-plan a running job on the same lease and GPUs. The new plan is made now (422 when it does not fit);
/// the running processes get a stop notice (the job's `stop_grace_s`), checkpoint at the next step boundary and
/// exit; then every node starts under the new plan and resumes from the checkpoint. The job keeps its id; the
/// change is a new generation in `generations` (`pending` until it starts), announced by `job.replanned`.
/// Only `gpuplane-runtime` jobs with a model are replanned.
#[utoipa::path(
    post, path = "/v1/jobs/{job_id}/replan", tag = "jobs", operation_id = "replan_job",
    params(("job_id" = Uuid, Path, description = "Job id")),
    request_body = ReplanRequest,
    responses(
        (status = 202, description = "The job with its pending generation; its processes have their notice", body = Job),
        (status = 404, description = "No such job of the tenant", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "The job is not running (`job_not_running`), or another replan of it is pending (`replan_in_progress`)", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid values (`validation_failed`: `pins` that fit nowhere or leave GPUs idle, a job that cannot resume), or nothing fits (`plan_infeasible`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn replan_job(
    State(state): State<AppState>,
    auth: TenantAdminAuth,
    ApiPath(job_id): ApiPath<Uuid>,
    ApiJson(req): ApiJson<ReplanRequest>,
) -> ApiResult<(StatusCode, Json<Job>)> {
    if req.reason.as_ref().is_some_and(|r| r.chars().count() > 200 || r.chars().any(char::is_control)) {
        return Err(ApiError::field("reason", "at most 200 characters, no control characters"));
    }
    let reason = match &req.reason {
        Some(why) => format!("replan asked for: {why}"),
        None => "replan asked for".to_string(),
    };
    let generation =
        start_replan(&state, Some(auth.tenant_id), job_id, req.pins, &reason, Some(auth.key_id), None).await?;
    let mut conn = state.db.acquire().await?;
    let job = lifecycle::load_job(&mut conn, Some(auth.tenant_id), job_id).await?.ok_or(ApiError::NotFound("job"))?;
    tracing::info!(job.id = %job_id, generation, "replan asked for");
    Ok((StatusCode::ACCEPTED, Json(job)))
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
    if !replannable(&template, req.model.is_some()) {
        return Err(ApiError::field("job", not_replannable_message(&template)));
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

fn job_not_running(state: JobState) -> ApiError {
    ApiError::conflict("job_not_running", format!("the job is {}: only a running job is replanned", state.as_str()))
}

fn replan_in_progress() -> ApiError {
    ApiError::conflict(
        "replan_in_progress",
        "another replan of this job is pending: wait for `job.replanned` (or the job's generations)",
    )
}

/// The request as the job keeps it: secret values are not part of it (they live in `job_secrets`).
fn stored_request(req: &CreateJobRequest) -> serde_json::Value {
    let mut kept = req.clone();
    kept.secret_env.values_mut().for_each(|value| *value = "***".into());
    serde_json::to_value(&kept).unwrap_or_default()
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct JobListParams {
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
    pub after: Option<Uuid>,
}

/// A lease's jobs, oldest first.
#[utoipa::path(
    get, path = "/v1/leases/{lease_id}/jobs", tag = "jobs", operation_id = "list_lease_jobs",
    params(("lease_id" = Uuid, Path, description = "Lease id"), JobListParams),
    responses((status = 200, description = "A page of the lease's jobs", body = JobPage))
)]
pub async fn list_lease_jobs(
    State(state): State<AppState>,
    auth: TenantAuth,
    ApiPath(lease_id): ApiPath<Uuid>,
    ApiQuery(params): ApiQuery<JobListParams>,
) -> ApiResult<Json<Page<Job>>> {
    let page = PageParams { limit: params.limit, after: params.after };
    let limit = page.fetch_limit()?;
    let mut conn = state.db.acquire().await?;
    crate::leases::lifecycle::ensure_owned(&mut conn, auth.tenant_id, lease_id).await?;
    let jobs = lifecycle::list_jobs(&mut conn, auth.tenant_id, lease_id, page.after(), limit).await?;
    Ok(Json(Page::from_rows(jobs, limit, |j| j.id)))
}

/// One of the tenant's jobs, with each node's state, exit code and last lines of output.
#[utoipa::path(
    get, path = "/v1/jobs/{job_id}", tag = "jobs", operation_id = "get_job",
    params(("job_id" = Uuid, Path, description = "Job id")),
    responses((status = 200, description = "The job", body = Job))
)]
pub async fn get_job(
    State(state): State<AppState>,
    auth: TenantAuth,
    ApiPath(job_id): ApiPath<Uuid>,
) -> ApiResult<Json<Job>> {
    let mut conn = state.db.acquire().await?;
    lifecycle::load_job(&mut conn, Some(auth.tenant_id), job_id).await?.map(Json).ok_or(ApiError::NotFound("job"))
}

/// Query of `GET /v1/jobs/{job_id}/steps`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct StepListParams {
    /// Steps per page (default 500).
    #[param(minimum = 1, maximum = 5000)]
    pub limit: Option<i64>,
    /// Only steps after this one (the last `step` of the previous page).
    #[param(minimum = 0, maximum = 1000000000)]
    pub after: Option<i64>,
}

/// A page of a job's measured steps.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StepPage {
    pub steps: Vec<super::steps::StepView>,
    /// Pass as `after` for the next page; absent on the last one.
    pub next_after: Option<i64>,
}

/// The optimizer steps the gpuplane runtime measured in the job (step time, tokens, loss, peak memory), in step
/// order, as its agents reported them.
#[utoipa::path(
    get, path = "/v1/jobs/{job_id}/steps", tag = "jobs", operation_id = "list_job_steps",
    params(("job_id" = Uuid, Path, description = "Job id"), StepListParams),
    responses((status = 200, description = "A page of the job's steps", body = StepPage))
)]
pub async fn list_job_steps(
    State(state): State<AppState>,
    auth: TenantAuth,
    ApiPath(job_id): ApiPath<Uuid>,
    ApiQuery(params): ApiQuery<StepListParams>,
) -> ApiResult<Json<StepPage>> {
    let limit = params.limit.unwrap_or(500);
    if !(1..=5000).contains(&limit) {
        return Err(ApiError::field("limit", "must be between 1 and 5000"));
    }
    let after = params.after.unwrap_or(0);
    if !(0..=1_000_000_000).contains(&after) {
        return Err(ApiError::field("after", "a step number, 0 to 1000000000"));
    }
    let mut conn = state.db.acquire().await?;
    if !stored::tenant_has_job(&mut conn, job_id, auth.tenant_id).await? {
        return Err(ApiError::NotFound("job"));
    }
    let mut steps = super::steps::list(&mut conn, job_id, after, limit + 1).await?;
    let more = steps.len() as i64 > limit;
    steps.truncate(limit as usize);
    let next_after = if more { steps.last().map(|s| s.step) } else { None };
    Ok(Json(StepPage { steps, next_after }))
}

/// Cancel a job: every node stops its process. Cancelling a finished job is harmless and returns it as it is.
#[utoipa::path(
    post, path = "/v1/jobs/{job_id}/cancel", tag = "jobs", operation_id = "cancel_job",
    params(("job_id" = Uuid, Path, description = "Job id")),
    responses((status = 200, description = "The job; `cancelled` once every node has stopped", body = Job))
)]
pub async fn cancel_job(
    State(state): State<AppState>,
    auth: TenantAdminAuth,
    ApiPath(job_id): ApiPath<Uuid>,
) -> ApiResult<Json<Job>> {
    let mut tx = state.db.begin().await?;
    if !lifecycle::cancel_job(&mut tx, auth.tenant_id, job_id).await? {
        return Err(ApiError::NotFound("job"));
    }
    let job = lifecycle::load_job(&mut tx, Some(auth.tenant_id), job_id).await?.ok_or(ApiError::NotFound("job"))?;
    tx.commit().await?;
    Ok(Json(job))
}

// ---------------------------------------------------------------------------------------------------------------
// Agents

/// The node's unfinished assignments, each with what to do (`run` or `cancel`). Fetching marks new ones
/// `assigned`. An assignment that is no longer listed has ended (e.g. with its lease): stop it.
#[utoipa::path(
    get, path = "/v1/agent/assignments", tag = "agents", operation_id = "get_assignments",
    responses((status = 200, description = "The node's assignments", body = AssignmentList))
)]
pub async fn get_assignments(
    State(state): State<AppState>,
    agent: AgentAuth,
) -> ApiResult<(NoStore, Json<AssignmentList>)> {
    let mut tx = state.db.begin().await?;
    let list = lifecycle::fetch_assignments(&mut tx, &state.settings.keyring, agent.node_id, agent.generation)
        .await?
        .ok_or_else(stale_credential)?;
    tx.commit().await?;
    Ok((NO_STORE, Json(list)))
}

/// Report a state transition of an assignment's process (running, succeeded, failed, cancelled) with its exit
/// code and last lines of output. Idempotent; states only move forward.
#[utoipa::path(
    post, path = "/v1/agent/assignments/{job_node_id}/status", tag = "agents", operation_id = "report_assignment_status",
    params(("job_node_id" = Uuid, Path, description = "The assignment's `job_node_id`")),
    request_body = AssignmentStatus,
    responses((status = 200, description = "The assignment as recorded now", body = AssignmentStatusResponse))
)]
pub async fn report_assignment_status(
    State(state): State<AppState>,
    agent: AgentAuth,
    ApiPath(job_node_id): ApiPath<Uuid>,
    ApiJson(report): ApiJson<AssignmentStatus>,
) -> ApiResult<Json<AssignmentStatusResponse>> {
    if report.output_tail.len() > 1000 {
        return Err(ApiError::field("output_tail", "at most 1000 lines (the service keeps the last 50)"));
    }
    let mut tx = state.db.begin().await?;
    let (state_now, desired) = match lifecycle::report_status(
        &mut tx,
        &state.settings.keyring,
        agent.node_id,
        agent.generation,
        job_node_id,
        &report,
    )
    .await
    {
        Ok(recorded) => recorded,
        Err(ReportError::StaleCredential) => return Err(stale_credential()),
        Err(ReportError::NotFound) => return Err(ApiError::NotFound("assignment")),
        Err(ReportError::Database(err)) => return Err(err.into()),
    };
    tx.commit().await?;
    Ok(Json(AssignmentStatusResponse { state: state_now, desired }))
}

// ---------------------------------------------------------------------------------------------------------------
// Insights

/// What gpuplane sees of the lease's running job.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LeaseInsights {
    pub lease_id: Uuid,
    /// The job looked at: the latest running one (absent when none runs).
    pub job_id: Option<Uuid>,
    pub measured: Option<Measured>,
    /// The steps the gpuplane runtime measured in that job, against the plan's prediction.
    pub steps: Option<super::steps::MeasuredSteps>,
    pub plan: Option<Plan>,
    /// Findings with the suggested change and the numbers behind each; empty when all is well.
    pub insights: Vec<Insight>,
}

/// Compare the running job's measured GPU utilization (last 5 minutes) with its plan: low utilization and
/// communication-bound plans are reported with the change to make.
#[utoipa::path(
    get, path = "/v1/leases/{lease_id}/insights", tag = "jobs", operation_id = "get_lease_insights",
    params(("lease_id" = Uuid, Path, description = "Lease id")),
    responses((status = 200, description = "Findings about the running job", body = LeaseInsights))
)]
pub async fn get_lease_insights(
    State(state): State<AppState>,
    auth: TenantAuth,
    ApiPath(lease_id): ApiPath<Uuid>,
) -> ApiResult<Json<LeaseInsights>> {
    let mut conn = state.db.acquire().await?;
    let Some(pool_id) = stored::tenant_lease_pool(&mut conn, lease_id, auth.tenant_id).await? else {
        return Err(ApiError::NotFound("lease"));
    };
    Ok(Json(evaluate_lease(&mut conn, lease_id, pool_id).await?))
}

/// The insights of a lease's running job now (the handler above, and the `utilization.low` alert check).
pub async fn evaluate_lease(
    conn: &mut sqlx::PgConnection,
    lease_id: Uuid,
    pool_id: Uuid,
) -> Result<LeaseInsights, ApiError> {
    let job = stored::running_job_of_lease(conn, lease_id).await?;
    let Some((job_id, plan, started_at)) = job else {
        return Ok(LeaseInsights {
            lease_id,
            job_id: None,
            measured: None,
            steps: None,
            plan: None,
            insights: Vec::new(),
        });
    };
    let plan: Option<Plan> = plan.map(decode_json).transpose()?;
    let measured = crate::agent_api::telemetry::measure_lease(conn, lease_id, started_at, insights::WINDOW_S).await?;
    let topology = lease_topology(conn, lease_id, pool_id).await?;
    let gpu_link = stored::pool_gpu_link(conn, pool_id).await?;
    let steps = super::steps::totals(conn, &[job_id])
        .await?
        .remove(&job_id)
        .map(|totals| super::steps::summarize(&totals, plan.as_ref()));
    let suggestion = stored::current_suggestion(conn, job_id).await?;
    let found = insights::assess(&InsightInput {
        plan: plan.as_ref(),
        measured,
        pcie_only: gpu_link == "none" || topology.pcie_nodes,
        min_gpus_per_node: topology.nodes.iter().map(|n| n.gpu_indices.len() as u32).min().unwrap_or(0),
        steps: steps.as_ref(),
        replan_suggestion: suggestion.as_ref(),
    });
    Ok(LeaseInsights { lease_id, job_id: Some(job_id), measured: Some(measured), steps, plan, insights: found })
}
