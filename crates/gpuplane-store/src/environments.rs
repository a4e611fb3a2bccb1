//! Lease environments: SSH keys and sessions.
