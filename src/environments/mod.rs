//! Interactive access to a lease: tenants' SSH keys, and a lease's environment, an SSH server in the lease's
//! sandbox on each of its nodes (the same sandbox as its jobs, kept open) that accepts the tenant's current keys
//! only. The agents run it ([`crate::agent::environments`]); this module holds what the service records and
//! hands out.

pub mod protocol;
pub mod routes;
pub mod ssh_keys;

use utoipa_axum::router::OpenApiRouter;

use crate::app::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    routes::router()
}
