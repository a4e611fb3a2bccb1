//! What the gpuplane runtime applies, as the runtime itself states it (`runtime/src/gpuplane_runtime/models/
//! capabilities.json`, kept in step with its family code by the runtime's tests), so the service plans a
//! `gpuplane-runtime` job only for what the runtime will run: the families it splits, LoRA's exceptions, no
//! mixture of experts, no context parallelism.

use std::sync::OnceLock;

use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct RuntimeCapabilities {
    /// Hugging Face `model_type`s the runtime splits with tensor and pipeline parallelism; any other family
    /// runs with data parallelism alone.
    pub split_families: Vec<String>,
    /// Families the runtime puts no LoRA adapters on (fused projections).
    pub lora_refused_families: Vec<String>,
    pub mixture_of_experts: bool,
    pub context_parallel: bool,
    pub interleaved_pipeline: bool,
}

/// The runtime's statement, read once (it is compiled in: the service and the runtime ship from one tree).
pub fn capabilities() -> &'static RuntimeCapabilities {
    static CAPABILITIES: OnceLock<RuntimeCapabilities> = OnceLock::new();
    CAPABILITIES.get_or_init(|| {
        serde_json::from_str(include_str!("../../runtime/src/gpuplane_runtime/models/capabilities.json"))
            .expect("the runtime's capabilities.json is valid (checked by its tests)")
    })
}
