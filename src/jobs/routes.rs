//! Job and template endpoints for tenants and operators: HTTP only (the use cases are `service`, the bodies
//! `requests`).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::Job;

use super::lifecycle::{self, NewJob};
use super::problems::lease_not_active;
use super::requests::{CreateJobRequest, JobListParams, ReplanRequest, StepListParams};
use super::service::{
    DEFAULT_STOP_GRACE_S, check_grace, not_replannable_message, plan_and_render, replannable, start_replan,
    stored_request,
};
use super::templates::{Builtin, TemplateParam, TemplateSpec};
use crate::auth::{AnyAuth, OperatorAuth, TenantAdminAuth, TenantAuth};
use crate::db::decode_json;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath, ApiQuery, Page, PageParams, new_id};
use crate::state::AppState;
use gpuplane_store::jobs as stored;
use gpuplane_store::leases::LeaseState;

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

/// Run a job on the lease's GPUs. The planner plans it for exactly those GPUs; the response holds the plan and
/// each node's rendered launch spec. The nodes' agents fetch and start it.
#[utoipa::path(
    post, path = "/v1/leases/{lease_id}/jobs", tag = "jobs", operation_id = "create_job",
    params(("lease_id" = Uuid, Path, description = "Lease id")),
    request_body = CreateJobRequest,
    responses(
        (status = 201, description = "The job, pending, with its plan and per-node launch specs", body = Job),
        (status = 409, description = "The lease is not active (`lease_not_active`), or is being released (`release_under_way`)", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid values (`validation_failed`: among them a `stop_grace_s` above the service's maximum or the lease's remaining time, or `retune` on a job that cannot resume: see the field; on a lease across pools, a `template` other than `gpuplane-runtime` or `auto`, `pins` or `retune`; `lease_id` when the lease's nodes cannot reach each other: two nodes giving the lease one address, a loopback address beside other hosts, or a pair whose every latency probe was lost, naming the nodes), nothing fits the lease's GPUs (`plan_infeasible`), or a node of the lease cannot launch the template (`launcher_missing`: the node and what it lacks; an external node runs no jobs)", body = crate::error::Problem, content_type = "application/problem+json"),
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
    let attached = gpuplane_store::volumes::lease_attachments(&mut conn, auth.tenant_id, lease_id).await?;
    req.validate()?;
    if let Some(digest) = &req.workdir
        && gpuplane_store::uploads::find(&mut conn, auth.tenant_id, digest).await?.is_none()
    {
        return Err(crate::uploads::not_uploaded());
    }
    drop(conn);
    let grace = req.stop_grace_s.unwrap_or(DEFAULT_STOP_GRACE_S);
    check_grace(grace, state.settings.max_stop_grace, ends_at)?;
    let job_id = new_id();
    let mut req = req;
    if let Some(dir) = super::checkpoints::checkpoint_dir(&attached, job_id) {
        req.env.entry(super::checkpoints::CHECKPOINT_DIR_ENV.to_string()).or_insert(dir);
    }
    let rendered = plan_and_render(&state, lease_id, pool_id, job_id, &req).await?;
    if req.retune.mode != super::RetuneMode::Off && !replannable(&rendered.template_name, rendered.planned.is_some()) {
        return Err(ApiError::field("retune.mode", not_replannable_message(&rendered.template_name)));
    }
    let checkpoints = req.env.contains_key(super::checkpoints::CHECKPOINT_DIR_ENV);
    let serves = req.serve.is_some();
    let restart = req.restart.resolve(&rendered.template_name, rendered.planned.is_some(), checkpoints, serves)?;

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
            restart: &restart,
        },
    )
    .await?;
    if let Some(digest) = &req.workdir
        && !gpuplane_store::uploads::set_job_workdir(&mut tx, auth.tenant_id, job_id, digest).await?
    {
        return Err(crate::uploads::not_uploaded());
    }
    if let Some(serve) = &req.serve {
        let service = gpuplane_store::services::NewService {
            id: new_id(),
            tenant_id: auth.tenant_id,
            job_id,
            port: serve.port,
            health_path: &serve.health_path,
            protocol: &serve.protocol,
            public: serve.public,
            rate_limit_per_minute: serve.rate_limit_per_minute,
        };
        gpuplane_store::services::insert_service(&mut tx, &service).await?;
    }
    let job = lifecycle::load_job(&mut tx, Some(auth.tenant_id), job_id).await?.ok_or(ApiError::NotFound("job"))?;
    tx.commit().await?;
    tracing::info!(job.id = %job_id, lease.id = %lease_id, template = %rendered.template_name, nodes = job.nodes.len(), "job created");
    Ok((StatusCode::CREATED, Json(job)))
}

/// Re-plan a running job on the same lease and GPUs. The new plan is made now (422 when it does not fit);
/// the running processes get a stop notice (the job's `stop_grace_s`), checkpoint at the next step boundary and
/// exit; then every node starts under the new plan and resumes from the checkpoint. The job keeps its id; the
/// change is a new generation in `generations` (`pending` until it starts), announced by `job.replanned`.
/// Only `gpuplane-runtime` jobs with a model are replanned, and services with a model: a service's replicas
/// roll over one node at a time (a node's old replica is noticed and finishes its requests, its new one starts,
/// and the next node's waits until it answers its health probe), so the others take the requests meanwhile.
#[utoipa::path(
    post, path = "/v1/jobs/{job_id}/replan", tag = "jobs", operation_id = "replan_job",
    params(("job_id" = Uuid, Path, description = "Job id")),
    request_body = ReplanRequest,
    responses(
        (status = 202, description = "The job with its pending generation; its processes have their notice", body = Job),
        (status = 404, description = "No such job of the tenant", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "The job is not running (`job_not_running`), or another replan of it is pending (`replan_in_progress`)", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid values (`validation_failed`: `pins` that fit nowhere or leave GPUs idle, a job that cannot resume, `lease_id` when the lease's nodes cannot reach each other), or nothing fits (`plan_infeasible`)", body = crate::error::Problem, content_type = "application/problem+json"),
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
    crate::access::ensure_lease_owned(&mut conn, auth.tenant_id, lease_id).await?;
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
