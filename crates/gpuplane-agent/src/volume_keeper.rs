//! Keeps this host's volumes as the service orders: with every heartbeat's answer the agent gets every volume of
//! its node's to hold or destroy, and carries them out here off the async workers (making an image runs
//! `mkfs.ext4`, growing one `resize2fs`: seconds). What came of each is reported with the following heartbeats,
//! as long as the service still lists the volume, so a lost answer or report only delays a change.
//!
//! The stores are given at start (`--volume-store host=DIR`, `--volume-store pool=DIR`): images in `DIR/images`,
//! mounted under the state directory (host-local even for a pool store). At start each store restores the mounts
//! it held ([`VolumeStore::restore`]), so a restarted agent keeps serving its volumes and loses no data.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use gpuplane_protocol::volumes::{
    VolumeAction, VolumeKind, VolumeOrder, VolumeOutcome, VolumeReport, VolumeStore as StoreReport,
};
use uuid::Uuid;

use crate::volumes::{StoreKind, VolumeStore};

/// A `--volume-store KIND=DIR` flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSpec {
    pub kind: VolumeKind,
    pub dir: PathBuf,
}

impl StoreSpec {
    pub fn parse(s: &str) -> Result<Self, String> {
        let (kind, dir) = s.split_once('=').ok_or("KIND=DIR, e.g. host=/var/lib/gpuplane-agent/volumes")?;
        let kind = VolumeKind::parse(kind).ok_or_else(|| format!("{kind}: the kinds are host and pool"))?;
        let dir = PathBuf::from(dir);
        if !dir.is_absolute() {
            return Err(format!("{}: an absolute path", dir.display()));
        }
        Ok(StoreSpec { kind, dir })
    }
}

fn store_kind(kind: VolumeKind) -> StoreKind {
    match kind {
        VolumeKind::Host => StoreKind::Host,
        VolumeKind::Pool => StoreKind::Pool,
    }
}

/// What the keeper knows between heartbeats.
#[derive(Default)]
struct Known {
    /// The report of each volume the service last listed, sent with every heartbeat.
    reports: BTreeMap<Uuid, VolumeReport>,
    /// The size each held volume was last made or grown to.
    held: HashMap<Uuid, i64>,
    destroyed: HashSet<Uuid>,
    /// The stores' space as last measured.
    space: Vec<StoreReport>,
}

/// This host's volume stores and what it did with the service's orders.
pub struct VolumeKeeper {
    stores: Arc<Vec<(VolumeKind, VolumeStore)>>,
    known: Arc<Mutex<Known>>,
    working: Option<tokio::task::JoinHandle<()>>,
    mounts: VolumeMounts,
}

impl VolumeKeeper {
    /// Open the stores (at most one of each kind) and restore their mounts.
    pub fn open(specs: &[StoreSpec], state_dir: &Path) -> anyhow::Result<Self> {
        let mut stores = Vec::new();
        for spec in specs {
            if stores.iter().any(|(k, _)| *k == spec.kind) {
                anyhow::bail!("--volume-store: one {} store at most", spec.kind.as_str());
            }
            let mounts = state_dir.join("volume-mounts").join(spec.kind.as_str());
            let store = VolumeStore::open(store_kind(spec.kind), &spec.dir.join("images"), &mounts)
                .with_context(|| format!("the {} volume store in {}", spec.kind.as_str(), spec.dir.display()))?;
            let restored = store.restore()?;
            tracing::info!(kind = spec.kind.as_str(), dir = %spec.dir.display(), volumes = restored.len(), "volume store open");
            stores.push((spec.kind, store));
        }
        let stores = Arc::new(stores);
        let mounts = VolumeMounts { stores: stores.clone(), bound: Arc::default() };
        let keeper = VolumeKeeper { stores, known: Arc::default(), working: None, mounts };
        let space = measure(&keeper.stores);
        keeper.known.lock().unwrap_or_else(|e| e.into_inner()).space = space;
        Ok(keeper)
    }

    /// No store: the agent offers no volumes.
    pub fn none() -> Self {
        VolumeKeeper { stores: Arc::default(), known: Arc::default(), working: None, mounts: VolumeMounts::default() }
    }

    /// The handle jobs and environments mount the lease's volumes through.
    pub fn mounts(&self) -> VolumeMounts {
        self.mounts.clone()
    }

    /// The stores and their space, for the heartbeat.
    pub fn stores(&self) -> Vec<StoreReport> {
        self.known.lock().unwrap_or_else(|e| e.into_inner()).space.clone()
    }

    /// What came of every volume the service last listed, for the heartbeat.
    pub fn reports(&self) -> Vec<VolumeReport> {
        self.known.lock().unwrap_or_else(|e| e.into_inner()).reports.values().cloned().collect()
    }

    /// Carry out a heartbeat answer's orders in the background, unless the last ones are still being carried
    /// out (the next answer lists them all again).
    pub fn on_orders(&mut self, orders: Vec<VolumeOrder>) {
        if self.stores.is_empty() || self.working.as_ref().is_some_and(|w| !w.is_finished()) {
            return;
        }
        let (stores, known, mounts) = (self.stores.clone(), self.known.clone(), self.mounts.clone());
        self.working = Some(tokio::task::spawn_blocking(move || carry_out(&stores, &known, &mounts, &orders)));
    }

    /// Wait for the orders being carried out (tests, and a clean stop).
    pub async fn settle(&mut self) {
        if let Some(w) = self.working.take() {
            let _ = w.await;
        }
    }
}

fn measure(stores: &[(VolumeKind, VolumeStore)]) -> Vec<StoreReport> {
    stores
        .iter()
        .filter_map(|(kind, store)| match store.space() {
            Ok(space) => Some(StoreReport {
                kind: *kind,
                total_bytes: i64::try_from(space.total_bytes).unwrap_or(i64::MAX),
                free_bytes: i64::try_from(space.free_bytes).unwrap_or(i64::MAX),
            }),
            Err(e) => {
                tracing::warn!(kind = kind.as_str(), error = %format!("{e:#}"), "volume store: no space reading");
                None
            }
        })
        .collect()
}

/// A pool volume made at its size: its image's size, and its use as read where it is mounted here (else as last
/// reported).
fn pool_report(store: &VolumeStore, id: Uuid, last: Option<&VolumeReport>) -> VolumeReport {
    if let Ok(status) = store.status(id) {
        return ready(&status);
    }
    let size = std::fs::metadata(store.image_path(id)).map(|m| i64::try_from(m.len()).unwrap_or(i64::MAX));
    match size {
        Ok(size) => VolumeReport {
            volume_id: id,
            outcome: VolumeOutcome::Ready,
            size_bytes: Some(size),
            used_bytes: last.and_then(|r| r.used_bytes),
            message: None,
        },
        Err(e) => failed(id, &anyhow::Error::from(e).context("its image is gone from the pool's store")),
    }
}

fn ready(status: &crate::volumes::VolumeStatus) -> VolumeReport {
    VolumeReport {
        volume_id: status.id,
        outcome: VolumeOutcome::Ready,
        size_bytes: Some(i64::try_from(status.size_bytes).unwrap_or(i64::MAX)),
        used_bytes: Some(i64::try_from(status.used_bytes).unwrap_or(i64::MAX)),
        message: None,
    }
}

fn failed(id: Uuid, e: &anyhow::Error) -> VolumeReport {
    let message: String = format!("{e:#}").chars().filter(|c| !c.is_control()).take(1000).collect();
    VolumeReport {
        volume_id: id,
        outcome: VolumeOutcome::Failed,
        size_bytes: None,
        used_bytes: None,
        message: Some(message),
    }
}

/// Carry out every order, then keep only the reports of volumes the service still lists.
fn carry_out(
    stores: &[(VolumeKind, VolumeStore)],
    known: &Mutex<Known>,
    mounts: &VolumeMounts,
    orders: &[VolumeOrder],
) {
    let lock = || known.lock().unwrap_or_else(|e| e.into_inner());
    for order in orders {
        let id = order.volume_id;
        let Some((_, store)) = stores.iter().find(|(k, _)| *k == order.kind) else {
            let e = anyhow::anyhow!("this agent offers no {} volume store", order.kind.as_str());
            lock().reports.insert(id, failed(id, &e));
            continue;
        };
        let report = match order.action {
            VolumeAction::Hold => {
                let size = u64::try_from(order.size_bytes).unwrap_or(0);
                let held = lock().held.get(&id) == Some(&order.size_bytes);
                let pool = order.kind == VolumeKind::Pool;
                if held && pool {
                    // Made at this size: a pool volume is mounted only where a lease uses it (two hosts never
                    // mount one image read-write), so what it holds is read where it is mounted, if here.
                    let report = pool_report(store, id, lock().reports.get(&id));
                    lock().reports.insert(id, report);
                    continue;
                }
                // Already made at this size: only its use is read again (and a lost mount is made again).
                let status = if held {
                    store.status(id).or_else(|_| store.ensure(id, size, 0))
                } else {
                    store.ensure(id, size, 0)
                };
                if pool && status.is_ok() && !mounts.is_bound(id) {
                    // Made or grown here; mounted only for a lease of this host's.
                    if let Err(e) = store.unmount(id) {
                        tracing::warn!(volume.id = %id, error = %format!("{e:#}"), "volume: could not unmount it after making it");
                    }
                }
                match status {
                    Ok(status) => {
                        lock().held.insert(id, order.size_bytes);
                        ready(&status)
                    }
                    Err(e) => {
                        tracing::warn!(volume.id = %id, error = %format!("{e:#}"), "volume: could not make or grow it");
                        failed(id, &e)
                    }
                }
            }
            VolumeAction::Destroy => {
                if !lock().destroyed.contains(&id) {
                    if let Err(e) = store.destroy(id) {
                        // Reported as nothing yet: the service keeps ordering it until it is gone.
                        tracing::warn!(volume.id = %id, error = %format!("{e:#}"), "volume: could not destroy it yet");
                        lock().reports.remove(&id);
                        continue;
                    }
                    tracing::info!(volume.id = %id, "volume destroyed");
                    let mut k = lock();
                    k.destroyed.insert(id);
                    k.held.remove(&id);
                }
                VolumeReport {
                    volume_id: id,
                    outcome: VolumeOutcome::Destroyed,
                    size_bytes: None,
                    used_bytes: None,
                    message: None,
                }
            }
        };
        lock().reports.insert(id, report);
    }
    let listed: HashSet<Uuid> = orders.iter().map(|o| o.volume_id).collect();
    let space = measure(stores);
    let mut k = lock();
    k.reports.retain(|id, _| listed.contains(id));
    k.destroyed.retain(|id| listed.contains(id));
    k.space = space;
}

/// Where one volume of a lease comes into its sandbox or container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeBind {
    pub host: PathBuf,
    /// `/volumes/<mount>`.
    pub inside: String,
    pub read_only: bool,
}

/// Mounts the volumes of the leases on this host for their processes. Shared by the jobs and environments of
/// every lease (cloned: one set of stores, one record of what is mounted for leases).
#[derive(Clone, Default)]
pub struct VolumeMounts {
    stores: Arc<Vec<(VolumeKind, VolumeStore)>>,
    /// Volumes mounted for leases here, with the uid whose their files are (read-write ones).
    bound: Arc<Mutex<HashMap<Uuid, Option<u32>>>>,
}

impl std::fmt::Debug for VolumeMounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds: Vec<&str> = self.stores.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("VolumeMounts").field("stores", &kinds).finish()
    }
}

impl VolumeMounts {
    fn is_bound(&self, id: Uuid) -> bool {
        self.bound.lock().unwrap_or_else(|e| e.into_inner()).contains_key(&id)
    }

    /// Mount the lease's volumes here (a host volume is mounted already; a pool volume read-write, or read-only
    /// with `ro,noload`) and give a read-write volume's files to the lease's user: a volume outlives the lease
    /// whose uid wrote it, and the next lease runs as another. Returns the binds, in mount order.
    pub fn binds(
        &self,
        volumes: &[gpuplane_protocol::volumes::LeaseVolume],
        uid: u32,
    ) -> anyhow::Result<Vec<VolumeBind>> {
        let mut binds = Vec::new();
        for v in volumes {
            // The service checks mount names; the agent, root, binds nothing it did not check itself.
            anyhow::ensure!(
                gpuplane_protocol::volumes::is_name(&v.mount),
                "volume {}: {:?} is not a mount name",
                v.volume_id,
                v.mount
            );
            let (_, store) = self.stores.iter().find(|(k, _)| *k == v.kind).with_context(|| {
                format!("volume {}: this host offers no {} volume store (--volume-store)", v.volume_id, v.kind.as_str())
            })?;
            // A host volume stays mounted read-write (its agent keeps it); read-only is the bind's.
            let read_only_mount = v.kind == VolumeKind::Pool && v.read_only;
            let host = store.mount_for_lease(v.volume_id, read_only_mount)?;
            let mut bound = self.bound.lock().unwrap_or_else(|e| e.into_inner());
            if !v.read_only && bound.get(&v.volume_id) != Some(&Some(uid)) {
                give_tree(&host, uid)
                    .with_context(|| format!("volume {}: giving its files to uid {uid}", v.volume_id))?;
                bound.insert(v.volume_id, Some(uid));
            } else {
                bound.entry(v.volume_id).or_insert(None);
            }
            binds.push(VolumeBind { host, inside: v.mount_path(), read_only: v.read_only });
        }
        Ok(binds)
    }

    /// Unmount the pool volumes mounted for leases that no longer list them here (one still in use by a
    /// process that has not exited yet is tried again next time). Host volumes stay mounted: their agent keeps
    /// them.
    pub fn release_unused(&self, leases: &[gpuplane_protocol::jobs::NodeLease]) {
        let listed: HashSet<Uuid> = leases.iter().flat_map(|l| l.volumes.iter().map(|v| v.volume_id)).collect();
        let unused: Vec<Uuid> = {
            let bound = self.bound.lock().unwrap_or_else(|e| e.into_inner());
            bound.keys().filter(|id| !listed.contains(id)).copied().collect()
        };
        let pool = self.stores.iter().find(|(k, _)| *k == VolumeKind::Pool).map(|(_, s)| s);
        for id in unused {
            let result = match pool {
                Some(store) if store.is_mounted(id) => store.unmount(id),
                _ => Ok(()),
            };
            match result {
                Ok(()) => {
                    self.bound.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                }
                Err(e) => {
                    tracing::info!(volume.id = %id, error = %format!("{e:#}"), "volume: still in use; unmounting later")
                }
            }
        }
    }
}

/// Give every file under `root` (itself included; symbolic links themselves, never their targets) to `uid`,
/// with coreutils' `chown -R -P`: it walks the tree by directory descriptors without following links, so a
/// directory swapped for a link while it walks leads nowhere outside the volume.
fn give_tree(root: &Path, uid: u32) -> anyhow::Result<()> {
    let owner = format!("{uid}:{uid}");
    let output = std::process::Command::new("chown")
        .args(["-R", "-P", "-h", &owner, "--"])
        .arg(root)
        .env("LC_ALL", "C")
        .output()
        .context("running chown")?;
    anyhow::ensure!(output.status.success(), "chown -R {owner}: {}", String::from_utf8_lossy(&output.stderr).trim());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mount_name_from_the_service_is_checked_before_anything_is_bound() {
        for good in ["ckpt", "a", "data.v2", "x_y-z"] {
            assert!(gpuplane_protocol::volumes::is_name(good), "{good}");
        }
        for bad in ["", "..", ".", "../etc", "a/b", "/etc", "Data", "-x", &"a".repeat(64), "a b"] {
            assert!(!gpuplane_protocol::volumes::is_name(bad), "{bad:?}");
        }
        let mounts = VolumeMounts::default();
        let v = gpuplane_protocol::volumes::LeaseVolume {
            volume_id: Uuid::nil(),
            kind: VolumeKind::Pool,
            mount: "../etc".into(),
            read_only: false,
        };
        let err = mounts.binds(&[v], 1000).unwrap_err().to_string();
        assert!(err.contains("not a mount name"), "{err}");
    }

    #[test]
    fn store_flags_are_checked_at_the_edge() {
        let spec = StoreSpec::parse("pool=/mnt/pool-volumes").unwrap();
        assert_eq!((spec.kind, spec.dir), (VolumeKind::Pool, PathBuf::from("/mnt/pool-volumes")));
        assert!(StoreSpec::parse("host").unwrap_err().contains("KIND=DIR"));
        assert!(StoreSpec::parse("nfs=/x").unwrap_err().contains("host and pool"));
        assert!(StoreSpec::parse("host=relative").unwrap_err().contains("absolute"));
    }

    /// The keeper carries out real orders on a real store (root only: loop mounts).
    #[tokio::test]
    async fn orders_are_carried_out_and_reported_until_the_service_stops_listing_them() {
        use std::os::unix::fs::MetadataExt;
        if std::fs::metadata("/proc/self").map(|meta| meta.uid()).ok() != Some(0) {
            eprintln!("skipped: needs root for loop mounts");
            return;
        }
        let dir = std::env::temp_dir().join(format!("gpuplane-keeper-{}", Uuid::now_v7()));
        let specs = [StoreSpec { kind: VolumeKind::Host, dir: dir.join("store") }];
        let mut keeper = VolumeKeeper::open(&specs, &dir.join("state")).unwrap();
        assert_eq!(keeper.stores().len(), 1);
        assert!(keeper.stores()[0].free_bytes > 0);
        let (id, other) = (Uuid::now_v7(), Uuid::now_v7());
        let hold = |id, size_mib: i64, kind| VolumeOrder {
            volume_id: id,
            kind,
            action: VolumeAction::Hold,
            size_bytes: size_mib << 20,
        };
        keeper.on_orders(vec![hold(id, 32, VolumeKind::Host), hold(other, 32, VolumeKind::Pool)]);
        keeper.settle().await;
        let reports = keeper.reports();
        let of = |id| reports.iter().find(|r| r.volume_id == id).unwrap().clone();
        assert_eq!(of(id).outcome, VolumeOutcome::Ready, "{reports:?}");
        assert!(of(id).size_bytes.unwrap() >= 32 << 20);
        assert_eq!(of(other).outcome, VolumeOutcome::Failed);
        assert!(of(other).message.unwrap().contains("no pool volume store"));
        // Destroyed, then reported destroyed until the service stops listing it.
        let destroy = VolumeOrder { action: VolumeAction::Destroy, ..hold(id, 32, VolumeKind::Host) };
        keeper.on_orders(vec![destroy]);
        keeper.settle().await;
        assert_eq!(keeper.reports().iter().map(|r| r.outcome).collect::<Vec<_>>(), [VolumeOutcome::Destroyed]);
        assert!(!dir.join("store/images").join(format!("{id}.img")).exists());
        keeper.on_orders(Vec::new());
        keeper.settle().await;
        assert!(keeper.reports().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
