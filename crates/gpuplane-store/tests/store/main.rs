//! The store on its own, against real PostgreSQL: each test gets a fresh database migrated by the store's own
//! `MIGRATOR`, seeds it with SQL and calls the store's functions, with no server, handler or HTTP in between. What
//! is tested here is what the store promises whoever calls it: the invariants its statements keep.

mod allocation_model;
mod gpus_in_service;
mod liveness_table;
mod seed;
