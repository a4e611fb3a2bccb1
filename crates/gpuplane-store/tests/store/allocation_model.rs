//! A differential property test of the one allocation core: random inventories and random request sequences
//! run through the real store functions (`admit`, `place`, `write_lease`, `end_lease`) against PostgreSQL,
//! and step by step through a pure reference model of the documented placement rules written here, without
//! the crate's planner. Every step must agree on the outcome (allocated, 409, 422) and on the exact GPUs, no
//! GPU may be held twice, and every node's `free_gpus` must equal its healthy GPUs not held.
//!
//! The rules the model states (docs/allocation.md; the server's src/leases/placement.rs):
//! - allocatable nodes are active and ready; a node's free block is its healthy GPUs not held;
//! - one node (pack, single_node): the smallest sufficient free block, then the lowest id;
//! - several nodes (pack when no node fits alone; spread always): the plan is made over the `gpu_count`
//!   largest free blocks (free desc, then id; no more nodes than GPUs can be needed). Pack takes the largest
//!   blocks whole while none fits the rest, then the smallest block that fits the rest (ties: earlier in that
//!   order); spread gives one GPU per node per round in that order;
//! - inside a node: the window of free indices with the smallest span, ties the lowest;
//! - a request that does not fit is 422 when it never can (more GPUs than the pool has; single_node above the
//!   largest node), else 409.

use gpuplane_store::leases::allocation::{LeaseWrite, NewLease};

use gpuplane_store::leases::events::NewEvent;
use gpuplane_store::leases::{Actor, LeaseState, Placement, Term};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sqlx::PgPool;
use uuid::Uuid;

use crate::seed;

const CASES: u64 = 40;

#[derive(Debug, Clone)]
struct Gpu {
    id: Uuid,
    idx: i32,
    healthy: bool,
    held_by: Option<Uuid>,
}

#[derive(Debug, Clone)]
struct Node {
    id: Uuid,
    hostname: String,
    allocatable: bool,
    gpus: Vec<Gpu>,
}

impl Node {
    fn free(&self) -> Vec<i32> {
        let mut free: Vec<i32> = self.gpus.iter().filter(|g| g.healthy && g.held_by.is_none()).map(|g| g.idx).collect();
        free.sort_unstable();
        free
    }
}

/// The reference model: the inventory and who holds what.
#[derive(Debug, Clone)]
struct Model {
    nodes: Vec<Node>,
}

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// (hostname, index) of each GPU, sorted.
    Allocated(Vec<(String, i32)>),
    Conflict,
    Unprocessable,
}

/// The tightest window of `k` free indices (ties: the lowest), by brute force over every start.
fn tightest_window(free: &[i32], k: usize) -> Vec<i32> {
    let mut best: Option<(i32, usize)> = None;
    for start in 0..=free.len() - k {
        let span = free[start + k - 1] - free[start];
        if best.is_none_or(|(s, _)| span < s) {
            best = Some((span, start));
        }
    }
    let (_, start) = best.unwrap();
    free[start..start + k].to_vec()
}

impl Model {
    /// What the rules choose: (node position, indices) per node, or None when it does not fit now.
    fn choose(&self, n: i32, placement: Placement) -> Option<Vec<(usize, Vec<i32>)>> {
        let free: Vec<(usize, Vec<i32>)> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, node)| node.allocatable)
            .map(|(i, node)| (i, node.free()))
            .collect();
        if placement != Placement::Spread {
            let best =
                free.iter().filter(|(_, f)| f.len() as i32 >= n).min_by_key(|(i, f)| (f.len(), self.nodes[*i].id));
            if let Some((i, f)) = best {
                return Some(vec![(*i, tightest_window(f, n as usize))]);
            }
            if placement == Placement::SingleNode {
                return None;
            }
        }
        let mut candidates: Vec<&(usize, Vec<i32>)> = free.iter().filter(|(_, f)| !f.is_empty()).collect();
        candidates.sort_by_key(|(i, f)| (std::cmp::Reverse(f.len()), self.nodes[*i].id));
        candidates.truncate(n as usize);
        if candidates.iter().map(|(_, f)| f.len() as i32).sum::<i32>() < n {
            return None;
        }
        let mut take = vec![0usize; candidates.len()];
        let mut left = n as usize;
        if placement == Placement::Spread {
            while left > 0 {
                for (t, (_, f)) in take.iter_mut().zip(&candidates) {
                    if left > 0 && *t < f.len() {
                        *t += 1;
                        left -= 1;
                    }
                }
            }
        } else {
            loop {
                let open: Vec<usize> = (0..candidates.len()).filter(|&c| take[c] == 0).collect();
                // Candidates are in (free desc, id) order, so the last sufficient one is the best fit.
                if let Some(&c) = open.iter().rfind(|&&c| candidates[c].1.len() >= left) {
                    let smallest = candidates[c].1.len();
                    let c = *open.iter().find(|&&o| candidates[o].1.len() == smallest).unwrap();
                    take[c] = left;
                    break;
                }
                let c = open[0];
                take[c] = candidates[c].1.len();
                left -= take[c];
            }
        }
        Some(
            candidates
                .iter()
                .zip(take)
                .filter(|(_, t)| *t > 0)
                .map(|((i, f), t)| (*i, tightest_window(f, t)))
                .collect(),
        )
    }

    fn create(&mut self, lease: Uuid, n: i32, placement: Placement) -> Outcome {
        let Some(chosen) = self.choose(n, placement) else {
            let total: usize = self.nodes.iter().map(|node| node.gpus.len()).sum();
            let largest = self.nodes.iter().map(|node| node.gpus.len()).max().unwrap_or(0);
            let never = n as usize > total || (placement == Placement::SingleNode && n as usize > largest);
            return if never { Outcome::Unprocessable } else { Outcome::Conflict };
        };
        let mut gpus = Vec::new();
        for (i, indices) in chosen {
            let node = &mut self.nodes[i];
            for gpu in node.gpus.iter_mut().filter(|g| indices.contains(&g.idx)) {
                gpu.held_by = Some(lease);
            }
            gpus.extend(indices.into_iter().map(|idx| (node.hostname.clone(), idx)));
        }
        gpus.sort();
        Outcome::Allocated(gpus)
    }

    fn release(&mut self, lease: Uuid) {
        for gpu in self.nodes.iter_mut().flat_map(|n| n.gpus.iter_mut()) {
            if gpu.held_by == Some(lease) {
                gpu.held_by = None;
            }
        }
    }
}

/// A random inventory written straight into the database: 1-8 nodes of 1-8 GPUs, some GPUs unhealthy, some
/// nodes cordoned or not ready, some GPUs held by leases made beforehand. Returns the model and those leases.
async fn seed_inventory(db: &PgPool, rng: &mut StdRng, case: u64, pool: Uuid, tenant: Uuid) -> (Model, Vec<Uuid>) {
    let mut nodes = Vec::new();
    for n in 0..rng.random_range(1..=8) {
        let size = rng.random_range(1..=8);
        let allocatable = rng.random_bool(0.8);
        let gpus = (0..size)
            .map(|idx| Gpu { id: Uuid::new_v4(), idx, healthy: rng.random_bool(0.9), held_by: None })
            .collect();
        nodes.push(Node { id: Uuid::new_v4(), hostname: format!("c{case}-n{n}"), allocatable, gpus });
    }
    let mut model = Model { nodes };
    // Leases made beforehand hold random GPUs (healthy or not) of one node each.
    let mut held = Vec::new();
    for node in &mut model.nodes {
        if rng.random_bool(0.4) {
            let lease = Uuid::new_v4();
            for gpu in node.gpus.iter_mut() {
                if rng.random_bool(0.4) {
                    gpu.held_by = Some(lease);
                }
            }
            if node.gpus.iter().any(|g| g.held_by == Some(lease)) {
                held.push(lease);
            }
        }
    }
    for node in &model.nodes {
        let (admin_state, liveness) = match (node.allocatable, rng.random_bool(0.5)) {
            (true, _) => ("active", "ready"),
            (false, true) => ("cordoned", "ready"),
            (false, false) => ("active", "unreachable"),
        };
        // Agent nodes: only a node an agent reported (or an external one) may be ready and hold GPUs.
        sqlx::query(
            "INSERT INTO nodes (id, pool_id, hostname, address, admin_state, liveness, intra_link, intra_link_gbps, \
                 network_gbps, gpu_count, free_gpus, agent_managed) \
             VALUES ($1, $2, $3, $3 || '.test', $4, $5, 'nvlink', 900, 400, $6, $7, true)",
        )
        .bind(node.id)
        .bind(pool)
        .bind(&node.hostname)
        .bind(admin_state)
        .bind(liveness)
        .bind(node.gpus.len() as i32)
        .bind(node.free().len() as i32)
        .execute(db)
        .await
        .unwrap();
        for gpu in &node.gpus {
            sqlx::query("INSERT INTO gpus (id, node_id, idx, uuid, healthy) VALUES ($1, $2, $3, $4, $5)")
                .bind(gpu.id)
                .bind(node.id)
                .bind(gpu.idx)
                .bind(format!("GPU-{}", gpu.id))
                .bind(gpu.healthy)
                .execute(db)
                .await
                .unwrap();
        }
    }
    for lease in &held {
        let gpus: Vec<(Uuid, Uuid)> = model
            .nodes
            .iter()
            .flat_map(|n| n.gpus.iter().filter(|g| g.held_by == Some(*lease)).map(move |g| (g.id, n.id)))
            .collect();
        sqlx::query(
            "WITH lease AS (INSERT INTO leases (id, tenant_id, pool_id, gpu_count, placement, term, duration_hours, \
                 state, starts_at, ends_at, metered_until, currency, gpu_ids) \
                 VALUES ($1, $2, $3, $4, 'pack', 'hourly', 2, 'active', now(), now() + interval '2 hours', now(), 'USD', $5) \
                 RETURNING id) \
             UPDATE gpus SET held_by = (SELECT id FROM lease) WHERE id = ANY($5)",
        )
        .bind(lease)
        .bind(tenant)
        .bind(pool)
        .bind(gpus.len() as i32)
        .bind(gpus.iter().map(|g| g.0).collect::<Vec<_>>())
        .execute(db)
        .await
        .unwrap();
    }
    (model, held)
}

/// One create through the store, as `POST /v1/leases` runs it: admission, which locks the best-fit node and
/// writes the lease there when one node fits; otherwise placement and one write; 422 or 409 from the pool's
/// figures when nothing fits.
async fn create(db: &PgPool, key: Uuid, pool: Uuid, tenant: Uuid, n: i32, placement: Placement) -> (Uuid, Outcome) {
    let mut tx = db.begin().await.unwrap();
    let try_lock = placement != Placement::Spread;
    let new = NewLease {
        id: Uuid::new_v4(),
        tenant_id: tenant,
        pool_id: pool,
        gpu_count: n,
        placement,
        term: Term::Hourly,
        duration_hours: Some(2),
        months: None,
        created_by: key,
        idle_release_after_minutes: None,
    };
    let admission = gpuplane_store::leases::allocation::admit(&mut tx, &new, None, try_lock).await.unwrap();
    let lease = match admission.lease {
        // One client: the node it locked cannot have changed since the statement's snapshot.
        Some(lease) => lease.0,
        None => {
            // One client: nothing else holds a node, so admission never asks to wait.
            let best_fit = admission.best_fit().expect("no concurrent holder, no wait");
            let plan = gpuplane_store::leases::allocation::place(&mut tx, pool, n, placement, best_fit).await.unwrap();
            let Some(plan) = plan else {
                let gpuplane_store::leases::allocation::PoolSize { total, largest_node: largest } =
                    gpuplane_store::leases::allocation::pool_size(&mut tx, pool).await.unwrap();
                let never = n as i64 > total || (placement == Placement::SingleNode && n as i64 > largest);
                return (new.id, if never { Outcome::Unprocessable } else { Outcome::Conflict });
            };
            let actor = Actor::Tenant(key);
            let event = NewEvent::new("allocated", None, Some(LeaseState::Active), &actor);
            gpuplane_store::leases::allocation::write_lease(&mut tx, LeaseWrite::Create(&new), Some(&plan), event)
                .await
                .unwrap()
                .expect("the counters agree with the GPUs")
        }
    };
    tx.commit().await.unwrap();
    assert_eq!(lease.gpus.len(), n as usize);
    let mut gpus: Vec<(String, i32)> = lease.gpus.iter().map(|g| (g.hostname.clone(), g.index)).collect();
    gpus.sort();
    (new.id, Outcome::Allocated(gpus))
}

/// Holdings out of step (must be 0: a GPU held by a lease that is not active or was not given it, or a GPU an
/// active lease was given that it does not hold), and the nodes whose counter differs from their healthy GPUs
/// not held.
async fn invariants(db: &PgPool) -> (i64, Vec<String>) {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM gpus g JOIN leases l ON l.id = g.held_by \
                     WHERE l.state <> 'active' OR NOT g.id = ANY(l.gpu_ids)) \
                  + (SELECT count(*) FROM leases l CROSS JOIN unnest(l.gpu_ids) h(gpu_id) JOIN gpus g ON g.id = h.gpu_id \
                     WHERE l.state = 'active' AND g.held_by IS DISTINCT FROM l.id), \
                ARRAY(SELECT n.hostname FROM nodes n WHERE n.free_gpus <> (SELECT count(*) FROM gpus g \
                    WHERE g.node_id = n.id AND g.healthy AND g.held_by IS NULL))",
    )
    .fetch_one(db)
    .await
    .unwrap()
}

#[sqlx::test(migrator = "gpuplane_store::MIGRATOR")]
async fn allocation_agrees_with_the_reference_model(db: PgPool) {
    let seed::Base { tenant, key, pool } = seed::base(&db).await;
    let base_seed: u64 = std::env::var("ALLOCATION_MODEL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x15);
    let mut allocated = 0;
    for case in 0..CASES {
        let case_seed = base_seed.wrapping_mul(1_000_003).wrapping_add(case);
        let mut rng = StdRng::seed_from_u64(case_seed);
        sqlx::query("TRUNCATE lease_events, leases, gpus, nodes CASCADE").execute(&db).await.unwrap();
        let (mut model, mut live) = seed_inventory(&db, &mut rng, case, pool, tenant).await;
        let steps = rng.random_range(10..=30);
        for step in 0..steps {
            let context = || format!("seed {case_seed} (ALLOCATION_MODEL_SEED={base_seed}, case {case}), step {step}");
            if !live.is_empty() && rng.random_bool(0.35) {
                let lease = live.swap_remove(rng.random_range(0..live.len()));
                let mut conn = db.acquire().await.unwrap();
                let ended = gpuplane_store::leases::ending::end_lease(
                    &mut conn,
                    lease,
                    None,
                    LeaseState::Released,
                    "model",
                    &Actor::System,
                    None,
                )
                .await
                .unwrap();
                assert!(ended.is_some(), "{}: release of {lease}", context());
                model.release(lease);
            } else {
                let n = rng.random_range(1..=16);
                let placement = [Placement::Pack, Placement::SingleNode, Placement::Spread][rng.random_range(0..3)];
                let before = model.clone();
                let (id, got) = create(&db, key, pool, tenant, n, placement).await;
                let expected = model.create(id, n, placement);
                assert_eq!(got, expected, "{}: {n} GPUs {placement:?} on {:#?}", context(), before.nodes);
                if matches!(got, Outcome::Allocated(_)) {
                    live.push(id);
                    allocated += 1;
                }
            }
            let (doubles, wrong_counters) = invariants(&db).await;
            assert_eq!(doubles, 0, "{}: a GPU held twice", context());
            assert!(wrong_counters.is_empty(), "{}: counters differ from holdings on {wrong_counters:?}", context());
        }
    }
    // The cases exercise allocation, not only refusals.
    assert!(allocated > CASES, "only {allocated} allocations in {CASES} cases");
}
