//! Interactive access to a lease: tenants' SSH keys, and a lease's environment, an SSH server in the lease's
//! sandbox on each of its nodes (the same sandbox as its jobs, kept open) that accepts the tenant's current keys
//! only. The agents run it (`gpuplane_agent::environments`); this module holds what the service records and
//! hands out.

/// The environment wire protocol (crate `gpuplane-protocol`).
pub use gpuplane_protocol::environments as protocol;
pub mod requests;
pub mod routes;
pub mod ssh_keys;

use protocol::EnvironmentState;

/// The environment's state from its nodes': stopped unless running; failed if any node failed; ready when all are.
pub fn overall_state(running: bool, nodes: impl Iterator<Item = EnvironmentState> + Clone) -> EnvironmentState {
    if !running {
        EnvironmentState::Stopped
    } else if nodes.clone().any(|s| s == EnvironmentState::Failed) {
        EnvironmentState::Failed
    } else if nodes.clone().all(|s| s == EnvironmentState::Ready) && nodes.count() > 0 {
        EnvironmentState::Ready
    } else {
        EnvironmentState::Starting
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use EnvironmentState::*;

    #[test]
    fn the_environment_is_ready_only_when_every_node_is() {
        let state = |running, nodes: &[EnvironmentState]| overall_state(running, nodes.iter().copied());
        assert_eq!(state(true, &[Ready, Ready]), Ready);
        assert_eq!(state(true, &[Ready, Starting]), Starting);
        assert_eq!(state(true, &[Ready, Failed]), Failed);
        assert_eq!(state(false, &[Ready, Ready]), Stopped);
        assert_eq!(state(true, &[]), Starting);
    }
}
