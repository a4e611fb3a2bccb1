//! Tenants: their rows, quotas and status.
