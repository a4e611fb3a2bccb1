//! Auto-parallel planner: picks tensor/pipeline/data parallel degrees, micro-batching,
//! ZeRO stage, sequence parallelism and recomputation for a model on a GPU cluster, and
//! predicts memory, step time and throughput with an analytical cost model (see
//! [`cost`]). Also advises which GPU pool to rent ([`advice()`]).
//!
//! Pure functions only: no I/O, no web or database types. Inputs arrive as serde types
//! ([`PlanRequest`], [`AdviceRequest`]) validated at the edge by [`PlanRequest::resolve`].
//!
//! ```text
//! let input = request.resolve()?;          // PlanError::Invalid { field, message }
//! let result = planner::plan(&input)?;     // PlanError::Infeasible { reason, .. }
//! println!("{}", planner::render_table(&result));
//! ```
//!
//! Over unlike GPUs (parts of different models): [`plan_mixed`] (see [`mixed`]).

pub mod advice;
pub mod arch;
pub mod catalog;
pub mod cost;
pub mod inference;
pub mod mixed;
pub mod render;
pub mod search;
pub mod train;
pub mod types;
pub mod validate;

#[cfg(test)]
mod calibration;
#[cfg(test)]
mod inference_tests;
#[cfg(test)]
mod mixed_tests;
#[cfg(test)]
mod serving_calibration;
#[cfg(test)]
mod tests;

pub use advice::advice;
pub use arch::LORA_TARGET_MODULES;
pub use catalog::{builtin_gpus, gpu_by_key, gpu_keys, preset, preset_names, suggestions, unknown_name_message};
pub use mixed::{MixedPlanRequest, plan_mixed, plan_mixed_request};
pub use render::{render_advice, render_table};
pub use search::{plan, plan_request};
pub use types::*;
