//! Tenant volumes on this host: storage that outlives a lease, one filesystem image per volume.
//!
//! A store is a directory of images, `<images>/<id>.img`, each mounted at `<mounts>/<id>`. A host store keeps
//! them on this host's disk; a pool store on a filesystem the operator mounts at one path on every host of a pool
//! (NFS, CephFS...). Here both are just directories: which host may make or destroy a volume is the service's call.
//!
//! - An image per volume, because its size is its quota: a full volume gives ENOSPC to its own users only, and
//!   project quotas do not work on these hosts.
//! - ext4, because `resize2fs` grows it online, while it is mounted and in use, and e2fsprogs is on every Debian
//!   host. The agent makes every image itself (`mkfs.ext4` on a fresh sparse file): a tenant never supplies a
//!   filesystem image, so the kernel never parses a crafted one.
//! - Mounted `nosuid,nodev`: a setuid binary or a device node written in a volume gives nothing.
//! - The cost: a loop device per mounted volume. Images are sparse: they take only what is written.
//! - A pool's images are every host's, and ext4 mounted by two hosts at once is corrupted: pool images are made
//!   with ext4's multi-mount protection (`mmp`: a second host's mount fails, "already active on another node"),
//!   and [`VolumeStore::restore`] mounts again only the pool volumes this host held.
//!
//! Every step is a program (`mkfs.ext4`, `resize2fs`, `e2fsck`, `mount`, `umount`, `losetup`, `stat -f`), run
//! without a shell, its failure an error naming it and its stderr: unsafe code is forbidden in this crate. The
//! calls block: an async caller runs them with `spawn_blocking`.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The smallest volume: ext4 and its journal take a few MiB of it.
pub const MIN_SIZE_BYTES: u64 = 16 << 20;

/// Images being made are named `.tmp-<id>-<random>` until complete; [`VolumeStore::restore`] removes leftovers.
const TEMP_PREFIX: &str = ".tmp-";

/// A pool store's temporary younger than this may be an image another host is making now.
const POOL_TEMP_STALE: Duration = Duration::from_secs(3600);

/// The programs a store runs, and the Debian package of each.
const TOOLS: [(&str, &str); 7] = [
    ("mkfs.ext4", "e2fsprogs"),
    ("resize2fs", "e2fsprogs"),
    ("e2fsck", "e2fsprogs"),
    ("mount", "mount"),
    ("umount", "mount"),
    ("losetup", "util-linux"),
    ("stat", "coreutils"),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// Images on this host's own disk.
    Host,
    /// Images on the pool's shared filesystem.
    Pool,
}

/// A filesystem's size and what is free on it, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Space {
    pub total_bytes: u64,
    pub free_bytes: u64,
}

/// A mounted volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeStatus {
    pub id: Uuid,
    /// The image's size: the volume's size.
    pub size_bytes: u64,
    /// Written in the filesystem.
    pub used_bytes: u64,
    /// Still free in the filesystem.
    pub free_bytes: u64,
    pub mount_point: PathBuf,
}

/// A directory of volume images and the directory where they are mounted.
#[derive(Debug)]
pub struct VolumeStore {
    kind: StoreKind,
    images: PathBuf,
    mounts: PathBuf,
    /// The programs of [`TOOLS`], in that order, as found at open.
    tools: Vec<PathBuf>,
    /// One change at a time: two calls for one id must not both make or mount its image.
    lock: Mutex<()>,
}

impl VolumeStore {
    /// Create the directories if need be (images 0700, mounts 0755) and find the programs.
    pub fn open(kind: StoreKind, images_dir: &Path, mounts_dir: &Path) -> anyhow::Result<Self> {
        let tools = TOOLS.iter().map(|(name, package)| find_tool(name, package)).collect::<anyhow::Result<_>>()?;
        let images = make_dir(images_dir, 0o700).context("volume images directory")?;
        let mounts = make_dir(mounts_dir, 0o755).context("volume mount points directory")?;
        Ok(VolumeStore { kind, images, mounts, tools, lock: Mutex::new(()) })
    }

    pub fn kind(&self) -> StoreKind {
        self.kind
    }

    pub fn image_path(&self, id: Uuid) -> PathBuf {
        self.images.join(format!("{id}.img"))
    }

    pub fn mount_point(&self, id: Uuid) -> PathBuf {
        self.mounts.join(id.to_string())
    }

    /// The size of the filesystem that holds the images, and what is free on it.
    pub fn space(&self) -> anyhow::Result<Space> {
        let stat = self.fs_stat(&self.images)?;
        Ok(Space { total_bytes: stat.total(), free_bytes: stat.available() })
    }

    /// Make the volume if it is missing (its root owned by `owner_uid`), grow it to `size_bytes` if it is smaller
    /// (never shrink it), and mount it. Doing it again changes nothing.
    pub fn ensure(&self, id: Uuid, size_bytes: u64, owner_uid: u32) -> anyhow::Result<VolumeStatus> {
        anyhow::ensure!(
            size_bytes >= MIN_SIZE_BYTES,
            "volume {id}: {} is too small, a volume has at least {}",
            human(size_bytes),
            human(MIN_SIZE_BYTES)
        );
        let _guard = self.lock();
        let image = self.image_path(id);
        match fs::metadata(&image) {
            Err(err) if err.kind() == ErrorKind::NotFound => self.create(id, &image, size_bytes, owner_uid)?,
            Err(err) => return Err(err).with_context(|| format!("volume {id}: reading {}", image.display())),
            Ok(meta) if meta.len() > size_bytes => anyhow::bail!(
                "volume {id} is {} and can grow but never shrink (asked for {})",
                human(meta.len()),
                human(size_bytes)
            ),
            Ok(meta) if meta.len() < size_bytes => self.grow(id, &image, meta.len(), size_bytes)?,
            Ok(_) => {}
        }
        self.mount(id)?;
        self.status(id)
    }

    /// Mount an existing volume for a lease's processes and return its mount point: read-write at its present
    /// size (as [`Self::ensure`]), or read-only (`ro,noload`: no journal replay, nothing written, so any number
    /// of hosts may read one pool volume at once). A volume mounted the other way is mounted again, which only
    /// works while nothing uses it (the service changes a lease's volumes only while nothing of it runs).
    pub fn mount_for_lease(&self, id: Uuid, read_only: bool) -> anyhow::Result<PathBuf> {
        let image = self.image_path(id);
        let size = fs::metadata(&image).with_context(|| format!("volume {id}: no image on this host's store"))?.len();
        let mount_point = self.mount_point(id);
        let mounted = mount_at(&mount_point)?;
        let mounted_ro = mounted.as_ref().map(|m| m.options.split(',').any(|o| o == "ro"));
        if mounted_ro.is_some_and(|ro| ro != read_only) {
            self.unmount(id)?;
        }
        if !read_only {
            return self.ensure(id, size, 0).map(|status| status.mount_point);
        }
        let _guard = self.lock();
        if mount_at(&mount_point)?.is_none() {
            match fs::DirBuilder::new().mode(0o755).create(&mount_point) {
                Err(err) if err.kind() != ErrorKind::AlreadyExists => {
                    return Err(err).with_context(|| format!("making {}", mount_point.display()));
                }
                _ => {}
            }
            let options = ["-t", "ext4", "-o", "loop,ro,noload,nosuid,nodev", "--"].map(OsStr::new);
            self.run("mount", options.into_iter().chain([image.as_os_str(), mount_point.as_os_str()]))
                .with_context(|| format!("mounting volume {id} read-only"))?;
        }
        Ok(mount_point)
    }

    /// Whether the volume is mounted on this host now.
    pub fn is_mounted(&self, id: Uuid) -> bool {
        mount_at(&self.mount_point(id)).ok().flatten().is_some()
    }

    /// A mounted volume's size and use.
    pub fn status(&self, id: Uuid) -> anyhow::Result<VolumeStatus> {
        let mount_point = self.mount_point(id);
        anyhow::ensure!(mount_at(&mount_point)?.is_some(), "volume {id} is not mounted");
        let size_bytes = fs::metadata(self.image_path(id)).with_context(|| format!("volume {id}'s image"))?.len();
        let stat = self.fs_stat(&mount_point)?;
        Ok(VolumeStatus { id, size_bytes, used_bytes: stat.used(), free_bytes: stat.available(), mount_point })
    }

    /// Unmount the volume, keeping its image. A volume in use stays mounted: an error says so.
    pub fn unmount(&self, id: Uuid) -> anyhow::Result<()> {
        let _guard = self.lock();
        self.unmount_locked(id)
    }

    /// Unmount the volume and delete its image: its data is gone. A volume in use stays as it is: an error says so.
    pub fn destroy(&self, id: Uuid) -> anyhow::Result<()> {
        let _guard = self.lock();
        self.unmount_locked(id)?;
        let image = self.image_path(id);
        if !image.exists() {
            return Ok(());
        }
        for device in self.loop_devices(&image)? {
            self.run("losetup", [OsStr::new("-d"), device.as_os_str()])?;
        }
        let left = self.loop_devices(&image)?;
        anyhow::ensure!(
            left.is_empty(),
            "volume {id}: its image is still attached to {} (mounted elsewhere?); it is kept",
            left.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
        );
        match fs::remove_file(&image) {
            Err(err) if err.kind() != ErrorKind::NotFound => {
                return Err(err).with_context(|| format!("volume {id}: deleting {}", image.display()));
            }
            _ => {}
        }
        sync_dir(&self.images)
    }

    /// At agent start: remove the temporaries of images never finished, and mount again every image not mounted
    /// (of a pool store: only those this host held, whose mount point it kept; unmount and destroy remove it).
    /// Returns those volumes; an image that cannot be mounted is an error after the others are mounted.
    pub fn restore(&self) -> anyhow::Result<Vec<Uuid>> {
        let _guard = self.lock();
        let mut ids = Vec::new();
        for entry in fs::read_dir(&self.images).with_context(|| format!("reading {}", self.images.display()))? {
            let (entry, pool) = (entry?, self.kind == StoreKind::Pool);
            let (name, path) = (entry.file_name(), entry.path());
            if name.as_encoded_bytes().starts_with(TEMP_PREFIX.as_bytes()) {
                let age = entry.metadata()?.modified()?.elapsed().unwrap_or_default();
                if !pool || age > POOL_TEMP_STALE {
                    tracing::info!(file = %path.display(), "removing an image never finished");
                    fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
                }
            } else if let Some(id) = volume_id(&name) {
                if !pool || self.mount_point(id).is_dir() {
                    ids.push(id);
                }
            } else {
                tracing::warn!(file = %path.display(), "not a volume image (<uuid>.img): left alone");
            }
        }
        ids.sort();
        let failed: Vec<String> = ids.iter().filter_map(|&id| self.mount(id).err().map(|e| format!("{e:#}"))).collect();
        anyhow::ensure!(
            failed.is_empty(),
            "{} of {} volumes not mounted: {}",
            failed.len(),
            ids.len(),
            failed.join("; ")
        );
        Ok(ids)
    }

    /// The volumes whose image is present.
    pub fn list(&self) -> Vec<Uuid> {
        let entries = match fs::read_dir(&self.images) {
            Ok(entries) => entries,
            Err(err) => {
                tracing::warn!(dir = %self.images.display(), %err, "cannot list volume images");
                return Vec::new();
            }
        };
        let mut ids: Vec<Uuid> = entries.filter_map(|e| volume_id(&e.ok()?.file_name())).collect();
        ids.sort();
        ids
    }

    fn lock(&self) -> MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A fresh sparse file, formatted, then linked under its final name (never replacing one): a crash leaves at
    /// most a temporary, never a half-made image.
    fn create(&self, id: Uuid, image: &Path, size_bytes: u64, owner_uid: u32) -> anyhow::Result<()> {
        let free = self.space()?.free_bytes;
        anyhow::ensure!(
            size_bytes <= free,
            "volume {id}: the store has {} free, the volume needs {}",
            human(free),
            human(size_bytes)
        );
        let temp = self.images.join(format!("{TEMP_PREFIX}{id}-{}", Uuid::new_v4().simple()));
        let made = self.make_image(&temp, size_bytes, owner_uid).and_then(|()| {
            fs::hard_link(&temp, image)
                .with_context(|| format!("volume {id}: naming its new image {}", image.display()))
        });
        let _ = fs::remove_file(&temp);
        made.and_then(|()| sync_dir(&self.images)).with_context(|| format!("making volume {id}"))
    }

    fn make_image(&self, temp: &Path, size_bytes: u64, owner_uid: u32) -> anyhow::Result<()> {
        let file = OpenOptions::new().write(true).create_new(true).mode(0o600).open(temp)?;
        file.set_len(size_bytes)?;
        let options = format!("root_owner={owner_uid}:{owner_uid},lazy_itable_init=1");
        let mmp: &[&str] = if self.kind == StoreKind::Pool { &["-O", "mmp"] } else { &[] };
        let args = ["-q", "-F", "-m", "0", "-E", &options].into_iter().chain(mmp.iter().copied()).chain(["--"]);
        self.run("mkfs.ext4", args.map(OsStr::new).chain([temp.as_os_str()]))?;
        file.sync_all()?;
        Ok(())
    }

    /// Extend the image, then the filesystem: online through its loop device when mounted, else offline (after
    /// the `e2fsck -f` that `resize2fs` asks for). When the filesystem did not grow, the image gets its old size
    /// back, so the next call tries again.
    fn grow(&self, id: Uuid, image: &Path, from: u64, to: u64) -> anyhow::Result<()> {
        let free = self.space()?.free_bytes;
        anyhow::ensure!(
            to - from <= free,
            "volume {id}: the store has {} free, growing the volume from {} to {} needs {} more",
            human(free),
            human(from),
            human(to),
            human(to - from)
        );
        let mount_point = self.mount_point(id);
        let device = self.mounted_device(id)?;
        if device.is_none() {
            let attached = self.loop_devices(image)?;
            anyhow::ensure!(
                attached.is_empty(),
                "volume {id}: its image is attached to {attached:?} but not mounted here"
            );
            let (what, output) = self.output("e2fsck", [OsStr::new("-f"), OsStr::new("-p"), image.as_os_str()])?;
            // 1: errors were corrected.
            anyhow::ensure!(matches!(output.status.code(), Some(0 | 1)), failure("e2fsck", &what, &output));
        }
        let fs_bytes = || match &device {
            Some(_) => self.fs_stat(&mount_point).map(|stat| stat.total()),
            None => ext4_size(image),
        };
        let before = fs_bytes()?;
        let file = OpenOptions::new().write(true).open(image)?;
        file.set_len(to)?;
        let grown = match &device {
            Some(device) => self.run("losetup", [OsStr::new("--set-capacity"), device.as_os_str()]).and_then(|_| {
                self.run("resize2fs", [device]).map_err(|err| {
                    let denied = format!("{err:#}").contains("Permission denied");
                    if denied { err.context("growing a mounted volume needs CAP_SYS_RESOURCE") } else { err }
                })
            }),
            None => self.run("resize2fs", [image]),
        };
        let Err(err) = grown else { return Ok(file.sync_all()?) };
        if fs_bytes().is_ok_and(|now| now == before) {
            let undone = file.set_len(from).map_err(anyhow::Error::from).and_then(|()| match &device {
                Some(device) => self.run("losetup", [OsStr::new("--set-capacity"), device.as_os_str()]).map(drop),
                None => Ok(()),
            });
            if let Err(undo) = undone {
                tracing::warn!(volume.id = %id, error = %format!("{undo:#}"), "cannot give the image its old size back");
            }
        }
        Err(err.context(format!("growing volume {id} from {} to {}", human(from), human(to))))
    }

    /// The loop device of the volume's mount, if mounted; an error if its mount point holds anything else.
    fn mounted_device(&self, id: Uuid) -> anyhow::Result<Option<PathBuf>> {
        let mount_point = self.mount_point(id);
        let Some(mount) = mount_at(&mount_point)? else { return Ok(None) };
        let name = mount.source.strip_prefix("/dev/").unwrap_or(&mount.source);
        let backing = fs::read_to_string(format!("/sys/block/{name}/loop/backing_file"));
        let ours = backing.is_ok_and(|path| same_file(Path::new(path.trim_end()), &self.image_path(id)));
        anyhow::ensure!(ours, "volume {id}: {} holds {}, not its image", mount_point.display(), mount.source);
        Ok(Some(PathBuf::from(mount.source)))
    }

    /// Mount the volume unless it is mounted already.
    fn mount(&self, id: Uuid) -> anyhow::Result<()> {
        if self.mounted_device(id)?.is_some() {
            return Ok(());
        }
        let (image, mount_point) = (self.image_path(id), self.mount_point(id));
        match fs::DirBuilder::new().mode(0o755).create(&mount_point) {
            Err(err) if err.kind() != ErrorKind::AlreadyExists => {
                return Err(err).with_context(|| format!("making {}", mount_point.display()));
            }
            _ => {}
        }
        let options = ["-t", "ext4", "-o", "loop,nosuid,nodev", "--"].map(OsStr::new);
        self.run("mount", options.into_iter().chain([image.as_os_str(), mount_point.as_os_str()]))
            .with_context(|| format!("mounting volume {id}"))?;
        Ok(())
    }

    /// Unmount (every mount stacked there), then remove the mount point, so nothing written there while the volume
    /// is not mounted lands on the host's disk.
    fn unmount_locked(&self, id: Uuid) -> anyhow::Result<()> {
        let mount_point = self.mount_point(id);
        while mount_at(&mount_point)?.is_some() {
            let (what, output) = self.output("umount", [OsStr::new("--"), mount_point.as_os_str()])?;
            if !output.status.success() {
                let stderr = String::from_utf8_lossy(&output.stderr);
                anyhow::ensure!(
                    !stderr.contains("busy"),
                    "volume {id} is in use (a process has a file or its working directory in {}); it stays mounted",
                    mount_point.display()
                );
                anyhow::bail!(failure("umount", &what, &output));
            }
        }
        match fs::remove_dir(&mount_point) {
            Err(err) if err.kind() != ErrorKind::NotFound => {
                tracing::warn!(volume.id = %id, %err, mount_point = %mount_point.display(), "cannot remove the mount point");
            }
            _ => {}
        }
        Ok(())
    }

    /// The loop devices attached to this image (`losetup -j`).
    fn loop_devices(&self, image: &Path) -> anyhow::Result<Vec<PathBuf>> {
        let output = self.run("losetup", [OsStr::new("-j"), image.as_os_str()])?;
        let text = String::from_utf8_lossy(&output.stdout);
        Ok(text.lines().filter_map(|line| line.split_once(": ")).map(|(device, _)| PathBuf::from(device)).collect())
    }

    /// statvfs(3) of the filesystem holding `path`, through `stat -f`.
    fn fs_stat(&self, path: &Path) -> anyhow::Result<FsStat> {
        let output = self
            .run("stat", [OsStr::new("-f"), OsStr::new("--format=%S %b %f %a"), OsStr::new("--"), path.as_os_str()])?;
        let text = String::from_utf8_lossy(&output.stdout);
        let numbers: Vec<u64> = text.split_whitespace().filter_map(|n| n.parse().ok()).collect();
        let &[block, blocks, free, available] = numbers.as_slice() else {
            anyhow::bail!("stat -f {}: unexpected output `{}`", path.display(), text.trim());
        };
        Ok(FsStat { block, blocks, free, available })
    }

    fn run<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(&self, tool: &str, args: I) -> anyhow::Result<Output> {
        let (what, output) = self.output(tool, args)?;
        anyhow::ensure!(output.status.success(), failure(tool, &what, &output));
        Ok(output)
    }

    /// Run a tool of [`TOOLS`], its output captured (in the C locale: its messages are read here).
    fn output<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(
        &self,
        tool: &str,
        args: I,
    ) -> anyhow::Result<(String, Output)> {
        let index = TOOLS.iter().position(|(name, _)| *name == tool).expect("a tool of TOOLS");
        let args: Vec<OsString> = args.into_iter().map(|arg| arg.as_ref().to_owned()).collect();
        let what = std::iter::once(tool.to_owned())
            .chain(args.iter().map(|a| a.to_string_lossy().into_owned()))
            .collect::<Vec<_>>()
            .join(" ");
        let output = Command::new(&self.tools[index])
            .args(&args)
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {what}"))?;
        Ok((what, output))
    }
}

/// statvfs's numbers: the block size and counts of blocks (all, free, free to unprivileged users).
struct FsStat {
    block: u64,
    blocks: u64,
    free: u64,
    available: u64,
}

impl FsStat {
    fn total(&self) -> u64 {
        self.blocks * self.block
    }
    fn used(&self) -> u64 {
        self.blocks.saturating_sub(self.free) * self.block
    }
    fn available(&self) -> u64 {
        self.available * self.block
    }
}

/// A failed tool's error: its exit status and what it said (stderr, else stdout), on one line.
fn failure(tool: &str, what: &str, output: &Output) -> String {
    let said = [&output.stderr, &output.stdout]
        .map(|text| {
            String::from_utf8_lossy(text)
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join("; ")
        })
        .into_iter()
        .find(|text| !text.is_empty())
        .unwrap_or_default();
    format!("{tool} failed ({}): {said} (ran: {what})", output.status)
}

/// A tool on the PATH (absolute entries only) or in /usr/sbin, /sbin, /usr/bin.
fn find_tool(name: &str, package: &str) -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .chain(["/usr/sbin", "/sbin", "/usr/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|path| fs::metadata(path).is_ok_and(|meta| meta.is_file() && meta.mode() & 0o111 != 0))
        .with_context(|| {
            format!("volumes need `{name}` (on the PATH or in /usr/sbin, /sbin, /usr/bin): install the Debian package {package}")
        })
}

/// The id of an image's file name: `<uuid>.img`, the uuid as the store writes it (hyphenated, lowercase).
fn volume_id(name: &OsStr) -> Option<Uuid> {
    let stem = name.to_str()?.strip_suffix(".img")?;
    Uuid::parse_str(stem).ok().filter(|id| id.to_string() == stem)
}

/// Create the directory if need be, with this mode; its canonical path (what mountinfo shows).
fn make_dir(dir: &Path, mode: u32) -> anyhow::Result<PathBuf> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting {}'s mode", dir.display()))?;
    Ok(dir.canonicalize()?)
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (fs::metadata(a), fs::metadata(b)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).with_context(|| format!("syncing {}", dir.display()))
}

/// An unmounted ext4 image's size as its superblock says (block count x block size).
fn ext4_size(image: &Path) -> anyhow::Result<u64> {
    let mut sb = [0u8; 1024];
    let mut file = File::open(image)?;
    file.seek(SeekFrom::Start(1024))?;
    file.read_exact(&mut sb)?;
    let u32_at = |at: usize| u64::from(u32::from_le_bytes(sb[at..at + 4].try_into().expect("4 bytes")));
    let ext4 = sb[0x38..0x3a] == [0x53, 0xef] && u32_at(0x18) <= 6;
    anyhow::ensure!(ext4, "{} is not an ext4 image", image.display());
    let high = if u32_at(0x60) & 0x80 != 0 { u32_at(0x150) } else { 0 };
    Ok(((high << 32) | u32_at(0x4)) << (10 + u32_at(0x18)))
}

/// One line of /proc/self/mountinfo.
#[derive(Debug, PartialEq, Eq)]
struct Mount {
    mount_point: PathBuf,
    /// The mount's own options (`rw,nosuid,nodev,relatime`).
    options: String,
    source: String,
}

/// The mount at this path, the topmost if several are stacked.
fn mount_at(path: &Path) -> anyhow::Result<Option<Mount>> {
    let text = fs::read_to_string("/proc/self/mountinfo").context("reading /proc/self/mountinfo")?;
    Ok(parse_mountinfo(&text).into_iter().rfind(|mount| mount.mount_point == path))
}

fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (mine, theirs) = line.split_once(" - ")?;
            let fields: Vec<&str> = mine.split(' ').collect();
            let (mount_point, options) = (fields.get(4)?, fields.get(5)?);
            let source = theirs.split(' ').nth(1)?;
            Some(Mount {
                mount_point: unescape(mount_point),
                options: (*options).to_owned(),
                source: source.to_owned(),
            })
        })
        .collect()
}

/// Mountinfo writes space, tab, newline and backslash in paths as `\ooo` (octal).
fn unescape(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal =
            bytes.get(i + 1..i + 4).filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal.and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok()) {
            Some(byte) => {
                out.push(byte);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    PathBuf::from(OsString::from_vec(out))
}

fn human(bytes: u64) -> String {
    match bytes {
        0..0x4000_0000 => format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64),
        _ => format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    const MIB: u64 = 1 << 20;
    const TENANT_UID: u32 = 1000;

    /// A store in its own directory under /tmp. Dropped (even on a panic), it unmounts what it mounted, detaches
    /// what is left attached to its images and removes the directory.
    struct TestStore {
        store: VolumeStore,
        root: PathBuf,
    }

    impl TestStore {
        fn new() -> Option<TestStore> {
            TestStore::of(StoreKind::Host)
        }

        /// None (the test is skipped, and says so) unless root: loop mounts need it.
        fn of(kind: StoreKind) -> Option<TestStore> {
            if fs::metadata("/proc/self").map(|meta| meta.uid()).ok() != Some(0) {
                eprintln!("skipped: volumes are loop mounts, which need root");
                return None;
            }
            let root = std::env::temp_dir().join(format!("gpuplane-volumes-test-{}", Uuid::new_v4().simple()));
            let store = VolumeStore::open(kind, &root.join("images"), &root.join("mounts")).unwrap();
            Some(TestStore { store, root })
        }

        /// Unmount everything, then check that no loop device is left attached to an image (mount's autoclear
        /// detaches them), before the drop detaches any by force.
        fn finish(self) {
            self.unmount_all();
            for entry in fs::read_dir(&self.store.images).unwrap() {
                let image = entry.unwrap().path();
                assert_eq!(self.store.loop_devices(&image).unwrap(), Vec::<PathBuf>::new(), "{}", image.display());
            }
        }

        /// Unmount (lazily if busy: a panicking test may still hold files open).
        fn unmount_all(&self) {
            for mount in self.mounts().iter().rev() {
                if self.store.run("umount", [mount.as_os_str()]).is_err() {
                    let _ = self.store.run("umount", [OsStr::new("-l"), mount.as_os_str()]);
                }
            }
        }

        /// What is mounted under this store's directory.
        fn mounts(&self) -> Vec<PathBuf> {
            let text = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
            parse_mountinfo(&text).into_iter().map(|m| m.mount_point).filter(|m| m.starts_with(&self.root)).collect()
        }
    }

    impl Drop for TestStore {
        fn drop(&mut self) {
            self.unmount_all();
            for entry in fs::read_dir(&self.store.images).into_iter().flatten().flatten() {
                for device in self.store.loop_devices(&entry.path()).unwrap_or_default() {
                    let _ = self.store.run("losetup", [OsStr::new("-d"), device.as_os_str()]);
                }
            }
            match self.mounts().as_slice() {
                [] => drop(fs::remove_dir_all(&self.root)),
                left => eprintln!("left in place, still mounted: {left:?}"),
            }
        }
    }

    impl std::ops::Deref for TestStore {
        type Target = VolumeStore;
        fn deref(&self) -> &VolumeStore {
            &self.store
        }
    }

    fn mounts_at(path: &Path) -> usize {
        parse_mountinfo(&fs::read_to_string("/proc/self/mountinfo").unwrap())
            .iter()
            .filter(|m| m.mount_point == path)
            .count()
    }

    fn total(store: &VolumeStore, id: Uuid) -> u64 {
        store.fs_stat(&store.mount_point(id)).unwrap().total()
    }

    #[test]
    fn ensure_makes_a_sparse_mounted_volume_owned_by_its_tenant_and_again_changes_nothing() {
        let Some(t) = TestStore::new() else { return };
        let id = Uuid::new_v4();
        let status = t.ensure(id, 64 * MIB, TENANT_UID).unwrap();
        assert_eq!((status.id, status.size_bytes, &status.mount_point), (id, 64 * MIB, &t.mount_point(id)));
        assert!(status.free_bytes > 50 * MIB && status.used_bytes < 10 * MIB, "{status:?}");
        assert_eq!(mounts_at(&status.mount_point), 1);
        let root = fs::metadata(&status.mount_point).unwrap();
        assert_eq!((root.uid(), root.gid(), root.mode() & 0o7777), (TENANT_UID, TENANT_UID, 0o755));
        let image = fs::metadata(t.image_path(id)).unwrap();
        assert_eq!((image.len(), image.mode() & 0o777), (64 * MIB, 0o600));
        assert!(image.blocks() * 512 < 16 * MIB, "sparse: {} bytes allocated", image.blocks() * 512);
        assert_eq!(t.list(), vec![id]);

        fs::write(status.mount_point.join("marker"), "kept").unwrap();
        let again = t.ensure(id, 64 * MIB, TENANT_UID).unwrap();
        assert_eq!((again.size_bytes, mounts_at(&again.mount_point)), (64 * MIB, 1));
        assert_eq!(fs::read_to_string(again.mount_point.join("marker")).unwrap(), "kept");
        t.finish();
    }

    #[test]
    fn a_full_volume_gives_enospc_to_its_own_users_only() {
        let Some(t) = TestStore::new() else { return };
        let (full, other) = (Uuid::new_v4(), Uuid::new_v4());
        t.ensure(full, 32 * MIB, TENANT_UID).unwrap();
        t.ensure(other, 32 * MIB, TENANT_UID).unwrap();
        let mut file = File::create(t.mount_point(full).join("big")).unwrap();
        let chunk = vec![7u8; MIB as usize];
        let err = (0..48).try_for_each(|_| file.write_all(&chunk)).and_then(|()| file.sync_all()).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
        assert!(t.status(full).unwrap().free_bytes < MIB);

        drop(file);
        let mut file = File::create(t.mount_point(other).join("small")).unwrap();
        (0..4).try_for_each(|_| file.write_all(&chunk)).and_then(|()| file.sync_all()).unwrap();
        assert!(t.status(other).unwrap().used_bytes >= 4 * MIB);
        drop(file);
        t.finish();
    }

    #[test]
    fn volumes_grow_keeping_their_data_and_never_shrink() {
        let Some(t) = TestStore::new() else { return };
        let id = Uuid::new_v4();
        let mount_point = t.ensure(id, 48 * MIB, TENANT_UID).unwrap().mount_point;
        fs::write(mount_point.join("marker"), "kept").unwrap();
        let before = total(&t, id);

        let err = format!("{:#}", t.ensure(id, 32 * MIB, TENANT_UID).unwrap_err());
        assert!(err.contains("never shrink") && err.contains("48.0 MiB") && err.contains("32.0 MiB"), "{err}");
        assert_eq!((fs::metadata(t.image_path(id)).unwrap().len(), total(&t, id)), (48 * MIB, before));

        // Online, while mounted: the kernel lets only CAP_SYS_RESOURCE grow a mounted ext4 (the agent's systemd
        // unit has it; some sandboxes that run these tests drop it).
        let status = fs::read_to_string("/proc/self/status").unwrap();
        let caps = status.lines().find_map(|l| l.strip_prefix("CapEff:")).unwrap();
        let resource = u64::from_str_radix(caps.trim(), 16).unwrap() & (1 << 24) != 0;
        match t.ensure(id, 80 * MIB, TENANT_UID) {
            Ok(status) => {
                assert!(resource);
                assert_eq!(status.size_bytes, 80 * MIB);
                assert!(total(&t, id) > before + 30 * MIB, "{} then {}", before, total(&t, id));
            }
            Err(err) => {
                let err = format!("{err:#}");
                assert!(!resource && err.contains("CAP_SYS_RESOURCE"), "{err}");
                // Nothing changed, so the next call tries again.
                assert_eq!((fs::metadata(t.image_path(id)).unwrap().len(), total(&t, id)), (48 * MIB, before));
                assert_eq!(mounts_at(&mount_point), 1);
            }
        }
        assert_eq!(fs::read_to_string(mount_point.join("marker")).unwrap(), "kept");
        let grown = total(&t, id);

        // Offline, while not mounted (after the e2fsck resize2fs wants).
        t.unmount(id).unwrap();
        let status = t.ensure(id, 128 * MIB, TENANT_UID).unwrap();
        assert_eq!(status.size_bytes, 128 * MIB);
        assert!(total(&t, id) > grown + 40 * MIB, "{grown} then {}", total(&t, id));
        assert_eq!(fs::read_to_string(mount_point.join("marker")).unwrap(), "kept");
        t.finish();
    }

    #[test]
    fn setuid_files_and_device_nodes_in_a_volume_give_nothing() {
        let Some(t) = TestStore::new() else { return };
        let id = Uuid::new_v4();
        let mount_point = t.ensure(id, 32 * MIB, TENANT_UID).unwrap().mount_point;
        let mount = mount_at(&mount_point).unwrap().unwrap();
        let options: Vec<&str> = mount.options.split(',').collect();
        assert!(options.contains(&"nosuid") && options.contains(&"nodev"), "{}", mount.options);

        // A setuid-root copy of `id` runs as whoever runs it.
        let id_program = find_tool("id", "coreutils").unwrap();
        let setuid = mount_point.join("id");
        fs::copy(&id_program, &setuid).unwrap();
        fs::set_permissions(&setuid, fs::Permissions::from_mode(0o4755)).unwrap();
        let meta = fs::metadata(&setuid).unwrap();
        assert_eq!((meta.uid(), meta.mode() & 0o7777), (0, 0o4755));
        if let Ok(setpriv) = find_tool("setpriv", "util-linux") {
            let output = Command::new(setpriv)
                .args(["--reuid=1000", "--regid=1000", "--clear-groups"])
                .arg(&setuid)
                .arg("-u")
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "1000", "{output:?}");
        }

        // /dev/null's numbers: the node is made, but cannot be opened.
        let mknod = find_tool("mknod", "coreutils").unwrap();
        let node = mount_point.join("null");
        let output = Command::new(mknod).arg(&node).args(["c", "1", "3"]).output().unwrap();
        assert!(output.status.success(), "{output:?}");
        let err = OpenOptions::new().write(true).open(&node).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EACCES), "{err}");
        t.finish();
    }

    #[test]
    fn restore_mounts_every_image_again_and_removes_unfinished_ones() {
        let Some(t) = TestStore::new() else { return };
        let mut ids = vec![Uuid::new_v4(), Uuid::new_v4()];
        ids.sort();
        for id in &ids {
            let status = t.ensure(*id, 32 * MIB, TENANT_UID).unwrap();
            fs::write(status.mount_point.join("marker"), id.to_string()).unwrap();
        }
        // As after an agent restart (its mount namespace gone), with a crash's leftovers and a stranger's file.
        for id in &ids {
            t.unmount(*id).unwrap();
            assert!(!t.mount_point(*id).exists());
        }
        let temp = t.store.images.join(format!("{TEMP_PREFIX}{}-0123", Uuid::new_v4()));
        fs::write(&temp, "half made").unwrap();
        let stranger = t.store.images.join("notes.txt");
        fs::write(&stranger, "not an image").unwrap();
        fs::write(t.store.images.join(format!("{}.img", ids[0].simple())), "not named as the store does").unwrap();

        assert_eq!(t.restore().unwrap(), ids);
        assert!(!temp.exists() && stranger.exists());
        for id in &ids {
            assert_eq!(fs::read_to_string(t.mount_point(*id).join("marker")).unwrap(), id.to_string());
        }
        assert_eq!(t.restore().unwrap(), ids, "again: nothing to do");
        assert!(ids.iter().all(|id| mounts_at(&t.mount_point(*id)) == 1));
        assert_eq!(t.list(), ids);
        t.finish();
    }

    #[test]
    fn a_pool_store_guards_against_a_second_host_and_restores_only_what_this_host_held() {
        let Some(t) = TestStore::of(StoreKind::Pool) else { return };
        let (held, released) = (Uuid::new_v4(), Uuid::new_v4());
        for id in [held, released] {
            let status = t.ensure(id, 32 * MIB, TENANT_UID).unwrap();
            fs::write(status.mount_point.join("marker"), id.to_string()).unwrap();
        }
        // ext4's multi-mount protection: INCOMPAT_MMP among the superblock's incompatible features.
        let mut features = [0u8; 4];
        let mut image = File::open(t.image_path(held)).unwrap();
        image.seek(SeekFrom::Start(1024 + 0x60)).unwrap();
        image.read_exact(&mut features).unwrap();
        assert_ne!(u32::from_le_bytes(features) & 0x100, 0);

        // This host lets one go; then its mount namespace goes away (its mounts with it, its mount points stay).
        t.unmount(released).unwrap();
        t.store.run("umount", [t.mount_point(held)]).unwrap();
        // Another host is making an image now; this one's crash left one long ago.
        let fresh = t.store.images.join(format!("{TEMP_PREFIX}{}-fresh", Uuid::new_v4()));
        let stale = t.store.images.join(format!("{TEMP_PREFIX}{}-stale", Uuid::new_v4()));
        fs::write(&fresh, "").unwrap();
        let old = std::time::SystemTime::now() - 2 * POOL_TEMP_STALE;
        File::create(&stale).unwrap().set_modified(old).unwrap();

        assert_eq!(t.restore().unwrap(), vec![held]);
        assert!(fresh.exists() && !stale.exists());
        assert_eq!(fs::read_to_string(t.mount_point(held).join("marker")).unwrap(), held.to_string());
        assert!(mounts_at(&t.mount_point(released)) == 0 && !t.mount_point(released).exists());
        let mut both = vec![held, released];
        both.sort();
        assert_eq!(t.list(), both);

        // Grown offline: e2fsck and resize2fs work with mmp on.
        assert_eq!(t.ensure(released, 64 * MIB, TENANT_UID).unwrap().size_bytes, 64 * MIB);
        assert_eq!(fs::read_to_string(t.mount_point(released).join("marker")).unwrap(), released.to_string());
        t.finish();
    }

    #[test]
    fn destroy_deletes_the_data_but_not_while_the_volume_is_in_use() {
        let Some(t) = TestStore::new() else { return };
        let id = Uuid::new_v4();
        let mount_point = t.ensure(id, 32 * MIB, TENANT_UID).unwrap().mount_point;
        fs::write(mount_point.join("marker"), "secret").unwrap();

        let open = File::open(mount_point.join("marker")).unwrap();
        let err = format!("{:#}", t.destroy(id).unwrap_err());
        assert!(err.contains(&format!("volume {id} is in use")), "{err}");
        assert!(t.image_path(id).exists() && mounts_at(&mount_point) == 1);
        drop(open);

        t.destroy(id).unwrap();
        assert!(!t.image_path(id).exists() && !mount_point.exists() && mounts_at(&mount_point) == 0);
        assert_eq!(t.list(), Vec::<Uuid>::new());
        t.destroy(id).unwrap();

        // The same id again is a new, empty filesystem.
        t.ensure(id, 32 * MIB, TENANT_UID).unwrap();
        assert!(!mount_point.join("marker").exists());
        let names: Vec<OsString> = fs::read_dir(&mount_point).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![OsString::from("lost+found")]);
        t.finish();
    }

    #[test]
    fn a_volume_larger_than_the_store_is_refused_and_leaves_nothing() {
        let Some(t) = TestStore::new() else { return };
        let id = Uuid::new_v4();
        let space = t.space().unwrap();
        assert!(space.total_bytes >= space.free_bytes && space.free_bytes > 0, "{space:?}");
        let err = format!("{:#}", t.ensure(id, space.free_bytes + (1 << 30), TENANT_UID).unwrap_err());
        assert!(err.contains("the store has") && err.contains("GiB free, the volume needs"), "{err}");
        let err = format!("{:#}", t.ensure(id, MIN_SIZE_BYTES - 1, TENANT_UID).unwrap_err());
        assert!(err.contains("too small"), "{err}");
        assert_eq!(fs::read_dir(&t.store.images).unwrap().count(), 0);
        assert!(!t.mount_point(id).exists());
        t.finish();
    }

    #[test]
    fn image_names_and_mountinfo_are_read_strictly() {
        let id = Uuid::new_v4();
        assert_eq!(volume_id(OsStr::new(&format!("{id}.img"))), Some(id));
        for name in [format!("{}.img", id.simple()), format!("{}.img", id.to_string().to_uppercase()), format!("{id}")]
        {
            assert_eq!(volume_id(OsStr::new(&name)), None, "{name}");
        }
        let text = "36 35 98:0 / /mnt/a\\040b rw,nosuid,nodev shared:1 - ext4 /dev/loop3 rw\n\
                    37 35 98:0 / /mnt/c rw master:2 - ext4 /dev/loop4 rw,errors=continue\n";
        let mounts = parse_mountinfo(text);
        assert_eq!(
            mounts[0],
            Mount { mount_point: "/mnt/a b".into(), options: "rw,nosuid,nodev".into(), source: "/dev/loop3".into() }
        );
        assert_eq!((mounts[1].mount_point.as_path(), mounts[1].source.as_str()), (Path::new("/mnt/c"), "/dev/loop4"));
        assert_eq!(unescape("a\\134b\\01"), PathBuf::from("a\\b\\01"));
        assert_eq!((human(48 * MIB), human(3 << 30)), ("48.0 MiB".to_owned(), "3.0 GiB".to_owned()));
        let err = find_tool("mkfs.gpuplane-none", "e2fsprogs").unwrap_err().to_string();
        assert!(err.contains("`mkfs.gpuplane-none`") && err.ends_with("install the Debian package e2fsprogs"), "{err}");
    }
}
