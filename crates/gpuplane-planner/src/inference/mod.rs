//! Inference (serving) planning: how to split a model over tensor- and pipeline-parallel GPUs,
//! how many replicas to run side by side, and at what concurrency, for the most generated
//! tokens/s (or images/s) within the request's latency bounds.
//!
//! - [`llm`]: language models. Prefill and decode are both charged at the workload's prompt and
//!   output lengths; the KV cache is counted at its own precision and read at the sequences'
//!   average context; each decode step pays a fixed overhead (launches, scheduling, one
//!   all-reduce latency per tensor-parallel collective); the concurrency is searched. See the
//!   module's documentation for the formulas.
//! - [`diffusion`]: diffusion models, data-parallel replicas making batches of images at a
//!   given number of steps and resolution.
//!
//! GPU memory is taken in the units cards have: a card sold as "80 GB" holds 80 GiB (nvidia-smi
//! shows 81,559 MiB on an H100, 81,920 MiB on an A100 80GB), so the catalog's decimal label is
//! read as GiB here ([`card_bytes`]). Calibrated against published engine throughput:
//! `docs/planner-serving-calibration.md`.

pub mod common;
pub mod diffusion;
pub mod llm;

use crate::types::{Cluster, InferenceSpec, ModelArch, Pins};
pub use common::{GIB_PER_GB, Outcome, card_bytes, usable_bytes};

/// Searches serving plans; ranked by tokens/s (images/s), then memory.
pub fn search(model: &ModelArch, cluster: &Cluster, spec: &InferenceSpec, pins: &Pins, top_n: usize) -> Outcome {
    if model.diffusion.is_some() {
        diffusion::search(model, cluster, spec, pins)
    } else {
        llm::search(model, cluster, spec, pins, top_n)
    }
}
