//! The gateway: how a service's callers reach its replicas (docs/serving.md).
//!
//! It runs in the service's process, on a listener of its own (`--gateway-bind`), meant to be published under a
//! domain of its own: what tenants' servers answer never shares an origin (or cookies) with the console and the
//! API. Every replica of the service runs one; they hold nothing but counters, and read keys and ready replicas
//! from the database like the API does.
//!
//! A request to `/s/{service_id}/PATH` is, in order: the service looked up with the presented key's hash
//! (`Authorization: Bearer gps_...` or `X-Api-Key`; 404 for no such service, 401 without a valid key of this
//! service unless it is public), counted against its rate limit (429), sent to a ready replica chosen by
//! [`balancer`] over a connection to the replica's forwarder on its node that presents the replica's token, and
//! answered with what the replica answers, streamed. A replica that cannot be reached before the request is sent
//! is passed over and the next one tried, so a replica that died costs only the requests it was answering.

pub mod balancer;
pub mod connections;
pub mod limits;
pub mod proxy;
pub mod shared;
pub mod tally;

use axum::Router;
use axum::routing::any;

pub use shared::Gateway;

/// The gateway's routes: every method, every path under a service.
pub fn router(gateway: Gateway) -> Router {
    Router::new()
        .route("/s/{service_id}", any(proxy::forward))
        .route("/s/{service_id}/{*rest}", any(proxy::forward))
        .fallback(proxy::not_a_service)
        .with_state(gateway)
        // A panic is a 500 for that request, never a dropped connection or a dead worker.
        .layer(tower_http::catch_panic::CatchPanicLayer::new())
}
