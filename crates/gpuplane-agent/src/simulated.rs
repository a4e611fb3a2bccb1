//! Simulated GPUs: the model catalog as NVML names them, and plausible DCGM-style telemetry (a bounded random
//! walk), so the agent and the service can be exercised end to end on machines without GPUs.

use std::path::PathBuf;

use anyhow::Context;
use chrono::{DateTime, TimeZone, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use gpuplane_protocol::agent::IntraLink;
use gpuplane_protocol::agent::{GpuFacts, GpuSample};

use super::gpu_source::{GpuSource, HostGpus};
use super::sandbox::{DeviceFile, DeviceFiles};

const MIB: i64 = 1024 * 1024;
/// Temperatures a healthy, cooled GPU stays within.
pub const MIN_TEMP_C: f32 = 25.0;
pub const MAX_TEMP_C: f32 = 95.0;
pub const MIN_SM_CLOCK_MHZ: i32 = 1400;
pub const MAX_SM_CLOCK_MHZ: i32 = 1980;
/// Memory the driver and a CUDA context hold even on an idle GPU.
const MIN_FB_USED_MIB: i64 = 300;

/// One GPU model as the simulator knows it.
#[derive(Debug, PartialEq)]
pub struct SimModel {
    /// Catalog key, as the service's GPU model catalog names it.
    pub key: &'static str,
    /// What NVML reports as the device name.
    pub nvml_name: &'static str,
    /// Total framebuffer as NVML reports it, MiB.
    pub memory_mib: i64,
    pub idle_w: f32,
    pub tdp_w: f32,
    pub nvlink: bool,
    /// HBM parts report a memory temperature; GDDR parts do not.
    pub hbm: bool,
    /// Peak NVLink bandwidth per GPU, GB/s (0 without NVLink).
    pub nvlink_gbps: f32,
}

pub static MODELS: [SimModel; 7] = [
    SimModel {
        key: "rtx4090",
        nvml_name: "NVIDIA GeForce RTX 4090",
        memory_mib: 24564,
        idle_w: 20.0,
        tdp_w: 450.0,
        nvlink: false,
        hbm: false,
        nvlink_gbps: 0.0,
    },
    SimModel {
        key: "a10",
        nvml_name: "NVIDIA A10",
        memory_mib: 23028,
        idle_w: 15.0,
        tdp_w: 150.0,
        nvlink: false,
        hbm: false,
        nvlink_gbps: 0.0,
    },
    SimModel {
        key: "a100-40g",
        nvml_name: "NVIDIA A100-SXM4-40GB",
        memory_mib: 40960,
        idle_w: 50.0,
        tdp_w: 400.0,
        nvlink: true,
        hbm: true,
        nvlink_gbps: 600.0,
    },
    SimModel {
        key: "a100-80g",
        nvml_name: "NVIDIA A100-SXM4-80GB",
        memory_mib: 81920,
        idle_w: 60.0,
        tdp_w: 400.0,
        nvlink: true,
        hbm: true,
        nvlink_gbps: 600.0,
    },
    SimModel {
        key: "h100",
        nvml_name: "NVIDIA H100 80GB HBM3",
        memory_mib: 81559,
        idle_w: 70.0,
        tdp_w: 700.0,
        nvlink: true,
        hbm: true,
        nvlink_gbps: 900.0,
    },
    SimModel {
        key: "h200",
        nvml_name: "NVIDIA H200",
        memory_mib: 143771,
        idle_w: 75.0,
        tdp_w: 700.0,
        nvlink: true,
        hbm: true,
        nvlink_gbps: 900.0,
    },
    SimModel {
        key: "b200",
        nvml_name: "NVIDIA B200",
        memory_mib: 183359,
        idle_w: 140.0,
        tdp_w: 1000.0,
        nvlink: true,
        hbm: true,
        nvlink_gbps: 1800.0,
    },
];

/// The evolving state of one simulated GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct SimGpuState {
    pub gpu_util: f32,
    pub mem_copy_util: f32,
    pub fb_used_mib: i64,
    pub power_w: f32,
    pub energy_mj: i64,
    pub gpu_temp_c: f32,
    pub sm_clock_mhz: i32,
}

impl SimGpuState {
    /// An idle GPU whose energy counter reads as if the driver had been loaded since 2024 at full power: a
    /// restarted agent then never reports a smaller counter than before.
    pub fn idle(model: &SimModel, now: DateTime<Utc>) -> Self {
        let since = Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).single().unwrap_or_default();
        let seconds = (now - since).num_seconds().max(0);
        Self {
            gpu_util: 0.0,
            mem_copy_util: 0.0,
            fb_used_mib: MIN_FB_USED_MIB,
            power_w: model.idle_w,
            energy_mj: seconds.saturating_mul(model.tdp_w as i64 * 1000),
            gpu_temp_c: 30.0,
            sm_clock_mhz: MIN_SM_CLOCK_MHZ,
        }
    }

    /// One step of the random walk, `elapsed_s` seconds after the previous one, for a GPU a job runs on (`busy`)
    /// or not: a busy GPU works at 70-100% with most of its memory held, an idle one draws idle power at 0% (a
    /// simulated lease without a job looks idle, as a real one does). Every value stays physical: utilizations
    /// 0-100, memory within the card, power between idle and TDP, temperature 25-95 C.
    pub fn step(&self, model: &SimModel, elapsed_s: f64, rng: &mut impl Rng, busy: bool) -> Self {
        let (gpu_util, fb_used_mib) = if busy {
            let util = (self.gpu_util.max(85.0) + rng.random_range(-12.0..=12.0f32)).clamp(70.0, 100.0);
            let floor = model.memory_mib * 3 / 10;
            let fb_step = (model.memory_mib as f64 * rng.random_range(-0.03..=0.03)) as i64;
            (util, (self.fb_used_mib.max(floor) + fb_step).clamp(floor, model.memory_mib))
        } else {
            (0.0, MIN_FB_USED_MIB)
        };
        let mem_copy_util =
            if busy { (gpu_util * 0.6 + rng.random_range(-5.0..=5.0f32)).clamp(0.0, 100.0) } else { 0.0 };
        let load = gpu_util / 100.0 * rng.random_range(0.85..=1.0f32);
        let power_w = (model.idle_w + (model.tdp_w - model.idle_w) * load).clamp(model.idle_w, model.tdp_w);
        // Energy integrates the average power over the interval.
        let joules = f64::from(self.power_w + power_w) / 2.0 * elapsed_s.max(0.0);
        let energy_mj = self.energy_mj.saturating_add((joules * 1000.0).round() as i64);
        // The die temperature approaches a power-dependent target with a time constant of about 30 s.
        let heat = (power_w - model.idle_w) / (model.tdp_w - model.idle_w);
        let target_c = 30.0 + 50.0 * heat;
        let approach = (elapsed_s / 30.0).min(1.0) as f32;
        let gpu_temp_c = (self.gpu_temp_c + (target_c - self.gpu_temp_c) * approach).clamp(MIN_TEMP_C, MAX_TEMP_C);
        let clock_span = (MAX_SM_CLOCK_MHZ - MIN_SM_CLOCK_MHZ) as f32;
        let sm_clock_mhz = (MIN_SM_CLOCK_MHZ as f32 + clock_span * gpu_util / 100.0 + rng.random_range(-15.0..=15.0))
            .round()
            .clamp(MIN_SM_CLOCK_MHZ as f32, MAX_SM_CLOCK_MHZ as f32) as i32;
        Self { gpu_util, mem_copy_util, fb_used_mib, power_w, energy_mj, gpu_temp_c, sm_clock_mhz }
    }

    pub fn to_sample(&self, model: &SimModel, gpu_index: i32, at: DateTime<Utc>) -> GpuSample {
        GpuSample {
            gpu_index,
            at,
            gpu_util: self.gpu_util.round(),
            mem_copy_util: self.mem_copy_util.round(),
            fb_used_mib: self.fb_used_mib,
            fb_free_mib: model.memory_mib - self.fb_used_mib,
            power_w: (self.power_w * 10.0).round() / 10.0,
            energy_mj: self.energy_mj,
            gpu_temp_c: self.gpu_temp_c.round(),
            mem_temp_c: model.hbm.then(|| (self.gpu_temp_c + 4.0).min(MAX_TEMP_C).round()),
            sm_clock_mhz: self.sm_clock_mhz,
            nvlink_bandwidth_gbps: model
                .nvlink
                .then(|| (model.nvlink_gbps * self.mem_copy_util / 100.0 * 0.5 * 10.0).round() / 10.0),
            xid_count: 0,
            xid_codes: Vec::new(),
        }
    }
}

/// `--simulate MODEL:COUNT`: GPUs whose UUIDs are stable per host, so a restarted agent reports the same GPUs.
pub struct SimulatedGpus {
    model: &'static SimModel,
    hostname: String,
    gpus: Vec<SimGpuState>,
    last_at: Option<DateTime<Utc>>,
    rounds: u64,
    inject_xid: Option<InjectXid>,
    rng: StdRng,
    /// Where the stand-in device files are made (the agent's state directory's `devices/`).
    device_dir: PathBuf,
    /// The NVIDIA driver and CUDA versions the simulated host reports.
    driver_version: String,
    cuda_version: String,
    /// The GPUs a job runs on now (the agent says so before each sample).
    busy: std::collections::BTreeSet<i32>,
}

/// What a simulated host reports unless `--driver-version` / `--cuda-version` say otherwise.
pub const DEFAULT_DRIVER_VERSION: &str = "550.54.15";
pub const DEFAULT_CUDA_VERSION: &str = "12.4";

impl SimulatedGpus {
    pub fn new(
        spec: SimulateSpec,
        hostname: &str,
        inject_xid: Option<InjectXid>,
        device_dir: PathBuf,
    ) -> anyhow::Result<Self> {
        if let Some(inject) = inject_xid
            && inject.gpu_index >= spec.count
        {
            anyhow::bail!("--inject-xid names GPU {} but --simulate has {} GPUs", inject.gpu_index, spec.count);
        }
        let now = Utc::now();
        Ok(Self {
            model: spec.model,
            hostname: hostname.to_owned(),
            gpus: (0..spec.count).map(|_| SimGpuState::idle(spec.model, now)).collect(),
            last_at: None,
            rounds: 0,
            inject_xid,
            rng: StdRng::from_os_rng(),
            device_dir,
            driver_version: DEFAULT_DRIVER_VERSION.to_owned(),
            cuda_version: DEFAULT_CUDA_VERSION.to_owned(),
            busy: Default::default(),
        })
    }

    /// Report these driver/CUDA versions (`None`: the defaults).
    pub fn with_versions(mut self, driver: Option<&str>, cuda: Option<&str>) -> Self {
        if let Some(driver) = driver {
            self.driver_version = driver.to_owned();
        }
        if let Some(cuda) = cuda {
            self.cuda_version = cuda.to_owned();
        }
        self
    }
}

fn sim_uuid(hostname: &str, index: i32) -> String {
    format!("GPU-sim-{hostname}-{index}")
}

/// Stand-ins for the control devices CUDA opens besides the GPUs'.
const SIMULATED_CONTROL_DEVICES: [&str; 2] = ["nvidiactl", "nvidia-uvm"];

impl GpuSource for SimulatedGpus {
    /// Simulated GPUs are simulated devices: a file per GPU (`nvidiaN`, readable by everyone like the real
    /// character devices) in the agent's state directory, which the sandbox maps into a job exactly as it maps
    /// `/dev/nvidiaN` on a real host.
    fn device_files(&mut self) -> anyhow::Result<DeviceFiles> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(&self.device_dir).with_context(|| format!("creating {}", self.device_dir.display()))?;
        let make = |name: &str, content: String| -> anyhow::Result<DeviceFile> {
            let host = self.device_dir.join(name);
            std::fs::write(&host, content).with_context(|| format!("writing {}", host.display()))?;
            std::fs::set_permissions(&host, std::fs::Permissions::from_mode(0o666))?;
            Ok(DeviceFile { host, name: name.to_owned() })
        };
        let mut files = DeviceFiles::default();
        for index in 0..self.gpus.len() as i32 {
            let content =
                format!("simulated {} GPU {index} ({})\n", self.model.nvml_name, sim_uuid(&self.hostname, index));
            files.gpus.insert(index, make(&format!("nvidia{index}"), content)?);
        }
        for name in SIMULATED_CONTROL_DEVICES {
            files.control.push(make(name, format!("simulated {name}\n"))?);
        }
        Ok(files)
    }

    fn host_gpus(&mut self) -> anyhow::Result<HostGpus> {
        let memory_bytes = self.model.memory_mib * MIB;
        Ok(HostGpus {
            gpus: (0..self.gpus.len() as i32)
                .map(|index| GpuFacts {
                    index,
                    uuid: sim_uuid(&self.hostname, index),
                    name: self.model.nvml_name.to_owned(),
                    memory_bytes,
                })
                .collect(),
            intra_link: if self.model.nvlink { IntraLink::Nvlink } else { IntraLink::Pcie },
            topology: None,
            driver_version: Some(self.driver_version.clone()),
            cuda_version: Some(self.cuda_version.clone()),
        })
    }

    fn set_busy(&mut self, gpu_indices: &[i32]) {
        self.busy = gpu_indices.iter().copied().collect();
    }

    fn sample(&mut self, at: DateTime<Utc>) -> Vec<GpuSample> {
        self.rounds += 1;
        let elapsed_s = self.last_at.map_or(0.0, |last| (at - last).as_seconds_f64());
        self.last_at = Some(at);
        let model = self.model;
        let rng = &mut self.rng;
        let mut samples: Vec<GpuSample> = self
            .gpus
            .iter_mut()
            .enumerate()
            .map(|(index, gpu)| {
                *gpu = gpu.step(model, elapsed_s, rng, self.busy.contains(&(index as i32)));
                gpu.to_sample(model, index as i32, at)
            })
            .collect();
        if self.rounds == 2
            && let Some(inject) = self.inject_xid
            && let Some(sample) = samples.get_mut(inject.gpu_index as usize)
        {
            sample.xid_count = 1;
            sample.xid_codes = vec![inject.code];
        }
        samples
    }
}

/// `--simulate MODEL:COUNT`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimulateSpec {
    pub model: &'static SimModel,
    pub count: u32,
}

impl SimulateSpec {
    pub const MAX_GPUS: u32 = 64;

    pub fn parse(text: &str) -> Result<Self, String> {
        let (model, count) =
            text.split_once(':').ok_or_else(|| format!("expected MODEL:COUNT, e.g. h100:8, got `{text}`"))?;
        let model = MODELS.iter().find(|m| m.key.eq_ignore_ascii_case(model.trim())).ok_or_else(|| {
            let keys: Vec<&str> = MODELS.iter().map(|m| m.key).collect();
            format!("unknown GPU model `{model}`; expected one of {}", keys.join(", "))
        })?;
        let count: u32 = count
            .trim()
            .parse()
            .map_err(|_| format!("COUNT must be a whole number from 1 to {}, got `{count}`", Self::MAX_GPUS))?;
        if !(1..=Self::MAX_GPUS).contains(&count) {
            return Err(format!("COUNT must be from 1 to {}, got {count}", Self::MAX_GPUS));
        }
        Ok(Self { model, count })
    }
}

impl std::fmt::Display for SimulateSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.model.key, self.count)
    }
}

/// `--inject-xid GPU_INDEX:CODE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InjectXid {
    pub gpu_index: u32,
    pub code: i32,
}

impl InjectXid {
    pub fn parse(text: &str) -> Result<Self, String> {
        let (index, code) =
            text.split_once(':').ok_or_else(|| format!("expected GPU_INDEX:CODE, e.g. 0:79, got `{text}`"))?;
        let gpu_index: u32 =
            index.trim().parse().map_err(|_| format!("GPU_INDEX must be a whole number from 0, got `{index}`"))?;
        let code: i32 = code.trim().parse().map_err(|_| format!("CODE must be a positive XID number, got `{code}`"))?;
        if code <= 0 {
            return Err(format!("CODE must be a positive XID number, got {code}"));
        }
        Ok(Self { gpu_index, code })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulate_spec_parses_model_and_count() {
        let spec = SimulateSpec::parse("h100:2").unwrap();
        assert_eq!(spec.model.key, "h100");
        assert_eq!(spec.count, 2);
        assert_eq!(SimulateSpec::parse("A100-80G:64").unwrap().model.key, "a100-80g");
        assert_eq!(spec.to_string(), "h100:2");
    }

    #[test]
    fn simulate_spec_errors_are_clear() {
        assert!(SimulateSpec::parse("h100").unwrap_err().contains("expected MODEL:COUNT"));
        let unknown = SimulateSpec::parse("v100:8").unwrap_err();
        assert!(unknown.contains("unknown GPU model `v100`") && unknown.contains("rtx4090"), "{unknown}");
        assert!(SimulateSpec::parse("h100:0").unwrap_err().contains("from 1 to 64"));
        assert!(SimulateSpec::parse("h100:65").unwrap_err().contains("from 1 to 64"));
        assert!(SimulateSpec::parse("h100:eight").unwrap_err().contains("whole number"));
    }

    fn spec(text: &str) -> SimulateSpec {
        SimulateSpec::parse(text).unwrap()
    }

    #[test]
    fn every_model_stays_physical_over_10000_steps() {
        let mut rng = StdRng::seed_from_u64(7);
        let now = Utc::now();
        for model in &MODELS {
            let mut gpu = SimGpuState::idle(model, now);
            let mut energy = gpu.energy_mj;
            for step in 0..10_000 {
                let elapsed = if step % 100 == 0 { 0.0 } else { rng.random_range(0.5..=60.0) };
                // Jobs come and go: busy for a stretch, then idle.
                gpu = gpu.step(model, elapsed, &mut rng, (step / 500) % 2 == 1);
                let s = gpu.to_sample(model, 0, now);
                assert!((0.0..=100.0).contains(&s.gpu_util), "{} util {}", model.key, s.gpu_util);
                assert!((0.0..=100.0).contains(&s.mem_copy_util), "{} mem util {}", model.key, s.mem_copy_util);
                assert!(s.fb_used_mib >= 0 && s.fb_free_mib >= 0, "{} fb {s:?}", model.key);
                assert_eq!(s.fb_used_mib + s.fb_free_mib, model.memory_mib);
                assert!(s.power_w >= model.idle_w - 0.1 && s.power_w <= model.tdp_w + 0.1, "{} {s:?}", model.key);
                assert!((MIN_TEMP_C..=MAX_TEMP_C).contains(&s.gpu_temp_c), "{} temp {}", model.key, s.gpu_temp_c);
                if let Some(mem_temp) = s.mem_temp_c {
                    assert!((MIN_TEMP_C..=MAX_TEMP_C).contains(&mem_temp));
                }
                assert!((MIN_SM_CLOCK_MHZ..=MAX_SM_CLOCK_MHZ).contains(&s.sm_clock_mhz));
                assert!(s.energy_mj >= energy, "the energy counter never goes back");
                energy = s.energy_mj;
            }
        }
    }

    #[test]
    fn a_gpu_without_a_job_is_idle_and_one_with_a_job_works() {
        let model = &MODELS[4];
        let mut rng = StdRng::seed_from_u64(3);
        let mut gpu = SimGpuState::idle(model, Utc::now());
        for _ in 0..100 {
            gpu = gpu.step(model, 5.0, &mut rng, false);
            let s = gpu.to_sample(model, 0, Utc::now());
            assert_eq!((s.gpu_util, s.mem_copy_util, s.fb_used_mib), (0.0, 0.0, MIN_FB_USED_MIB), "{s:?}");
            assert!((s.power_w - model.idle_w).abs() < 0.5, "{s:?}");
        }
        for _ in 0..100 {
            gpu = gpu.step(model, 5.0, &mut rng, true);
            let s = gpu.to_sample(model, 0, Utc::now());
            assert!(s.gpu_util >= 70.0 && s.fb_used_mib >= model.memory_mib * 3 / 10, "{s:?}");
        }
    }

    #[test]
    fn energy_grows_by_power_times_time() {
        let model = &MODELS[4];
        let mut rng = StdRng::seed_from_u64(1);
        let gpu = SimGpuState::idle(model, Utc::now());
        let next = gpu.step(model, 10.0, &mut rng, true);
        let expected = f64::from(gpu.power_w + next.power_w) / 2.0 * 10.0 * 1000.0;
        assert!(((next.energy_mj - gpu.energy_mj) as f64 - expected).abs() <= 1.0);
    }

    fn scratch() -> PathBuf {
        std::env::temp_dir().join(format!("gpuplane-simdev-{}", uuid::Uuid::new_v4()))
    }

    #[test]
    fn each_simulated_gpu_is_a_device_file() {
        let dir = scratch();
        let mut gpus = SimulatedGpus::new(spec("h100:3"), "node-a", None, dir.clone()).unwrap();
        let files = gpus.device_files().unwrap();
        assert_eq!(files.gpus.keys().copied().collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(files.gpus[&2].name, "nvidia2");
        assert_eq!(files.gpus[&2].host, dir.join("nvidia2"));
        let text = std::fs::read_to_string(&files.gpus[&2].host).unwrap();
        assert!(text.contains("GPU 2 (GPU-sim-node-a-2)"), "{text}");
        let control: Vec<&str> = files.control.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(control, ["nvidiactl", "nvidia-uvm"]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn uuids_are_per_host_and_stable() {
        let mut first = SimulatedGpus::new(spec("a10:3"), "node-a", None, scratch()).unwrap();
        let mut again = SimulatedGpus::new(spec("a10:3"), "node-a", None, scratch()).unwrap();
        let mut other = SimulatedGpus::new(spec("a10:3"), "node-b", None, scratch()).unwrap();
        let uuids = |s: &mut SimulatedGpus| s.host_gpus().unwrap().gpus.into_iter().map(|g| g.uuid).collect::<Vec<_>>();
        let a = uuids(&mut first);
        assert_eq!(a, vec!["GPU-sim-node-a-0", "GPU-sim-node-a-1", "GPU-sim-node-a-2"]);
        assert_eq!(a, uuids(&mut again));
        assert!(uuids(&mut other).iter().all(|u| !a.contains(u)));
    }

    #[test]
    fn facts_follow_the_catalog() {
        let facts = SimulatedGpus::new(spec("rtx4090:1"), "h", None, scratch()).unwrap().host_gpus().unwrap();
        assert_eq!(facts.intra_link, IntraLink::Pcie);
        assert_eq!(facts.gpus[0].name, "NVIDIA GeForce RTX 4090");
        assert_eq!(facts.gpus[0].memory_bytes, 24564 * MIB);
        let facts = SimulatedGpus::new(spec("b200:8"), "h", None, scratch()).unwrap().host_gpus().unwrap();
        assert_eq!(facts.intra_link, IntraLink::Nvlink);
        assert_eq!(facts.gpus.len(), 8);
    }

    #[test]
    fn injected_xid_is_reported_once_in_the_second_round() {
        let inject = InjectXid { gpu_index: 1, code: 79 };
        let mut gpus = SimulatedGpus::new(spec("h100:2"), "h", Some(inject), scratch()).unwrap();
        let start = Utc::now();
        let rounds: Vec<Vec<GpuSample>> =
            (0..4).map(|i| gpus.sample(start + chrono::Duration::seconds(10 * i))).collect();
        for (round, samples) in rounds.iter().enumerate() {
            for sample in samples {
                let expect_xid = round == 1 && sample.gpu_index == 1;
                assert_eq!(sample.xid_count, i32::from(expect_xid), "round {round} gpu {}", sample.gpu_index);
                assert_eq!(sample.xid_codes, if expect_xid { vec![79] } else { vec![] });
            }
        }
    }

    #[test]
    fn injecting_into_a_missing_gpu_is_refused() {
        let err = SimulatedGpus::new(spec("h100:2"), "h", Some(InjectXid { gpu_index: 2, code: 79 }), scratch())
            .err()
            .unwrap();
        assert!(err.to_string().contains("GPU 2"), "{err}");
    }
}
