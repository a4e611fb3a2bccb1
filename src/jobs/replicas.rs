//! A service's replicas kept serving (docs/serving.md, "Replicas"). A replica that fails while others serve runs
//! again on its node as its part's next attempt, after the backoff of the job's restart policy
//! ([`decide_restarts`]; the recovery worker starts those due: [`start_due`]). A replan of a service rolls over
//! its nodes one at a time ([`roll`], whose rule is the pure [`next_step`]): a node's old replica is noticed, its
//! new one starts once the old has ended, and the next node's waits until the new one answers its health probe,
//! so the other nodes' replicas take the requests meanwhile.

use sqlx::PgConnection;
use uuid::Uuid;

use super::policy::policy_of;
use super::restarts::{FailureCause, Verdict, decide};
use crate::extract::new_id;
use crate::state::AppState;
use gpuplane_store::jobs::replicas::{self as store, RollingPart};

/// Decide the restarts of a service's failed replicas in `generation` (the job row locked by the caller, the
/// others still serving): each runs again after the policy's backoff, doubled for each attempt of its rank in a
/// row that failed before it was ever ready; past `max_restarts` such attempts it stays failed.
pub async fn decide_restarts(conn: &mut PgConnection, job_id: Uuid, generation: i32) -> Result<(), sqlx::Error> {
    let failed = store::undecided_failures(conn, job_id, generation).await?;
    if failed.is_empty() {
        return Ok(());
    }
    let (policy, _) = policy_of(conn, job_id).await?;
    for replica in failed {
        let cause = replica.failure_cause.unwrap_or(FailureCause::ProcessDied);
        let before = i32::try_from(replica.failures_unready - 1).unwrap_or(i32::MAX).max(0);
        if let Verdict::Restart { backoff_s } = decide(&policy, before, cause) {
            store::schedule_restart(conn, replica.id, backoff_s).await?;
            tracing::warn!(job.id = %job_id, job_node.id = %replica.id, backoff_s, "replica failed: restarting it");
        }
    }
    Ok(())
}

/// Start the replica restarts that are due: each failed part's next attempt, pending on its node with its spec
/// (fetched by its agent as any part). Safe with several service replicas (the job row's lock). Returns the jobs.
pub async fn start_due(state: &AppState) -> anyhow::Result<Vec<Uuid>> {
    let mut conn = state.db.acquire().await?;
    let jobs = store::jobs_with_restarts_due(&mut conn).await?;
    drop(conn);
    let mut acted = Vec::new();
    for job_id in jobs {
        let mut tx = state.db.begin().await?;
        gpuplane_store::jobs::lock_job(&mut tx, job_id).await?;
        let due = store::lock_due_restarts(&mut tx, job_id).await?;
        for replica in &due {
            store::replace(&mut tx, job_id, replica, new_id()).await?;
            tracing::info!(job.id = %job_id, rank = replica.node_rank, attempt = replica.attempt + 1, "replica restarted");
        }
        tx.commit().await?;
        if !due.is_empty() {
            acted.push(job_id);
        }
    }
    Ok(acted)
}

/// What a rolling replan does next.
#[derive(Debug, PartialEq, Eq)]
pub enum RollStep {
    /// Give these running parts of the old generation their notice.
    Notice(Vec<Uuid>),
    /// Start the new generation's part of this rank (its node's old parts have ended).
    Start(usize),
    /// Wait: for a noticed part to end, or for a started one to be ready.
    Wait,
    /// Every new part has started and answered, every old one has ended: the new generation takes over.
    Done,
}

/// Pure: the next step of a rolling replan, from the old generation's parts and the new one's (its node, and
/// its part once started), in rank order. One node at a time: a new part starts once its node's old parts have
/// ended; the next rank goes on once it has been ready (a new part that failed before that halts the roll, and
/// the old replicas left serve on); old parts on no new part's node are noticed last.
pub fn next_step(old: &[RollingPart], new: &[(Uuid, Option<&RollingPart>)]) -> RollStep {
    let open = |p: &&RollingPart| !p.state.is_terminal();
    let notice = |parts: Vec<&RollingPart>| {
        let ids: Vec<Uuid> = parts.iter().filter(|p| !p.noticed).map(|p| p.id).collect();
        if ids.is_empty() { RollStep::Wait } else { RollStep::Notice(ids) }
    };
    for (rank, (node_id, started)) in new.iter().enumerate() {
        match started {
            Some(part) if part.ready_at.is_some() => continue,
            Some(_) => return RollStep::Wait,
            None => {
                let on_node: Vec<&RollingPart> = old.iter().filter(|p| p.node_id == *node_id).filter(open).collect();
                return if on_node.is_empty() { RollStep::Start(rank) } else { notice(on_node) };
            }
        }
    }
    let left: Vec<&RollingPart> = old.iter().filter(open).collect();
    if left.is_empty() { RollStep::Done } else { notice(left) }
}

/// Take a service's pending replan from generation `current` to `next` one step further (the job row locked by
/// the caller): notice a node's old replica, or start its new one. Returns whether the roll is done (every old
/// part ended): then the new generation takes over as a replan's does.
pub async fn roll(
    conn: &mut PgConnection,
    job_id: Uuid,
    current: i32,
    next: i32,
    grace_s: i32,
) -> Result<bool, sqlx::Error> {
    let (_, specs, _) = gpuplane_store::jobs::generation_to_start(conn, job_id, next).await?;
    // A notice ends a part no agent had fetched at once (its node's new part may start now): two rounds at most.
    for _ in 0..3 {
        let old = store::generation_parts(conn, job_id, current).await?;
        let started = store::generation_parts(conn, job_id, next).await?;
        let new: Vec<(Uuid, Option<&RollingPart>)> = specs
            .iter()
            .enumerate()
            .map(|(rank, part)| (part.node_id, started.iter().find(|p| p.node_rank == rank as i32)))
            .collect();
        match next_step(&old, &new) {
            RollStep::Notice(parts) => {
                let reason = format!("replan to generation {next} (rolling, one node at a time)");
                gpuplane_store::jobs::give_notice(conn, job_id, Some(&parts), &reason, grace_s).await?;
            }
            RollStep::Start(rank) => {
                let part = &specs[rank];
                let spec = serde_json::to_value(&part.spec).unwrap_or_default();
                let rank = rank as i32;
                gpuplane_store::jobs::insert_parts(conn, job_id, next, &[new_id()], &[part.node_id], &[rank], &[spec])
                    .await?;
                tracing::info!(job.id = %job_id, generation = next, rank, "rolling replan: a node's new replica starts");
                return Ok(false);
            }
            RollStep::Wait => return Ok(false),
            RollStep::Done => return Ok(true),
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuplane_protocol::jobs::JobState;

    fn part(node: u128, rank: i32, state: JobState, ready: bool, noticed: bool) -> RollingPart {
        RollingPart {
            id: Uuid::from_u128(node * 100 + rank as u128),
            node_id: Uuid::from_u128(node),
            node_rank: rank,
            state,
            ready_at: ready.then(chrono::Utc::now),
            noticed,
        }
    }

    #[test]
    fn a_replan_rolls_over_the_nodes_one_at_a_time_and_waits_for_each_new_replica_to_answer() {
        use JobState::*;
        let (a, b) = (1, 2);
        let node = |n: u128| Uuid::from_u128(n);
        // Both old replicas serve: node a's is noticed first, b's left serving.
        let old = [part(a, 0, Running, true, false), part(b, 1, Running, true, false)];
        let new = [(node(a), None), (node(b), None)];
        assert_eq!(next_step(&old, &new), RollStep::Notice(vec![old[0].id]));
        // Noticed, still finishing its requests: wait.
        let old = [part(a, 0, Running, true, true), part(b, 1, Running, true, false)];
        assert_eq!(next_step(&old, &new), RollStep::Wait);
        // Ended: a's new replica starts; until it answers, b's old one is not touched.
        let old = [part(a, 0, Cancelled, true, true), part(b, 1, Running, true, false)];
        assert_eq!(next_step(&old, &new), RollStep::Start(0));
        let starting = part(a, 0, Running, false, false);
        let new = [(node(a), Some(&starting)), (node(b), None)];
        assert_eq!(next_step(&old, &new), RollStep::Wait);
        // Ready: b's turn.
        let ready_a = part(a, 0, Running, true, false);
        let new = [(node(a), Some(&ready_a)), (node(b), None)];
        assert_eq!(next_step(&old, &new), RollStep::Notice(vec![old[1].id]));
        let old = [part(a, 0, Cancelled, true, true), part(b, 1, Succeeded, true, true)];
        assert_eq!(next_step(&old, &new), RollStep::Start(1));
        let ready_b = part(b, 1, Running, true, false);
        let new = [(node(a), Some(&ready_a)), (node(b), Some(&ready_b))];
        assert_eq!(next_step(&old, &new), RollStep::Done);
    }

    #[test]
    fn a_failed_new_replica_halts_the_roll_and_old_parts_off_the_new_nodes_go_last() {
        use JobState::*;
        let (a, b, c) = (1, 2, 3);
        let node = |n: u128| Uuid::from_u128(n);
        let old = [part(a, 0, Cancelled, true, true), part(b, 1, Running, true, false)];
        let failed = part(a, 0, Failed, false, false);
        assert_eq!(next_step(&old, &[(node(a), Some(&failed)), (node(b), None)]), RollStep::Wait);
        // An old replica that had failed already: its node's new one starts at once.
        let old =
            [part(a, 0, Failed, false, false), part(b, 1, Running, true, false), part(c, 2, Running, true, false)];
        assert_eq!(next_step(&old, &[(node(a), None), (node(b), None)]), RollStep::Start(0));
        // Every new part ready: the old one on a node the new plan leaves out is noticed, then done.
        let ready = [part(a, 0, Running, true, false), part(b, 1, Running, true, false)];
        let old =
            [part(a, 0, Failed, false, false), part(b, 1, Cancelled, true, true), part(c, 2, Running, true, false)];
        let new = [(node(a), Some(&ready[0])), (node(b), Some(&ready[1]))];
        assert_eq!(next_step(&old, &new), RollStep::Notice(vec![old[2].id]));
        let old =
            [part(a, 0, Failed, false, false), part(b, 1, Cancelled, true, true), part(c, 2, Cancelled, true, true)];
        assert_eq!(next_step(&old, &new), RollStep::Done);
    }
}
