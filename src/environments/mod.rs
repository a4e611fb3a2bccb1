//! Interactive access to a lease: tenants' SSH keys, and a lease's environment, an SSH server in the lease's
//! sandbox on each of its nodes (the same sandbox as its jobs, kept open) that accepts the tenant's current keys
//! only. The agents run it (`gpuplane_agent::environments`); this module holds what the service records and
//! hands out.

/// The environment wire protocol (crate `gpuplane-protocol`).
pub use gpuplane_protocol::environments as protocol;
pub mod routes;
pub mod ssh_keys;
