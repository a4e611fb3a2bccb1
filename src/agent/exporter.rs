//! `gpuplane agent --metrics-listen ADDR`: the host's latest GPU sample for Prometheus, in dcgm-exporter's
//! naming (`DCGM_FI_DEV_*`, labels `gpu`, `UUID`, `device`, `modelName`, `Hostname`), so dashboards and alerts
//! written for dcgm-exporter work unchanged. It serves what the agent samples anyway (every heartbeat interval):
//! no second NVML reader, and nothing a tenant's job can reach (bind it to the host's management address).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use axum::Router;
use axum::http::header;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use crate::agents::protocol::{GpuFacts, GpuSample};

/// The latest sample of every GPU, shared between the sampler and the exporter.
#[derive(Clone, Default)]
pub struct LatestSamples(Arc<Mutex<Vec<GpuSample>>>);

impl LatestSamples {
    pub fn set(&self, samples: &[GpuSample]) {
        if let Ok(mut latest) = self.0.lock() {
            latest.clear();
            latest.extend_from_slice(samples);
        }
    }

    fn get(&self) -> Vec<GpuSample> {
        self.0.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

/// One DCGM field: name, help, and how to read it from a sample.
type Field = (&'static str, &'static str, fn(&GpuSample) -> Option<f64>);

const FIELDS: &[Field] = &[
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", |s| Some(s.gpu_util.into())),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", |s| Some(s.mem_copy_util.into())),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", |s| Some(s.fb_used_mib as f64)),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", |s| Some(s.fb_free_mib as f64)),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", |s| Some(s.power_w.into())),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).", |s| {
        Some(s.energy_mj as f64)
    }),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", |s| Some(s.gpu_temp_c.into())),
    ("DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C).", |s| s.mem_temp_c.map(f64::from)),
    ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", |s| Some(s.sm_clock_mhz.into())),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "Total NVLink bandwidth (in GB/s).", |s| {
        s.nvlink_bandwidth_gbps.map(f64::from)
    }),
    ("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", |s| {
        Some(s.xid_codes.last().copied().unwrap_or(0).into())
    }),
];

/// The exposition page for `samples` of the GPUs in `gpus` on `hostname`.
pub fn render(hostname: &str, gpus: &[GpuFacts], samples: &[GpuSample]) -> String {
    let mut out = String::new();
    for (name, help, read) in FIELDS {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for sample in samples {
            let Some(value) = read(sample) else { continue };
            let Some(gpu) = gpus.iter().find(|g| g.index == sample.gpu_index) else { continue };
            let _ = writeln!(
                out,
                "{name}{{gpu=\"{i}\",UUID=\"{uuid}\",device=\"nvidia{i}\",modelName=\"{model}\",Hostname=\"{host}\"}} {value}",
                i = gpu.index,
                uuid = escape(&gpu.uuid),
                model = escape(&gpu.name),
                host = escape(hostname),
            );
        }
    }
    out
}

fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Serve `/metrics` on `addr` until `shutdown`.
pub async fn serve(
    addr: SocketAddr,
    hostname: String,
    gpus: Vec<GpuFacts>,
    latest: LatestSamples,
    shutdown: CancellationToken,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let listener =
        tokio::net::TcpListener::bind(addr).await.with_context(|| format!("--metrics-listen {addr}: cannot bind"))?;
    tracing::info!(addr = %listener.local_addr()?, "serving GPU metrics");
    let router = Router::new().route(
        "/metrics",
        get(move || {
            let page = render(&hostname, &gpus, &latest.get());
            async move { ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], page) }
        }),
    );
    Ok(tokio::spawn(async move {
        if let Err(err) = axum::serve(listener, router).with_graceful_shutdown(shutdown.cancelled_owned()).await {
            tracing::warn!(error = %err, "the GPU metrics endpoint stopped");
        }
    }))
}
