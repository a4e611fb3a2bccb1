//! `/v1/agent/*`: registration and heartbeats; and the operator's GPU health endpoint.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::Utc;
use uuid::Uuid;

use super::matching::gpu_matches_model;
use super::protocol::{
    DesiredState, FATAL_XIDS, GpuSample, HeartbeatRequest, HeartbeatResponse, RegisterRequest, RegisterResponse,
};
use gpuplane_store::agents::{Liveness, heartbeat, registration};
use gpuplane_store::inventory::gpu_models::pool_gpu_model;

use crate::auth::{AgentAuth, OperatorAuth, keys};
use crate::error::{ApiError, ApiResult, FieldError};
use crate::extract::{ApiJson, ApiPath};
use crate::inventory::nodes::{CreateNodeRequest, NewGpu, Node, insert_node, load_node};
use crate::secrets::{NO_STORE, NoStore};
use crate::state::AppState;

/// Most samples one heartbeat may carry (64 GPUs x 64 buffered intervals).
pub const MAX_SAMPLES: usize = 4096;

/// Register a node with a join token, or re-attach the same host (matched by hostname) and rotate its credential.
/// Re-attaching needs proof that the caller is that node: its current agent credential as the bearer token, or
/// an operator's `POST /v1/admin/nodes/{node_id}/allow-reregistration` within the last hour. A join token alone
/// never takes over a node an agent registered; it does attach the first agent of a node an operator added by
/// hand (`awaiting_agent`, or `external`), whose GPUs must then match what the operator entered.
#[utoipa::path(
    post, path = "/v1/agent/register", tag = "agents", operation_id = "register_agent",
    request_body = RegisterRequest,
    security((), ("bearer" = [])),
    responses(
        (status = 201, description = "A new node", body = RegisterResponse),
        (status = 200, description = "The existing node of this hostname, re-attached", body = RegisterResponse),
        (status = 401, description = "Unknown, expired, used-up or revoked join token (`invalid_join_token`), or an invalid agent credential", body = crate::error::Problem, content_type = "application/problem+json"),
        (status = 409, description = "The hostname belongs to another pool (`node_in_other_pool`), its GPUs changed (`gpu_set_changed`), or it is registered and the caller did not prove to be that node (`node_identity_required`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn register_agent(
    State(state): State<AppState>,
    proof: Option<AgentAuth>,
    ApiJson(req): ApiJson<RegisterRequest>,
) -> ApiResult<(StatusCode, NoStore, Json<RegisterResponse>)> {
    let facts = &req.node;
    let node_request = CreateNodeRequest {
        pool_id: Uuid::nil(),
        hostname: facts.hostname.clone(),
        address: facts.address.clone(),
        intra_link: facts.intra_link,
        intra_link_gbps: facts.intra_link_gbps,
        network_gbps: facts.network_gbps,
        rdma: facts.rdma,
        gpus: facts.gpus.iter().map(|g| NewGpu { index: g.index, uuid: g.uuid.clone() }).collect(),
        external: false,
    };
    node_request.validate().map_err(|err| prefix_fields(err, "node."))?;
    let mut errors = Vec::new();
    if facts.echo_port.is_some_and(|p| !(1..=65535).contains(&p)) {
        errors.push(FieldError::new("node.echo_port", "a port, 1-65535"));
    }
    if let Some(subnet) = &facts.lease_subnet
        && let Err(message) = gpuplane_protocol::lease_network::LeaseSubnet::parse(subnet)
    {
        errors.push(FieldError::new("node.lease_subnet", message));
    }
    check_version_text("node.driver_version", facts.driver_version.as_deref(), &mut errors);
    check_version_text("node.cuda_version", facts.cuda_version.as_deref(), &mut errors);
    if let Some(launchers) = &facts.launchers {
        crate::inventory::launchers::validate("node.launchers", launchers, &mut errors);
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    if !keys::looks_like_secret(&req.join_token, keys::JOIN_TOKEN_PREFIX) {
        return Err(invalid_join_token());
    }
    let mut tx = state.db.begin().await?;
    let claimed = registration::claim_join_token(&mut tx, &keys::hash(&req.join_token)).await?;
    let Some(pool_id) = claimed else { return Err(invalid_join_token()) };
    let model = pool_gpu_model(&mut tx, pool_id).await?;
    let mismatched: Vec<FieldError> = facts
        .gpus
        .iter()
        .enumerate()
        .filter(|(_, g)| !gpu_matches_model(&g.name, g.memory_bytes, &model))
        .map(|(i, g)| {
            FieldError::new(
                format!("node.gpus[{i}].name"),
                format!("{} is not a {} (the pool's model)", g.name, model.name),
            )
        })
        .collect();
    if !mismatched.is_empty() {
        return Err(ApiError::Validation(mismatched));
    }
    let facts_json = serde_json::json!({
        "driver_version": facts.driver_version, "cuda_version": facts.cuda_version, "topology": facts.topology,
    });
    let existing = registration::lock_node_of_hostname(&mut tx, &facts.hostname).await?;
    let (node_id, status) = match existing {
        Some(node) if node.pool_id != pool_id => {
            return Err(ApiError::conflict("node_in_other_pool", "a node with this hostname belongs to another pool"));
        }
        Some(node) => {
            let (node_id, generation, operator_allowed) = (node.id, node.agent_generation, node.operator_allowed);
            let proven = proof.as_ref().is_some_and(|p| p.node_id == node_id && p.generation == generation);
            // An operator's node that no agent ever registered has no credential to prove: the operator who
            // created it and minted the pool's join token expects this agent (its GPUs must match, below).
            let first_agent = !node.agent_managed;
            if !proven && !operator_allowed && !first_agent {
                return Err(ApiError::conflict(
                    "node_identity_required",
                    "this hostname is a registered node: re-attaching it needs the node's current agent credential \
                     as the bearer token, or an operator's allow-reregistration",
                ));
            }
            let registered = registration::gpu_uuids(&mut tx, node_id).await?;
            let mut reported: Vec<(i32, String)> = facts.gpus.iter().map(|g| (g.index, g.uuid.clone())).collect();
            reported.sort();
            if registered != reported {
                return Err(ApiError::conflict(
                    "gpu_set_changed",
                    "the node reports other GPUs than it registered with; an operator must review it",
                ));
            }
            registration::update_network_facts(
                &mut tx,
                node_id,
                facts.address.trim(),
                facts.intra_link,
                facts.network_gbps,
                facts.rdma,
            )
            .await?;
            (node_id, StatusCode::OK)
        }
        None => {
            let request = CreateNodeRequest { pool_id, ..node_request };
            (insert_node(&mut tx, &request).await?, StatusCode::CREATED)
        }
    };
    // Alive again with the verdict it had; `readiness::evaluate_node` then judges the versions just reported.
    let generation = registration::attach_agent(
        &mut tx,
        node_id,
        facts_json,
        facts.echo_port,
        facts.lease_subnet.as_deref(),
        facts.launchers.as_ref().map(|l| serde_json::json!(l)),
    )
    .await?;
    crate::inventory::readiness::evaluate_node(&mut tx, node_id, &state.settings).await?;
    let indices: Vec<i32> = facts.gpus.iter().map(|g| g.index).collect();
    let names: Vec<&str> = facts.gpus.iter().map(|g| g.name.as_str()).collect();
    let memory: Vec<i64> = facts.gpus.iter().map(|g| g.memory_bytes).collect();
    registration::update_gpu_facts(&mut tx, node_id, &indices, &names, &memory).await?;
    let agent_token = state.tokens.issue_agent(node_id, generation)?;
    tx.commit().await?;
    tracing::info!(node.id = %node_id, hostname = %facts.hostname, attached = (status == StatusCode::OK), "agent registered");
    let interval = state.settings.heartbeat_interval.as_secs() as u32;
    Ok((status, NO_STORE, Json(RegisterResponse { node_id, pool_id, agent_token, heartbeat_interval_s: interval })))
}

/// A reported version is free text from the host (judged by `readiness`), but bounded and printable.
fn check_version_text(field: &str, version: Option<&str>, errors: &mut Vec<FieldError>) {
    if version.is_some_and(|v| v.is_empty() || v.chars().count() > 64 || v.chars().any(char::is_control)) {
        errors.push(FieldError::new(field, "1-64 printable characters"));
    }
}

fn invalid_join_token() -> ApiError {
    ApiError::unauthorized("unknown, expired, used-up or revoked join token")
}

fn prefix_fields(err: ApiError, prefix: &str) -> ApiError {
    match err {
        ApiError::Validation(errors) => ApiError::Validation(
            errors.into_iter().map(|e| FieldError::new(format!("{prefix}{}", e.field), e.message)).collect(),
        ),
        other => other,
    }
}

/// Range checks on one sample; returns the field errors.
fn validate_sample(i: usize, s: &GpuSample, errors: &mut Vec<FieldError>) {
    let mut bad = |field: &str, message: &str| errors.push(FieldError::new(format!("samples[{i}].{field}"), message));
    let pct = |v: f32| v.is_finite() && (0.0..=100.0).contains(&v);
    if !pct(s.gpu_util) {
        bad("gpu_util", "percent, 0-100");
    }
    if !pct(s.mem_copy_util) {
        bad("mem_copy_util", "percent, 0-100");
    }
    const MAX_MIB: i64 = 4 * 1024 * 1024;
    if !(0..=MAX_MIB).contains(&s.fb_used_mib) {
        bad("fb_used_mib", "MiB, 0-4194304");
    }
    if !(0..=MAX_MIB).contains(&s.fb_free_mib) {
        bad("fb_free_mib", "MiB, 0-4194304");
    }
    if !(s.power_w.is_finite() && (0.0..=5000.0).contains(&s.power_w)) {
        bad("power_w", "watts, 0-5000");
    }
    if s.energy_mj < 0 {
        bad("energy_mj", "a counter, not negative");
    }
    let temp = |v: f32| v.is_finite() && (-40.0..=150.0).contains(&v);
    if !temp(s.gpu_temp_c) {
        bad("gpu_temp_c", "Celsius, -40 to 150");
    }
    if s.mem_temp_c.is_some_and(|t| !temp(t)) {
        bad("mem_temp_c", "Celsius, -40 to 150");
    }
    if !(0..=10_000).contains(&s.sm_clock_mhz) {
        bad("sm_clock_mhz", "MHz, 0-10000");
    }
    if s.nvlink_bandwidth_gbps.is_some_and(|b| !(b.is_finite() && (0.0..=100_000.0).contains(&b))) {
        bad("nvlink_bandwidth_gbps", "GB/s, 0-100000");
    }
    if !(0..=100_000).contains(&s.xid_count)
        || s.xid_codes.len() > 64
        || s.xid_codes.iter().any(|c| !(0..=1000).contains(c))
    {
        bad("xid_count", "0-100000 events, at most 64 codes of 0-1000");
    }
    let skew = s.at - chrono::Utc::now();
    if skew > chrono::Duration::minutes(5) {
        bad("at", "more than 5 minutes in the future");
    }
}

/// The node's GPUs by index, cached per (node, credential generation): a node's GPUs are fixed between
/// registrations, so most heartbeats need no lookup.
async fn gpu_map(state: &AppState, agent: &AgentAuth) -> ApiResult<crate::state::gpu_map::GpuMap> {
    if let Some(map) = state.agent_gpus.get(agent.node_id, agent.generation) {
        return Ok(map);
    }
    let mut conn = state.db.acquire().await?;
    let rows = heartbeat::gpu_map(&mut conn, agent.node_id, agent.generation).await?;
    if rows.is_empty() {
        return Err(ApiError::unauthorized("the agent credential was rotated or its node is gone: register again"));
    }
    Ok(state.agent_gpus.insert(agent.node_id, agent.generation, rows))
}

/// Deliver telemetry and prove liveness. Answers the heartbeat interval and what the node should do.
#[utoipa::path(
    post, path = "/v1/agent/heartbeat", tag = "agents", operation_id = "post_heartbeat",
    request_body = HeartbeatRequest,
    responses(
        (status = 200, description = "Stored; the node's instructions", body = HeartbeatResponse),
    )
)]
pub async fn post_heartbeat(
    State(state): State<AppState>,
    agent: AgentAuth,
    ApiJson(req): ApiJson<HeartbeatRequest>,
) -> ApiResult<Json<HeartbeatResponse>> {
    if req.samples.len() > MAX_SAMPLES {
        return Err(ApiError::field("samples", format!("at most {MAX_SAMPLES} samples per heartbeat")));
    }
    let map = gpu_map(&state, &agent).await?;
    let mut errors = Vec::new();
    let mut gpu_indexes = Vec::with_capacity(req.samples.len());
    for (i, s) in req.samples.iter().enumerate() {
        match map.binary_search_by_key(&s.gpu_index, |(idx, _)| *idx) {
            Ok(_) => gpu_indexes.push(s.gpu_index),
            Err(_) => errors.push(FieldError::new(format!("samples[{i}].gpu_index"), "no such GPU on this node")),
        }
        validate_sample(i, s, &mut errors);
    }
    check_version_text("driver_version", req.driver_version.as_deref(), &mut errors);
    check_version_text("cuda_version", req.cuda_version.as_deref(), &mut errors);
    crate::leases::network::validate(&req.latency, &mut errors);
    crate::jobs::steps::validate(&req.steps, &mut errors);
    if let Some(launchers) = &req.launchers {
        crate::inventory::launchers::validate("launchers", launchers, &mut errors);
    }
    if req.echo_port.is_some_and(|p| !(1..=65535).contains(&p)) {
        errors.push(FieldError::new("echo_port", "a port, 1-65535"));
    }
    crate::volumes::agents::validate(&req.volume_stores, &req.volumes, &mut errors);
    crate::inventory::model_cache::validate(req.cached_models.as_deref(), &mut errors);
    for (i, report) in req.serving.iter().enumerate() {
        if !(1..=65535).contains(&report.port) {
            errors.push(FieldError::new(format!("serving[{i}].port"), "a port, 1-65535"));
        }
    }
    if req.serving.len() > 1024 {
        errors.push(FieldError::new("serving", "at most 1024 replicas"));
    }
    for (i, part) in req.progress.iter().enumerate() {
        if !part.progress.valid() {
            errors.push(FieldError::new(format!("progress[{i}]"), "0 <= done <= total"));
        }
    }
    if req.progress.len() > 1024 {
        errors.push(FieldError::new("progress", "at most 1024 parts"));
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let stored = store_heartbeat(&state, &agent, &gpu_indexes, &req.samples).await?;
    let (admin_state, was, accepted, assignments_pending) =
        (stored.admin_state, stored.was, stored.accepted, stored.assignments_pending);
    metrics::counter!("gpuplane_heartbeats_total").increment(1);
    metrics::counter!("gpuplane_heartbeat_samples_total").increment(accepted);
    let back = !was.is_alive();
    if back {
        tracing::info!(node.id = %agent.node_id, was = was.as_str(), "node is back");
    }
    let reported = |now: &Option<String>, before: &Option<String>| now.is_some() && now != before;
    // Judged again on new versions, and on its return from silence: a verdict that changed meanwhile (a pool's
    // minimum raised while it was silent) was not announced then.
    if back
        || reported(&req.driver_version, &stored.driver_version)
        || reported(&req.cuda_version, &stored.cuda_version)
    {
        update_versions(&state, agent.node_id, req.driver_version.as_deref(), req.cuda_version.as_deref()).await?;
    }
    if let Some(launchers) = &req.launchers {
        let mut conn = state.db.acquire().await?;
        heartbeat::update_launchers(&mut conn, agent.node_id, agent.generation, serde_json::json!(launchers)).await?;
    }
    if let Some(models) = &req.cached_models {
        let mut conn = state.db.acquire().await?;
        gpuplane_store::inventory::model_cache::record(&mut conn, agent.node_id, agent.generation, models).await?;
    }
    if let Some(port) = req.echo_port {
        let mut conn = state.db.acquire().await?;
        heartbeat::update_echo_port(&mut conn, agent.node_id, agent.generation, port).await?;
    }
    if !req.latency.is_empty() {
        crate::leases::network::record(&state, agent.node_id, &req.latency).await?;
    }
    if !req.progress.is_empty() {
        let mut conn = state.db.acquire().await?;
        gpuplane_store::jobs::agents::record_progress(&mut conn, agent.node_id, &req.progress).await?;
    }
    if !req.serving.is_empty() {
        // Where the gateway finds this node's ready replicas (its own running parts of a service only).
        let mut conn = state.db.acquire().await?;
        gpuplane_store::services::record_replicas(&mut conn, agent.node_id, &req.serving).await?;
        drop(conn);
        // A rolling replan waits for its new replicas to answer.
        let ready: Vec<Uuid> = req.serving.iter().filter(|r| r.ready).map(|r| r.job_node_id).collect();
        crate::jobs::lifecycle::continue_rolls(&state.db, &ready).await?;
    }
    if !req.steps.is_empty() {
        let mut tx = state.db.begin().await?;
        let stored = crate::jobs::steps::record(&mut tx, agent.node_id, &req.steps).await?;
        crate::jobs::recovery::note_resumed(&mut tx, agent.node_id).await?;
        tx.commit().await?;
        metrics::counter!("gpuplane_job_steps_total").increment(stored);
    }
    let fatal: Vec<(i32, Vec<i32>)> = req
        .samples
        .iter()
        .filter(|s| s.xid_codes.iter().any(|c| FATAL_XIDS.contains(c)))
        .map(|s| (s.gpu_index, s.xid_codes.iter().copied().filter(|c| FATAL_XIDS.contains(c)).collect()))
        .collect();
    if !fatal.is_empty() {
        mark_gpus_unhealthy(&state, agent.node_id, &fatal).await?;
    }
    // Only agents that offer a store or hold volumes touch them: most heartbeats skip this.
    let volumes = if req.volume_stores.is_empty() && req.volumes.is_empty() {
        Vec::new()
    } else {
        let mut conn = state.db.acquire().await?;
        crate::volumes::agents::on_heartbeat(&mut conn, agent.node_id, &req.volume_stores, &req.volumes).await?
    };
    let desired_state = match admin_state.as_str() {
        "active" => DesiredState::Active,
        "maintenance" => DesiredState::Maintenance,
        _ => DesiredState::Drain,
    };
    Ok(Json(HeartbeatResponse {
        heartbeat_interval_s: state.settings.heartbeat_interval.as_secs() as u32,
        desired_state,
        assignments_pending,
        accepted_samples: accepted,
        volumes,
    }))
}

/// What one heartbeat's statement found and did.
struct StoredHeartbeat {
    admin_state: String,
    /// Liveness before this heartbeat.
    was: Liveness,
    accepted: u64,
    assignments_pending: bool,
    /// The versions on record before this heartbeat.
    driver_version: Option<String>,
    cuda_version: Option<String>,
}

/// Record the versions the host reports (other than on record when it was upgraded in place) and judge the
/// node again (a `not_ready` node becomes ready here once they suffice).
async fn update_versions(state: &AppState, node_id: Uuid, driver: Option<&str>, cuda: Option<&str>) -> ApiResult<()> {
    let mut tx = state.db.begin().await?;
    heartbeat::record_versions(&mut tx, node_id, driver, cuda).await?;
    crate::inventory::readiness::evaluate_node(&mut tx, node_id, &state.settings).await?;
    tx.commit().await?;
    Ok(())
}

/// One statement: touch the node (only with the current credential generation) and insert the samples, one
/// row per sampling instant with the GPUs' records packed into one bytea (`super::codec`; a resent instant is
/// skipped by the primary key). Samples older than the raw retention are not stored (their partition is gone
/// or going). Returns the node's admin state, its liveness before this heartbeat, how many samples were new,
/// and whether the node has assignments to fetch.
async fn store_heartbeat(
    state: &AppState,
    agent: &AgentAuth,
    gpu_indexes: &[i32],
    samples: &[GpuSample],
) -> ApiResult<StoredHeartbeat> {
    let horizon = Utc::now() - chrono::Duration::from_std(state.settings.telemetry_retention).unwrap_or_default();
    // Instant -> that instant's (GPU index, sample), a GPU's repeat of an instant dropped.
    let mut instants: std::collections::BTreeMap<_, Vec<(i32, &GpuSample)>> = std::collections::BTreeMap::new();
    for (idx, s) in gpu_indexes.iter().copied().zip(samples).filter(|(_, s)| s.at >= horizon) {
        let gpus = instants.entry(s.at).or_default();
        if !gpus.iter().any(|(i, _)| *i == idx) {
            gpus.push((idx, s));
        }
    }
    let mut ats = Vec::with_capacity(instants.len());
    let mut packed = Vec::with_capacity(instants.len());
    let mut xids = Vec::with_capacity(instants.len());
    for (at, mut gpus) in instants {
        ats.push(at);
        packed.push(super::codec::encode_instant(&mut gpus));
        let pairs: Vec<String> = gpus.iter().filter_map(|(idx, s)| xid_pairs(*idx, &s.xid_codes)).collect();
        xids.push((!pairs.is_empty()).then(|| format!("{{{}}}", pairs.join(","))));
    }
    let mut conn = state.db.acquire().await?;
    let samples = heartbeat::HeartbeatSamples {
        ats: &ats,
        packed: &packed,
        xids: &xids,
        record_len: super::codec::RECORD_LEN as i32,
    };
    let row = heartbeat::store_heartbeat(&mut conn, agent.node_id, agent.generation, samples).await?;
    match row.map(|r| (r.admin_state, r.was, r.accepted, r.assignments_pending, r.driver, r.cuda)) {
        Some((Some(admin_state), Some(was), accepted, assignments_pending, driver_version, cuda_version)) => {
            Ok(StoredHeartbeat {
                admin_state,
                was,
                accepted: accepted.max(0) as u64,
                assignments_pending,
                driver_version,
                cuda_version,
            })
        }
        _ => {
            state.agent_gpus.forget(agent.node_id);
            Err(ApiError::unauthorized("the agent credential was rotated or its node is gone: register again"))
        }
    }
}

/// `0,48,0,79` (GPU index, XID code pairs) for the row's flat `xids` array; `None` for none.
fn xid_pairs(gpu_index: i32, codes: &[i32]) -> Option<String> {
    let pairs: Vec<String> = codes.iter().map(|c| format!("{gpu_index},{c}")).collect();
    (!pairs.is_empty()).then(|| pairs.join(","))
}

/// A fatal XID takes the GPU out of service (the store's `take_out_of_service`: no new allocations, an event on
/// the lease using it), and tells the operators.
async fn mark_gpus_unhealthy(state: &AppState, node_id: Uuid, fatal: &[(i32, Vec<i32>)]) -> ApiResult<()> {
    let mut tx = state.db.begin().await?;
    for (index, codes) in fatal {
        let reason = format!("fatal XID {}", codes.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", "));
        let Some(out) = heartbeat::take_out_of_service(&mut tx, node_id, *index, &reason).await? else { continue };
        tracing::warn!(node.id = %node_id, gpu.index = index, %reason, "GPU taken out of service");
        let data = serde_json::json!({
            "node_id": node_id, "gpu_id": out.gpu_id, "index": index, "xid": codes, "reason": reason,
            "lease_id": out.lease_id,
        });
        crate::webhooks::emit(&mut tx, crate::webhooks::Audience::Operators, "gpu.unhealthy", data).await?;
        // A leased GPU failed: a job that restarts for it moves off the node (the lease healed), else nothing
        // changes here (the job's processes fail on their own, or the tenant decides).
        if let Some(lease_id) = out.lease_id {
            let why = format!("GPU {index} of the node failed ({reason})");
            let cause = crate::jobs::restarts::FailureCause::GpuFailed;
            super::healing::heal(&mut tx, lease_id, node_id, cause, chrono::Utc::now(), &why).await?;
        }
    }
    tx.commit().await?;
    Ok(())
}

/// Return a GPU to service after a fatal error was dealt with.
#[utoipa::path(
    post, path = "/v1/admin/gpus/{gpu_id}/restore", tag = "admin", operation_id = "restore_gpu",
    params(("gpu_id" = Uuid, Path, description = "GPU id")),
    responses((status = 200, description = "The GPU's node", body = Node))
)]
pub async fn restore_gpu(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiPath(gpu_id): ApiPath<Uuid>,
) -> ApiResult<Json<Node>> {
    let mut tx = state.db.begin().await?;
    let node = heartbeat::return_to_service(&mut tx, gpu_id).await?;
    let Some(node_id) = node else { return Err(ApiError::NotFound("gpu")) };
    let node = load_node(&mut tx, node_id).await?.ok_or(ApiError::NotFound("node"))?;
    tx.commit().await?;
    Ok(Json(node))
}
