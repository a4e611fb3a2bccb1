//! Leases: N GPUs of one pool for a period, or of two to four pools in parts (`parts`). Allocation (the store's `leases::allocation`, called through
//! `lifecycle`) is all-or-nothing, best-fit over node free counters under row locks, and backed by a unique index
//! that makes a double-booked GPU impossible.

pub mod idle;
pub mod insights;
pub mod lifecycle;
pub mod network;
pub mod parts;
pub mod placement;
pub mod release;
pub mod requests;
pub mod routes;
pub mod rules;
pub mod sweeper;
