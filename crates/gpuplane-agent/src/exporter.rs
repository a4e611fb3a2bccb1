//! `gpuplane agent --metrics-listen ADDR`: the host's latest GPU sample for Prometheus, in dcgm-exporter's
//! naming (`DCGM_FI_DEV_*`, labels `gpu`, `UUID`, `device`, `modelName`, `Hostname`), so dashboards and alerts
//! written for dcgm-exporter work unchanged. It serves what the agent samples anyway (every heartbeat interval):
//! no second NVML reader, and nothing a tenant's job can reach (bind it to the host's management address).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use gpuplane_protocol::agent::{GpuFacts, GpuSample};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// The most bytes of a request head the endpoint reads, and how long it waits for them.
const MAX_REQUEST_HEAD: usize = 8192;
const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

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

/// Serve `/metrics` on `addr` until `shutdown`. A scrape is one GET per connection (HTTP/1.1, `Connection: close`):
/// all Prometheus needs, without a web framework on every GPU host.
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
    let page = Arc::new(move || render(&hostname, &gpus, &latest.get()));
    Ok(tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = shutdown.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, _)) => {
                    let page = page.clone();
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(REQUEST_TIMEOUT, answer(stream, || page())).await;
                    });
                }
                Err(err) => tracing::warn!(error = %err, "the GPU metrics endpoint could not accept"),
            }
        }
    }))
}

/// Read one request head and answer it: the page for `GET /metrics`, 404 for any other path, 405 for any other
/// method, 400 for a head that is not HTTP or too large.
async fn answer(mut stream: TcpStream, page: impl FnOnce() -> String) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await?;
        if n == 0 || head.len() + n > MAX_REQUEST_HEAD {
            return respond(&mut stream, "400 Bad Request", "bad request\n").await;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|b| *b == b' ');
    let (method, target) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let path = target.split(|b| *b == b'?').next().unwrap_or_default();
    match (method, path) {
        (b"GET", b"/metrics") => respond(&mut stream, "200 OK", &page()).await,
        (b"GET", _) => respond(&mut stream, "404 Not Found", "not found\n").await,
        _ => respond(&mut stream, "405 Method Not Allowed", "method not allowed\n").await,
    }
}

async fn respond(stream: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}
