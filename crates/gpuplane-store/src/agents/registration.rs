//! Registration: a join token's use, and a node's attachment to its agent.

use gpuplane_protocol::agent::IntraLink;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::StoreResult;

/// Use one registration of a live join token (by its secret's hash); its pool, or None when the token is
/// unknown, expired, used up or revoked.
pub async fn claim_join_token(conn: &mut PgConnection, secret_hash: &[u8]) -> StoreResult<Option<Uuid>> {
    Ok(sqlx::query_scalar!(
        "UPDATE join_tokens SET uses = uses + 1 WHERE secret_hash = $1 AND revoked_at IS NULL AND expires_at > now() \
         AND uses < max_uses RETURNING pool_id",
        secret_hash
    )
    .fetch_optional(conn)
    .await?)
}

/// The node registered under a hostname, as registration weighs re-attaching it.
#[derive(Debug, Clone)]
pub struct NodeOfHostname {
    pub id: Uuid,
    pub pool_id: Uuid,
    /// The generation of its current agent credential.
    pub agent_generation: i64,
    /// An agent registered it (else an operator created it and no agent has attached yet).
    pub agent_managed: bool,
    /// An operator allowed its re-registration within the last hour.
    pub operator_allowed: bool,
}

/// The node of this hostname, locked (`FOR UPDATE`) until the transaction ends.
pub async fn lock_node_of_hostname(conn: &mut PgConnection, hostname: &str) -> StoreResult<Option<NodeOfHostname>> {
    Ok(sqlx::query_as!(
        NodeOfHostname,
        r#"SELECT id, pool_id, agent_generation, agent_managed,
             coalesce(reregistration_allowed_until > now(), false) AS "operator_allowed!"
         FROM nodes WHERE hostname = $1 FOR UPDATE"#,
        hostname
    )
    .fetch_optional(conn)
    .await?)
}

/// A node's GPUs as (index, UUID), by index.
pub async fn gpu_uuids(conn: &mut PgConnection, node_id: Uuid) -> StoreResult<Vec<(i32, String)>> {
    Ok(sqlx::query!("SELECT idx, uuid FROM gpus WHERE node_id = $1 ORDER BY idx", node_id)
        .map(|g| (g.idx, g.uuid))
        .fetch_all(conn)
        .await?)
}

/// Record the network facts a re-attaching node reports.
pub async fn update_network_facts(
    conn: &mut PgConnection,
    node_id: Uuid,
    address: &str,
    intra_link: IntraLink,
    network_gbps: i32,
    rdma: bool,
) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE nodes SET address = $2, intra_link = $3, network_gbps = $4, rdma = $5, updated_at = now() \
         WHERE id = $1",
        node_id,
        address,
        intra_link as IntraLink,
        network_gbps,
        rdma
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Attach the node to its agent: agent-managed, alive again with the readiness verdict it had, a new credential
/// generation, the reported facts recorded. Returns the new generation.
pub async fn attach_agent(
    conn: &mut PgConnection,
    node_id: Uuid,
    facts: serde_json::Value,
    echo_port: Option<i32>,
    lease_subnet: Option<&str>,
    launchers: Option<serde_json::Value>,
) -> StoreResult<i64> {
    Ok(sqlx::query_scalar!(
        "UPDATE nodes SET agent_managed = true, external = false, agent_generation = agent_generation + 1, facts = $2, \
             liveness = node_heard_liveness(not_ready_reason), \
             last_heartbeat_at = now(), generation = generation + 1, reregistration_allowed_until = NULL, \
             echo_port = $3, lease_subnet = $4, launchers = $5 \
         WHERE id = $1 RETURNING agent_generation",
        node_id,
        facts,
        echo_port,
        lease_subnet,
        launchers
    )
    .fetch_one(conn)
    .await?)
}

/// Record the name and memory the driver reports for each GPU (by index).
pub async fn update_gpu_facts(
    conn: &mut PgConnection,
    node_id: Uuid,
    indices: &[i32],
    names: &[&str],
    memory: &[i64],
) -> StoreResult<()> {
    sqlx::query!(
        "UPDATE gpus g SET name = u.name, memory_bytes = u.memory FROM UNNEST($2::int[], $3::text[], $4::bigint[]) \
         AS u(idx, name, memory) WHERE g.node_id = $1 AND g.idx = u.idx",
        node_id,
        indices,
        names as &[&str],
        memory
    )
    .execute(conn)
    .await?;
    Ok(())
}
