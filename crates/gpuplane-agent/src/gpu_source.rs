//! Where the agent's GPU facts and telemetry come from: real GPUs through NVML, or simulated ones.
//!
//! NVML (`libnvidia-ml.so`) is loaded at run time, so the binary builds and starts on machines without a driver;
//! only `gpuplane agent` without `--simulate` needs one.

use std::collections::HashMap;

use anyhow::Context;
use chrono::{DateTime, Utc};
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor, TopologyLevel};
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, EventSet, Nvml, bitmasks::event::EventTypes};

use gpuplane_protocol::agent::IntraLink;
use gpuplane_protocol::agent::{GpuFacts, GpuSample};

use super::sandbox::{DeviceFile, DeviceFiles};

/// The GPU half of [`gpuplane_protocol::agent::NodeFacts`]; the agent adds the host name and network.
#[derive(Debug, Clone, PartialEq)]
pub struct HostGpus {
    pub gpus: Vec<GpuFacts>,
    pub intra_link: IntraLink,
    pub topology: Option<Vec<Vec<String>>>,
    pub driver_version: Option<String>,
    pub cuda_version: Option<String>,
}

/// A host's GPUs, real or simulated.
pub trait GpuSource: Send {
    /// What the host has, reported at registration.
    fn host_gpus(&mut self) -> anyhow::Result<HostGpus>;
    /// The device files of each GPU and the control devices, for the job sandbox.
    fn device_files(&mut self) -> anyhow::Result<DeviceFiles>;
    /// One sample per GPU, all stamped `at`. Metrics a GPU cannot report read as 0 (or `None`); sampling itself
    /// never fails, so one broken sensor does not stop a node's heartbeats.
    fn sample(&mut self, at: DateTime<Utc>) -> Vec<GpuSample>;

    /// The GPUs a job of this agent runs on now. Real GPUs measure their load; simulated ones follow this.
    fn set_busy(&mut self, _gpu_indices: &[i32]) {}
}

const MIB: u64 = 1024 * 1024;
/// NVML_NVLINK_MAX_LINKS of the NVML headers nvml-wrapper 0.13 binds.
const NVLINK_MAX_LINKS: u32 = 18;

/// Real GPUs through NVML.
pub struct NvmlGpus {
    nvml: &'static Nvml,
    devices: Vec<Device<'static>>,
    /// Critical XID events, when the driver lets us watch them.
    xid_events: Option<EventSet<'static>>,
}

impl NvmlGpus {
    pub fn open() -> anyhow::Result<Self> {
        let nvml = Nvml::init().map_err(|err| {
            anyhow::anyhow!(
                "NVML is not available (no NVIDIA driver?): {err}; use --simulate MODEL:COUNT to run without GPUs"
            )
        })?;
        // NVML stays loaded for the life of the process. Leaking it gives the devices and the event set a
        // 'static borrow instead of a self-referential struct.
        let nvml: &'static Nvml = Box::leak(Box::new(nvml));
        let count = nvml.device_count().context("NVML: counting GPUs")?;
        let devices = (0..count)
            .map(|index| nvml.device_by_index(index).with_context(|| format!("NVML: opening GPU {index}")))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let xid_events = watch_xid_events(nvml, &devices);
        Ok(Self { nvml, devices, xid_events })
    }

    /// XID codes per GPU index seen since the previous call.
    fn drain_xid_events(&mut self) -> HashMap<u32, Vec<i32>> {
        let mut seen: HashMap<u32, Vec<i32>> = HashMap::new();
        let Some(events) = &self.xid_events else { return seen };
        loop {
            match events.wait(0) {
                Ok(event) => {
                    let code = match event.event_data {
                        Some(XidError::Value(code)) => i32::try_from(code).unwrap_or(i32::MAX),
                        // The driver saw an XID but could not say which: count it with code 0.
                        Some(XidError::Unknown) | None => 0,
                    };
                    match event.device.index() {
                        Ok(index) => seen.entry(index).or_default().push(code),
                        Err(err) => tracing::warn!(%err, code, "XID event for a GPU NVML cannot index"),
                    }
                }
                Err(NvmlError::Timeout) => break,
                Err(err) => {
                    tracing::warn!(%err, "reading XID events failed");
                    break;
                }
            }
        }
        seen
    }

    fn sample_device(device: &Device<'static>, gpu_index: i32, at: DateTime<Utc>, xids: Vec<i32>) -> GpuSample {
        let utilization = device.utilization_rates().ok();
        let memory = device.memory_info().ok();
        GpuSample {
            gpu_index,
            at,
            gpu_util: utilization.as_ref().map_or(0.0, |u| u.gpu as f32),
            mem_copy_util: utilization.as_ref().map_or(0.0, |u| u.memory as f32),
            fb_used_mib: memory.as_ref().map_or(0, |m| (m.used / MIB) as i64),
            fb_free_mib: memory.as_ref().map_or(0, |m| (m.free / MIB) as i64),
            power_w: device.power_usage().map_or(0.0, |milliwatts| milliwatts as f32 / 1000.0),
            energy_mj: device.total_energy_consumption().map_or(0, |mj| i64::try_from(mj).unwrap_or(i64::MAX)),
            gpu_temp_c: device.temperature(TemperatureSensor::Gpu).map_or(0.0, |c| c as f32),
            // HBM temperature and NVLink throughput need NVML field values; left for a DCGM-based source.
            mem_temp_c: None,
            sm_clock_mhz: device.clock_info(Clock::SM).map_or(0, |mhz| i32::try_from(mhz).unwrap_or(i32::MAX)),
            nvlink_bandwidth_gbps: None,
            xid_count: i32::try_from(xids.len()).unwrap_or(i32::MAX),
            xid_codes: xids,
        }
    }

    /// `nvidia-smi topo -m` style matrix; `None` if NVML cannot tell for some pair.
    fn topology(&self) -> Option<Vec<Vec<String>>> {
        let links: Vec<NvlinkPeers> = self.devices.iter().map(|d| self.nvlink_peers(d)).collect();
        let count = self.devices.len();
        let mut matrix = vec![vec![String::new(); count]; count];
        for i in 0..count {
            for j in 0..count {
                matrix[i][j] = if i == j {
                    "X".to_owned()
                } else {
                    let nvlinks =
                        links[i].to_gpu.get(&j).copied().unwrap_or(0) + links[i].to_switch.min(links[j].to_switch);
                    if nvlinks > 0 {
                        format!("NV{nvlinks}")
                    } else {
                        let other = self.nvml.device_by_index(j as u32).ok()?;
                        pcie_path(self.devices[i].topology_common_ancestor(other).ok()?).to_owned()
                    }
                };
            }
        }
        Some(matrix)
    }

    /// Active NVLinks of `device`, by the GPU index at their far end; links to anything else (an NVSwitch)
    /// reach every GPU on the switch fabric.
    fn nvlink_peers(&self, device: &Device<'static>) -> NvlinkPeers {
        let bus_ids: Vec<Option<String>> =
            self.devices.iter().map(|d| d.pci_info().ok().map(|p| p.bus_id.to_lowercase())).collect();
        let mut peers = NvlinkPeers::default();
        for link in (0..NVLINK_MAX_LINKS).map(|l| device.link_wrapper_for(l)) {
            if !link.is_active().unwrap_or(false) {
                continue;
            }
            let remote = link.remote_pci_info().ok().map(|p| p.bus_id.to_lowercase());
            match bus_ids.iter().position(|id| id.is_some() && *id == remote) {
                Some(gpu) => *peers.to_gpu.entry(gpu).or_default() += 1,
                None => peers.to_switch += 1,
            }
        }
        peers
    }
}

#[derive(Default)]
struct NvlinkPeers {
    to_gpu: HashMap<usize, u32>,
    to_switch: u32,
}

fn pcie_path(level: TopologyLevel) -> &'static str {
    match level {
        TopologyLevel::Internal | TopologyLevel::Single => "PIX",
        TopologyLevel::Multiple => "PXB",
        TopologyLevel::HostBridge => "PHB",
        TopologyLevel::Node => "NODE",
        TopologyLevel::System => "SYS",
    }
}

/// Register every GPU for critical XID events. Without them (old driver, no permission), XIDs read as 0.
fn watch_xid_events(nvml: &'static Nvml, devices: &[Device<'static>]) -> Option<EventSet<'static>> {
    let mut set = nvml.create_event_set().map_err(|err| tracing::warn!(%err, "NVML: no XID events")).ok()?;
    for (index, device) in devices.iter().enumerate() {
        set = device
            .register_events(EventTypes::CRITICAL_XID_ERROR, set)
            .map_err(|err| tracing::warn!(error = %err.error, index, "NVML: no XID events"))
            .ok()?;
    }
    Some(set)
}

impl GpuSource for NvmlGpus {
    fn host_gpus(&mut self) -> anyhow::Result<HostGpus> {
        let gpus = self
            .devices
            .iter()
            .enumerate()
            .map(|(index, device)| {
                let context = || format!("NVML: reading GPU {index}");
                Ok(GpuFacts {
                    index: index as i32,
                    uuid: device.uuid().with_context(context)?,
                    name: device.name().with_context(context)?,
                    memory_bytes: i64::try_from(device.memory_info().with_context(context)?.total)?,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let nvlink = self.devices.first().is_some_and(|device| {
            (0..NVLINK_MAX_LINKS).any(|link| device.link_wrapper_for(link).is_active().unwrap_or(false))
        });
        Ok(HostGpus {
            gpus,
            intra_link: if nvlink { IntraLink::Nvlink } else { IntraLink::Pcie },
            topology: if self.devices.len() > 1 { self.topology() } else { None },
            driver_version: self.nvml.sys_driver_version().ok(),
            cuda_version: self.nvml.sys_cuda_driver_version().ok().map(|version| {
                format!(
                    "{}.{}",
                    nvml_wrapper::cuda_driver_version_major(version),
                    nvml_wrapper::cuda_driver_version_minor(version)
                )
            }),
        })
    }

    /// `/dev/nvidiaN` by the GPU's minor number (NVML's index order need not be the minor numbers' order), and
    /// the control devices that exist on this host.
    fn device_files(&mut self) -> anyhow::Result<DeviceFiles> {
        let mut files = DeviceFiles::default();
        for (index, device) in self.devices.iter().enumerate() {
            let minor = device.minor_number().with_context(|| format!("NVML: the minor number of GPU {index}"))?;
            let name = format!("nvidia{minor}");
            files.gpus.insert(index as i32, DeviceFile { host: format!("/dev/{name}").into(), name });
        }
        let mut control: Vec<String> = ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"]
            .iter()
            .map(|s| s.to_string())
            .filter(|name| std::path::Path::new("/dev").join(name).exists())
            .collect();
        if let Ok(caps) = std::fs::read_dir("/dev/nvidia-caps") {
            control.extend(
                caps.filter_map(Result::ok).map(|e| format!("nvidia-caps/{}", e.file_name().to_string_lossy())),
            );
        }
        files.control =
            control.into_iter().map(|name| DeviceFile { host: format!("/dev/{name}").into(), name }).collect();
        Ok(files)
    }

    fn sample(&mut self, at: DateTime<Utc>) -> Vec<GpuSample> {
        let mut xids = self.drain_xid_events();
        self.devices
            .iter()
            .enumerate()
            .map(|(index, device)| {
                Self::sample_device(device, index as i32, at, xids.remove(&(index as u32)).unwrap_or_default())
            })
            .collect()
    }
}
