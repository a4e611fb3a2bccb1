//! GPU inventory: the model catalog, pools (one GPU model in one region at one price) and nodes with their GPUs.

pub mod gpu_models;
pub mod launchers;
pub mod model_cache;
pub mod nodes;
pub mod pools;
pub mod readiness;

/// Upper bound on a GPU-hour price, to catch unit mistakes (1e9 minor units = 10 million in major units).
/// Here rather than in `pools`, which records prices through `billing::prices`: the price rules read it too.
pub const MAX_PRICE_MINOR: i64 = 1_000_000_000;
