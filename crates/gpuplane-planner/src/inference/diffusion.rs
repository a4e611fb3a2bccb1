//! Diffusion serving: every GPU holds the whole model and makes batches of images on its own.
//!
//! - Work per image: `steps * 2` denoiser evaluations (classifier-free guidance doubles them), each
//!   `tflops_per_step` at the model's native resolution, scaled by the pixel ratio `r = (res /
//!   native)^2` as `r * (0.8 + 0.2 r)`: the convolutions and projections grow with the pixels, the
//!   self-attention (a fifth of the work at the native size) with their square.
//! - A batch of `b` images runs at `50% * b / (b + 0.25)` of the peak: 40% for one image, more as
//!   the batch fills the GPU. Time per batch is the latency a user waits; images/s = GPUs * b /
//!   time per batch.
//! - Memory: 16-bit weights, 2 GB of workspace and 2 GB of activations per megapixel of the batch.
//!
//! Uncalibrated: no published diffusion serving figures were compared (the VAE decode is not
//! counted).

use super::common::{Base, Outcome, base_plan, breakdown, usable_bytes};
use crate::types::{Cluster, InferenceSpec, ModelArch, Pins, Precision, count, duration};

const EFF_MAX: f64 = 0.5;
const HALF_BATCH: f64 = 0.25;
const ATTENTION_SHARE: f64 = 0.2;
const BASE_WORKSPACE_BYTES: f64 = 2.0e9;
const ACT_BYTES_PER_MEGAPIXEL: f64 = 2.0e9;
const DEFAULT_RESOLUTION: u32 = 1024;

/// What one batch costs on one GPU.
#[derive(Debug, Clone, Copy)]
pub struct BatchCost {
    pub steps: u32,
    pub resolution: u32,
    pub batch: u32,
    /// FLOPs of one image (all steps, guidance included).
    pub flops_per_image: f64,
    pub efficiency: f64,
    /// Seconds per batch on one GPU.
    pub seconds: f64,
    /// Workspace and activations of the batch, bytes.
    pub activation_bytes: f64,
}

fn peak(cluster: &Cluster, precision: Precision) -> f64 {
    match precision {
        Precision::Fp8 => cluster.gpu.fp8_tflops.unwrap_or(cluster.gpu.bf16_tflops) * 1e12,
        _ => cluster.gpu.bf16_tflops * 1e12,
    }
}

/// The cost of one batch of `spec` (steps, resolution, batch) on one GPU of `cluster`.
pub fn batch_cost(model: &ModelArch, cluster: &Cluster, spec: &InferenceSpec) -> Option<BatchCost> {
    let d = model.diffusion?;
    let steps = spec.steps.unwrap_or(d.steps);
    let native = d.resolution.unwrap_or(DEFAULT_RESOLUTION);
    let resolution = spec.resolution.unwrap_or(native);
    let r = (f64::from(resolution) / f64::from(native)).powi(2);
    let per_step = d.tflops_per_step * 1e12 * r * ((1.0 - ATTENTION_SHARE) + ATTENTION_SHARE * r);
    let flops_per_image = f64::from(steps) * 2.0 * per_step;
    let b = f64::from(spec.image_batch);
    let efficiency = EFF_MAX * b / (b + HALF_BATCH);
    let seconds = b * flops_per_image / (peak(cluster, spec.precision) * efficiency);
    let megapixels = f64::from(resolution).powi(2) / 1e6;
    let activation_bytes = BASE_WORKSPACE_BYTES + ACT_BYTES_PER_MEGAPIXEL * megapixels * b;
    Some(BatchCost {
        steps,
        resolution,
        batch: spec.image_batch,
        flops_per_image,
        efficiency,
        seconds,
        activation_bytes,
    })
}

/// One plan: every GPU a replica.
pub fn search(model: &ModelArch, cluster: &Cluster, spec: &InferenceSpec, pins: &Pins) -> Outcome {
    let n = cluster.total_gpus();
    let usable = usable_bytes(&cluster.gpu);
    let mut out = Outcome::empty();
    let Some(c) = batch_cost(model, cluster, spec) else {
        return out;
    };
    out.evaluated = 1;
    if pins.tp.is_some_and(|x| x != 1) || pins.pp.is_some_and(|x| x != 1) || pins.dp.is_some_and(|x| x != n) {
        return out;
    }
    out.any_divisible = true;
    let mem = breakdown(model.param_count() as f64 * 2.0, 0.0, c.activation_bytes, 0.0, usable);
    out.min_needed = mem.total as f64;
    if mem.total as f64 > usable {
        return out;
    }
    out.feasible = 1;
    let per_gpu = f64::from(c.batch) / c.seconds;
    let images = per_gpu * f64::from(n);
    let tflops = per_gpu * c.flops_per_image / 1e12;
    let mut plan = base_plan(Base {
        tp: 1,
        pp: 1,
        replicas: n,
        concurrent: c.batch,
        mem,
        step: c.seconds,
        tokens_per_s: 0.0,
        tflops,
        mfu: c.efficiency,
        comm_fraction: 0.0,
        calibrated: false,
    });
    plan.images_per_s = Some(images);
    let batch = if c.batch == 1 { "one image".to_string() } else { format!("batches of {} images", c.batch) };
    plan.summary = format!(
        "Each of the {n} GPUs makes {batch} on its own at {} x {} pixels, one batch every {}: {images:.2} images/s in total.",
        c.resolution,
        c.resolution,
        duration(c.seconds),
    );
    plan.explanation = format!(
        "{}, one per GPU; {batch} of {} x {} pixels take about {:.1} s ({} steps with classifier-free guidance, {:.0}% of the peak), {images:.2} images/s in total; {:.1} of {:.1} GB used. Images/s estimate, uncalibrated.",
        count(n, "data-parallel replica", "data-parallel replicas"),
        c.resolution,
        c.resolution,
        c.seconds,
        c.steps,
        c.efficiency * 100.0,
        mem.total as f64 / 1e9,
        usable / 1e9
    );
    out.plans.push(plan);
    out
}
