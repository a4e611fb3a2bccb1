//! What the language-model and the diffusion searches share: the memory a card has, the outcome of a search,
//! a plan's common figures.

use crate::cost::{self, FRAGMENTATION};
use crate::types::{GpuSpec, MemoryBreakdown, Offload, Plan, Recompute, StageSplit, WorkloadKind};

/// Bytes in a GiB over bytes in a GB: how much more a card holds than its decimal label says.
pub const GIB_PER_GB: f64 = 1.073_741_824;

/// Outcome of an inference search.
pub struct Outcome {
    pub plans: Vec<Plan>,
    pub evaluated: u64,
    pub feasible: u64,
    pub min_needed: f64,
    pub any_divisible: bool,
    /// Why nothing was planned when plans fit in memory but none met the latency bounds.
    pub unmet_bounds: Option<String>,
}

impl Outcome {
    pub(crate) fn empty() -> Self {
        Outcome {
            plans: Vec::new(),
            evaluated: 0,
            feasible: 0,
            min_needed: f64::INFINITY,
            any_divisible: false,
            unmet_bounds: None,
        }
    }
}

/// The memory a card really has: its label read as GiB (see the module documentation).
pub fn card_bytes(gpu: &GpuSpec) -> f64 {
    gpu.memory_bytes as f64 * GIB_PER_GB
}

/// Usable bytes per GPU for serving: the card's memory less the CUDA context.
pub fn usable_bytes(gpu: &GpuSpec) -> f64 {
    cost::usable_bytes(card_bytes(gpu) as u64)
}

pub(crate) fn breakdown(weights: f64, kv: f64, act: f64, buffers: f64, usable: f64) -> MemoryBreakdown {
    let allocated = weights + kv + act + buffers;
    let frag = allocated * FRAGMENTATION;
    MemoryBreakdown {
        weights: weights as u64,
        gradients: 0,
        optimizer: 0,
        activations: act as u64,
        kv_cache: kv as u64,
        comm_buffers: buffers as u64,
        fragmentation: frag as u64,
        total: (allocated + frag) as u64,
        usable: usable as u64,
    }
}

/// The figures every serving plan has; the caller fills in the rest.
pub(crate) struct Base {
    pub(crate) tp: u32,
    pub(crate) pp: u32,
    pub(crate) replicas: u32,
    pub(crate) concurrent: u32,
    pub(crate) mem: MemoryBreakdown,
    pub(crate) step: f64,
    pub(crate) tokens_per_s: f64,
    pub(crate) tflops: f64,
    pub(crate) mfu: f64,
    pub(crate) comm_fraction: f64,
    pub(crate) calibrated: bool,
}

pub(crate) fn base_plan(b: Base) -> Plan {
    Plan {
        workload: WorkloadKind::Inference,
        tp: b.tp,
        pp: b.pp,
        dp: b.replicas,
        cp: 1,
        ep: 1,
        etp: None,
        layers_per_stage: Vec::new(),
        stage_split: StageSplit::Even,
        offload: Offload::None,
        host_memory_per_node_bytes: 0,
        global_batch: 0,
        idle_gpus: 0,
        notes: Vec::new(),
        vp: 1,
        micro_batch: b.concurrent,
        grad_accum: 1,
        zero_stage: 0,
        sequence_parallel: false,
        recompute: Recompute::None,
        replicas: b.replicas,
        memory_per_gpu_bytes: b.mem.total,
        memory: b.mem,
        step_time_s: b.step,
        tokens_per_s: b.tokens_per_s,
        prefill_tokens_per_s: None,
        images_per_s: None,
        serving: None,
        tflops_per_gpu: b.tflops,
        hardware_tflops_per_gpu: b.tflops,
        mfu: b.mfu,
        bubble_fraction: 0.0,
        comm_fraction: b.comm_fraction,
        calibrated: b.calibrated,
        summary: String::new(),
        explanation: String::new(),
    }
}
