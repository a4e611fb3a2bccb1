//! A GPU out of service and back, through the store's one function each way: the node's free counter stays equal to
//! its healthy GPUs no lease holds whatever the GPU's state (free or held), and a lease holding it is told.

use gpuplane_store::agents::heartbeat::{OutOfService, return_to_service, take_out_of_service};
use gpuplane_store::leases::allocation::{LeaseWrite, NewLease, Plan, write_lease};
use gpuplane_store::leases::events::{NewEvent, list_events};
use gpuplane_store::leases::{Actor, LeaseState, Placement, Term};
use sqlx::PgPool;
use uuid::Uuid;

use crate::seed;

async fn free_gpus(db: &PgPool, node: Uuid) -> i32 {
    sqlx::query_scalar("SELECT free_gpus FROM nodes WHERE id = $1").bind(node).fetch_one(db).await.unwrap()
}

async fn gpu_at(db: &PgPool, node: Uuid, index: i32) -> (Uuid, bool, Option<Uuid>) {
    sqlx::query_as("SELECT id, healthy, held_by FROM gpus WHERE node_id = $1 AND idx = $2")
        .bind(node)
        .bind(index)
        .fetch_one(db)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "gpuplane_store::MIGRATOR")]
async fn a_free_gpu_out_of_service_leaves_the_free_count_and_comes_back_to_it(db: PgPool) {
    let base = seed::base(&db).await;
    let node = seed::node(&db, base.pool, "n1", 4).await;
    let mut tx = db.begin().await.unwrap();
    let out = take_out_of_service(&mut tx, node, 2, "fatal XID 79").await.unwrap();
    tx.commit().await.unwrap();
    let (gpu_id, healthy, _) = gpu_at(&db, node, 2).await;
    assert_eq!(out, Some(OutOfService { gpu_id, lease_id: None }));
    assert!(!healthy);
    assert_eq!(free_gpus(&db, node).await, 3, "a free GPU out of service is not free");
    assert!(seed::counters_out_of_step(&db).await.is_empty());

    // Twice is nothing: the GPU is already out, the counter is not lowered again.
    let mut conn = db.acquire().await.unwrap();
    assert_eq!(take_out_of_service(&mut conn, node, 2, "fatal XID 79").await.unwrap(), None);
    assert_eq!(take_out_of_service(&mut conn, node, 9, "no such GPU").await.unwrap(), None);
    assert_eq!(free_gpus(&db, node).await, 3);

    assert_eq!(return_to_service(&mut conn, gpu_id).await.unwrap(), Some(node));
    assert_eq!(free_gpus(&db, node).await, 4);
    // A healthy GPU returned again changes nothing; an unknown one is None.
    assert_eq!(return_to_service(&mut conn, gpu_id).await.unwrap(), Some(node));
    assert_eq!(free_gpus(&db, node).await, 4);
    assert_eq!(return_to_service(&mut conn, Uuid::new_v4()).await.unwrap(), None);
    assert!(seed::counters_out_of_step(&db).await.is_empty());
}

#[sqlx::test(migrator = "gpuplane_store::MIGRATOR")]
async fn a_held_gpu_out_of_service_stays_with_its_lease_which_is_told(db: PgPool) {
    let base = seed::base(&db).await;
    let node = seed::node(&db, base.pool, "n1", 2).await;
    let new = NewLease {
        id: Uuid::new_v4(),
        tenant_id: base.tenant,
        pool_id: base.pool,
        gpu_count: 2,
        placement: Placement::Pack,
        term: Term::Hourly,
        duration_hours: Some(1),
        months: None,
        created_by: base.key,
        idle_release_after_minutes: None,
    };
    let mut tx = db.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM nodes WHERE id = $1 FOR UPDATE").bind(node).execute(&mut *tx).await.unwrap();
    let actor = Actor::Tenant(base.key);
    let event = NewEvent::new("allocated", None, Some(LeaseState::Active), &actor);
    let lease = write_lease(&mut tx, LeaseWrite::Create(&new), Some(&Plan(vec![(node, 2)])), event).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(lease.expect("the node fits").gpus.len(), 2);
    assert_eq!(free_gpus(&db, node).await, 0);

    let mut tx = db.begin().await.unwrap();
    let out = take_out_of_service(&mut tx, node, 1, "fatal XID 48").await.unwrap();
    tx.commit().await.unwrap();
    let (gpu_id, healthy, held_by) = gpu_at(&db, node, 1).await;
    assert_eq!(out, Some(OutOfService { gpu_id, lease_id: Some(new.id) }));
    assert!(!healthy);
    assert_eq!(held_by, Some(new.id), "the lease keeps the GPU until it ends");
    assert_eq!(free_gpus(&db, node).await, 0, "a held GPU was not free: nothing to take from the counter");
    let mut conn = db.acquire().await.unwrap();
    let events = list_events(&mut conn, new.id).await.unwrap();
    let told = events.iter().find(|e| e.kind == "gpu_unhealthy").expect("the lease is told");
    assert_eq!(told.reason.as_deref(), Some("fatal XID 48"));
    assert!(seed::counters_out_of_step(&db).await.is_empty());

    // Back in service while still held: still not free.
    assert_eq!(return_to_service(&mut conn, gpu_id).await.unwrap(), Some(node));
    assert_eq!(free_gpus(&db, node).await, 0);
    assert!(seed::counters_out_of_step(&db).await.is_empty());
}
