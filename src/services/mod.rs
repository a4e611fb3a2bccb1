//! Services: jobs that serve on a port, reached by their callers through the gateway ([`crate::gateway`]),
//! never directly (docs/serving.md). A job asks for it with `serve` on create ([`requests::ServeRequest`]); each
//! of its parts is a replica. The tenant manages who may call it: keys (`keys.rs`), public or not, a rate limit.

pub mod keys;
pub mod requests;
pub mod routes;
pub mod stats;
