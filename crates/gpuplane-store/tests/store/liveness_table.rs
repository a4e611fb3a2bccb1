//! A node's liveness moves by one table (`gpuplane_store::agents::liveness::Liveness::on`). Its hearing half is also
//! stated in SQL, `node_heard_liveness()` (migration 0035), which registration and the heartbeat call: the two agree
//! for every state and verdict. (That the sweeper's and the heartbeat's statements move real nodes as the table says
//! is tested through the API, in tests/api/liveness.rs.)

use gpuplane_store::agents::liveness::{Event, Liveness, Versions};
use sqlx::PgPool;

#[sqlx::test(migrator = "gpuplane_store::MIGRATOR")]
async fn node_heard_liveness_agrees_with_the_liveness_table(db: PgPool) {
    for versions in Versions::ALL {
        let reason = match versions {
            Versions::Sufficient => None,
            Versions::TooOld => Some("driver 470.1 is below the minimum 535"),
        };
        let heard: Liveness =
            sqlx::query_scalar("SELECT node_heard_liveness($1)").bind(reason).fetch_one(&db).await.unwrap();
        for state in Liveness::ALL {
            assert_eq!(state.on(Event::Heard(versions)), heard, "{state:?} heard with {versions:?}");
            assert_eq!(state.on(Event::Registered(versions)), heard, "{state:?} registered with {versions:?}");
        }
    }
}
