//! The read-only model cache this host offers its leases (`--model-cache DIR`, [`gpuplane_protocol::model_cache`]):
//! filled by an operator ([`fill`], `gpuplane-agent model-cache fill`), listed for the heartbeat
//! ([`cached_models`]). Pure file I/O, no async.
//!
//! The layout is huggingface_hub's own, so the libraries in a lease (`HF_HOME=/models`) find a cached model
//! without downloading it:
//!
//! ```text
//! DIR/                                        0755: jobs run as other uids and read everything here
//!   hub/models--<org>--<name>/
//!     blobs/<sha256>                          each file's content, once (0644)
//!     snapshots/<revision>/<path>             a relative link to ../../blobs/<sha256> (one more ../ per
//!                                             directory of <path>)
//!     refs/main                               <revision>, no newline
//!   modules/__init__.py                       transformers makes HF_HOME/modules and this file at import; on
//!                                             a read-only mount they must be there already
//! ```
//!
//! `<revision>` is the first 40 hex digits of the sha256 of the snapshot's listing (its sorted `path sha256`
//! lines): filling the same content again changes nothing, changed content makes a new snapshot. A fill writes
//! the blobs first (each to a temporary file in `blobs/`, synced, renamed; a blob already there is kept), then
//! the snapshot (built under a temporary name, renamed into place), then `refs/main` (a temporary file renamed
//! over it): interrupted anywhere, it leaves the previous state usable, and a reader never sees half a snapshot.

use std::collections::BTreeSet;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use anyhow::{Context, bail, ensure};
use sha2::{Digest, Sha256};

use gpuplane_protocol::model_cache::{MAX_MODELS, is_model_id, model_id_of, repo_folder};

/// The hub cache inside the cache directory (`HF_HOME/hub`, huggingface_hub's `HF_HUB_CACHE`).
pub const HUB: &str = "hub";

/// Names of a fill's temporary files and directories (in `blobs/`, `snapshots/`, `refs/`). One left by an
/// interrupted fill is removed by a later fill once it is [`STALE_TEMPORARY`] old.
const TEMPORARY_PREFIX: &str = ".gpuplane-tmp-";
const STALE_TEMPORARY: Duration = Duration::from_secs(3600);

const DIR_MODE: u32 = 0o755;
const FILE_MODE: u32 = 0o644;

/// What one fill did (`gpuplane-agent model-cache fill` prints it as one JSON line).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FillReport {
    pub model_id: String,
    /// The snapshot `refs/main` now names.
    pub revision: String,
    /// Files in the snapshot.
    pub files: usize,
    /// Their total size.
    pub bytes: u64,
    /// Bytes of the blobs this fill wrote: content the cache held already is not written again.
    pub new_bytes: u64,
}

/// One file of the model being filled.
struct SourceFile {
    /// Its path in the snapshot: plain names joined by `/`.
    relative: String,
    path: PathBuf,
    sha256: String,
    size: u64,
}

/// Copy the model directory `from` (e.g. one written by `save_pretrained`) into `cache_dir` as `model_id`, in
/// the hub layout (module documentation), and make it the model's current snapshot. Takes regular files and
/// directories only, skipping names that start with `.` (`.git`, `.cache`); refuses anything else (links,
/// devices, fifos, sockets), naming it.
pub fn fill(cache_dir: &Path, model_id: &str, from: &Path) -> anyhow::Result<FillReport> {
    ensure!(
        is_model_id(model_id),
        "`{model_id}` is not a hub model id: `name` or `org/name`, each part 1-96 of letters, digits, `.`, `_`, `-` \
         (not starting with `.` or `-`, no `--`)"
    );
    let meta = fs::metadata(from).with_context(|| format!("reading {}", from.display()))?;
    ensure!(meta.is_dir(), "{} is not a directory", from.display());
    let mut listed = Vec::new();
    list_files(from, "", &mut listed)?;
    ensure!(!listed.is_empty(), "{} holds no files to cache", from.display());
    listed.sort();
    let mut files = Vec::with_capacity(listed.len());
    for (relative, path) in listed {
        check_relative(&relative).with_context(|| path.display().to_string())?;
        let (sha256, size) = hash_file(&path)?;
        files.push(SourceFile { relative, path, sha256, size });
    }
    let revision = revision(files.iter().map(|f| (f.relative.as_str(), f.sha256.as_str())));

    make_dir(cache_dir, true)?;
    let hub = cache_dir.join(HUB);
    let repo = hub.join(repo_folder(model_id));
    let (blobs, snapshots, refs) = (repo.join("blobs"), repo.join("snapshots"), repo.join("refs"));
    for dir in [&hub, &repo, &blobs, &snapshots, &refs] {
        make_dir(dir, false)?;
    }
    make_modules(cache_dir)?;
    for dir in [&blobs, &snapshots, &refs] {
        remove_stale_temporaries(dir);
    }

    let mut new_bytes = 0;
    let mut stored = BTreeSet::new();
    for file in &files {
        if stored.insert(file.sha256.as_str()) && store_blob(&blobs, file)? {
            new_bytes += file.size;
        }
    }
    sync_dir(&blobs)?;
    if !is_real_dir(&snapshots.join(&revision)) {
        make_snapshot(&snapshots, &revision, &files)?;
    }
    write_ref(&refs, &revision)?;
    Ok(FillReport {
        model_id: model_id.to_owned(),
        revision,
        files: files.len(),
        bytes: files.iter().map(|f| f.size).sum(),
        new_bytes,
    })
}

/// The models `cache_dir` holds, as hub ids, sorted, at most [`MAX_MODELS`]: each `hub/models--*` directory (not
/// a link to one) whose `refs/main` names a snapshot that is there. Anything else is ignored; a missing or
/// unreadable cache holds none.
pub fn cached_models(cache_dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(cache_dir.join(HUB)) else { return Vec::new() };
    let mut ids: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let id = model_id_of(entry.file_name().to_str()?)?;
            // The entry's own type: a link to a directory is not one.
            let is_dir = entry.file_type().ok()?.is_dir();
            (is_dir && current_revision(&entry.path()).is_some()).then_some(id)
        })
        .collect();
    ids.sort();
    ids.dedup();
    ids.truncate(MAX_MODELS);
    ids
}

/// The revision a hub-layout model directory's `refs/main` names, when that snapshot is there.
pub fn current_revision(repo: &Path) -> Option<String> {
    let mut text = String::new();
    fs::File::open(repo.join("refs").join("main")).ok()?.take(256).read_to_string(&mut text).ok()?;
    let revision = text.trim();
    let plain = !revision.is_empty() && !revision.starts_with('.') && !revision.contains(['/', '\0']);
    (plain && is_real_dir(&repo.join("snapshots").join(revision))).then(|| revision.to_owned())
}

/// A path inside a model: plain names joined by `/` (no empty part, `.`, `..`, or control character).
pub fn check_relative(relative: &str) -> anyhow::Result<()> {
    let plain = !relative.is_empty()
        && relative
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != ".." && !part.contains(char::is_control));
    ensure!(plain, "`{relative}` is not a plain relative path");
    Ok(())
}

/// The snapshot's revision: the first 40 hex digits of the sha256 of its `path sha256` lines, in path order.
fn revision<'a>(listing: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut hasher = Sha256::new();
    for (path, sha256) in listing {
        hasher.update(path.as_bytes());
        hasher.update(b" ");
        hasher.update(sha256.as_bytes());
        hasher.update(b"\n");
    }
    let mut hex = format!("{:x}", hasher.finalize());
    hex.truncate(40);
    hex
}

/// Every regular file under `dir` with its path relative to the model (`relative` is `dir`'s). Names starting
/// with `.` are skipped; links and special files are refused.
fn list_files(dir: &Path, relative: &str, out: &mut Vec<(String, PathBuf)>) -> anyhow::Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        let path = entry.path();
        let name = entry.file_name();
        let Some(name) = name.to_str() else { bail!("{}: the name is not UTF-8", path.display()) };
        if name.starts_with('.') {
            continue;
        }
        let inner = if relative.is_empty() { name.to_owned() } else { format!("{relative}/{name}") };
        let kind = entry.file_type().with_context(|| format!("reading {}", path.display()))?;
        if kind.is_symlink() {
            bail!(
                "{} is a symbolic link: the cache takes regular files and directories only (copy what it points to)",
                path.display()
            );
        } else if kind.is_dir() {
            list_files(&path, &inner, out)?;
        } else if kind.is_file() {
            out.push((inner, path));
        } else {
            bail!("{} is not a regular file or a directory (a device, fifo or socket)", path.display());
        }
    }
    Ok(())
}

/// A file's sha256 (lower-case hex) and size.
fn hash_file(path: &Path) -> anyhow::Result<(String, u64)> {
    let mut file = fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    ensure!(file.metadata()?.is_file(), "{} is not a regular file", path.display());
    let mut hasher = Sha256::new();
    let size = copy_hashing(&mut file, &mut hasher, None).with_context(|| format!("reading {}", path.display()))?;
    Ok((format!("{:x}", hasher.finalize()), size))
}

/// Read `from` to its end into the hasher (and `to`, if given); the bytes read.
fn copy_hashing(from: &mut impl Read, hasher: &mut Sha256, mut to: Option<&mut fs::File>) -> std::io::Result<u64> {
    let mut buffer = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buffer) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        hasher.update(&buffer[..n]);
        if let Some(out) = to.as_deref_mut() {
            out.write_all(&buffer[..n])?;
        }
        total += n as u64;
    }
}

/// Put a file's content in `blobs/<sha256>` unless a blob of that name is there. Whether it wrote one.
fn store_blob(blobs: &Path, file: &SourceFile) -> anyhow::Result<bool> {
    let target = blobs.join(&file.sha256);
    if keep_existing(&target)? {
        return Ok(false);
    }
    let (tmp, mut out) = temporary_file(blobs)?;
    let copied = (|| -> anyhow::Result<()> {
        let mut from = fs::File::open(&file.path).with_context(|| format!("reading {}", file.path.display()))?;
        let mut hasher = Sha256::new();
        let size = copy_hashing(&mut from, &mut hasher, Some(&mut out))
            .with_context(|| format!("copying {} to {}", file.path.display(), tmp.display()))?;
        ensure!(
            size == file.size && format!("{:x}", hasher.finalize()) == file.sha256,
            "{} changed while it was being cached; fill again once it is complete",
            file.path.display()
        );
        out.set_permissions(fs::Permissions::from_mode(FILE_MODE))?;
        out.sync_all().with_context(|| format!("syncing {}", tmp.display()))?;
        Ok(())
    })();
    drop(out);
    if let Err(err) = copied {
        let _ = fs::remove_file(&tmp);
        return Err(err);
    }
    // Another fill of the same content may have stored it meanwhile: the blob there is kept.
    if keep_existing(&target)? {
        let _ = fs::remove_file(&tmp);
        return Ok(false);
    }
    fs::rename(&tmp, &target).with_context(|| format!("renaming {} to {}", tmp.display(), target.display()))?;
    Ok(true)
}

/// Whether a blob of this name is there already (made readable by everyone if it was not).
fn keep_existing(blob: &Path) -> anyhow::Result<bool> {
    match fs::symlink_metadata(blob) {
        Ok(meta) if meta.is_file() => {
            if meta.permissions().mode() & 0o444 != 0o444 {
                fs::set_permissions(blob, fs::Permissions::from_mode(FILE_MODE))
                    .with_context(|| format!("making {} readable", blob.display()))?;
            }
            Ok(true)
        }
        Ok(_) => bail!("{} is in the way: not a regular file", blob.display()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(err).with_context(|| format!("reading {}", blob.display())),
    }
}

/// Build `snapshots/<revision>` under a temporary name, then rename it into place.
fn make_snapshot(snapshots: &Path, revision: &str, files: &[SourceFile]) -> anyhow::Result<()> {
    let tmp = temporary_name(snapshots);
    fs::create_dir(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let built = (|| -> anyhow::Result<()> {
        set_mode(&tmp, DIR_MODE)?;
        let mut dirs = vec![tmp.clone()];
        for file in files {
            let relative = Path::new(&file.relative);
            let depth = file.relative.matches('/').count();
            if let Some(parent) = relative.parent() {
                let mut dir = tmp.clone();
                for part in parent.components() {
                    dir.push(part);
                    if !dir.is_dir() {
                        fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
                        set_mode(&dir, DIR_MODE)?;
                        dirs.push(dir.clone());
                    }
                }
            }
            let target = format!("{}../../blobs/{}", "../".repeat(depth), file.sha256);
            let link = tmp.join(relative);
            std::os::unix::fs::symlink(&target, &link).with_context(|| format!("creating {}", link.display()))?;
        }
        for dir in &dirs {
            sync_dir(dir)?;
        }
        Ok(())
    })();
    if let Err(err) = built {
        let _ = fs::remove_dir_all(&tmp);
        return Err(err);
    }
    let snapshot = snapshots.join(revision);
    match fs::rename(&tmp, &snapshot) {
        Ok(()) => sync_dir(snapshots),
        // Another fill of the same content made it meanwhile.
        Err(_) if is_real_dir(&snapshot) => {
            let _ = fs::remove_dir_all(&tmp);
            Ok(())
        }
        Err(err) => {
            let _ = fs::remove_dir_all(&tmp);
            Err(err).with_context(|| format!("renaming {} to {}", tmp.display(), snapshot.display()))
        }
    }
}

/// Point `refs/main` at `revision`: a temporary file renamed over it (unchanged when it names it already).
fn write_ref(refs: &Path, revision: &str) -> anyhow::Result<()> {
    let main = refs.join("main");
    if fs::read_to_string(&main).is_ok_and(|current| current == revision) {
        return Ok(());
    }
    let (tmp, mut out) = temporary_file(refs)?;
    let written = (|| -> std::io::Result<()> {
        out.write_all(revision.as_bytes())?;
        out.set_permissions(fs::Permissions::from_mode(FILE_MODE))?;
        out.sync_all()
    })();
    drop(out);
    if let Err(err) = written.and_then(|()| fs::rename(&tmp, &main)) {
        let _ = fs::remove_file(&tmp);
        return Err(err).with_context(|| format!("writing {}", main.display()));
    }
    sync_dir(refs)
}

/// `modules/__init__.py`, empty, unless it is there.
fn make_modules(cache_dir: &Path) -> anyhow::Result<()> {
    let modules = cache_dir.join("modules");
    make_dir(&modules, false)?;
    let init = modules.join("__init__.py");
    if fs::symlink_metadata(&init).is_err() {
        fs::File::create(&init).with_context(|| format!("creating {}", init.display()))?;
        set_mode(&init, FILE_MODE)?;
    }
    Ok(())
}

/// Create a directory of the cache (0755) unless it is there; one that is there but others cannot enter gets
/// 0755 too. Only `cache_dir` itself (`follow`) may be a link to a directory.
fn make_dir(dir: &Path, follow: bool) -> anyhow::Result<()> {
    let found = if follow { fs::metadata(dir) } else { fs::symlink_metadata(dir) };
    match found {
        Ok(meta) if meta.is_dir() => {
            if meta.permissions().mode() & 0o555 != 0o555 {
                set_mode(dir, DIR_MODE)?;
            }
            Ok(())
        }
        Ok(_) => bail!("{} is in the way: not a directory", dir.display()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            fs::DirBuilder::new()
                .recursive(follow)
                .create(dir)
                .with_context(|| format!("creating {}", dir.display()))?;
            set_mode(dir, DIR_MODE)
        }
        Err(err) => Err(err).with_context(|| format!("reading {}", dir.display())),
    }
}

fn set_mode(path: &Path, mode: u32) -> anyhow::Result<()> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting the mode of {} to {mode:o}", path.display()))
}

fn is_real_dir(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir())
}

/// Flush a directory's entries (renames, links) to the disk.
fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    fs::File::open(dir).and_then(|d| d.sync_all()).with_context(|| format!("syncing {}", dir.display()))
}

/// A fresh temporary name in `dir`.
fn temporary_name(dir: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!("{TEMPORARY_PREFIX}{}-{nanos}-{n}", std::process::id()))
}

/// A new temporary file in `dir`, created exclusively.
fn temporary_file(dir: &Path) -> anyhow::Result<(PathBuf, fs::File)> {
    let path = temporary_name(dir);
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    Ok((path, file))
}

/// Remove what an interrupted fill left in `dir` (temporaries untouched for [`STALE_TEMPORARY`]).
fn remove_stale_temporaries(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.filter_map(Result::ok) {
        if !entry.file_name().to_string_lossy().starts_with(TEMPORARY_PREFIX) {
            continue;
        }
        let Ok(meta) = fs::symlink_metadata(entry.path()) else { continue };
        let age = meta.modified().ok().and_then(|m| m.elapsed().ok()).unwrap_or_default();
        if age >= STALE_TEMPORARY {
            let _ = if meta.is_dir() { fs::remove_dir_all(entry.path()) } else { fs::remove_file(entry.path()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gpuplane-model-cache-{name}-{}", uuid::Uuid::new_v4()));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn write(path: &Path, content: &[u8]) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    fn sha(content: &[u8]) -> String {
        format!("{:x}", Sha256::digest(content))
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    /// A model as `save_pretrained` writes it, with a subdirectory, a duplicate and hidden entries.
    fn saved_model(dir: &Path) {
        write(&dir.join("config.json"), b"{\"model_type\": \"gpt2\"}");
        write(&dir.join("model.safetensors"), &[7u8; 3000]);
        write(&dir.join("tokenizer.json"), b"{}");
        write(&dir.join("generation_config.json"), b"{}");
        write(&dir.join("sub/extra.txt"), b"extra");
        write(&dir.join("sub/deeper/x.bin"), b"deep");
        write(&dir.join(".git/HEAD"), b"ref: refs/heads/main");
        write(&dir.join(".cache/huggingface/x.lock"), b"");
    }

    fn snapshot_names(repo: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(repo.join("snapshots"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn temporaries(repo: &Path) -> Vec<PathBuf> {
        ["blobs", "snapshots", "refs"]
            .iter()
            .flat_map(|d| fs::read_dir(repo.join(d)).unwrap().map(|e| e.unwrap().path()))
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(TEMPORARY_PREFIX))
            .collect()
    }

    #[test]
    fn a_fill_writes_the_hub_layout() {
        let root = scratch("layout");
        let (from, cache) = (root.join("saved"), root.join("cache"));
        saved_model(&from);
        let report = fill(&cache, "org/tiny-model", &from).unwrap();
        assert_eq!(report.model_id, "org/tiny-model");
        assert_eq!(report.files, 6, "hidden entries are skipped: {report:?}");
        let config_json = b"{\"model_type\": \"gpt2\"}";
        assert_eq!(report.bytes, (config_json.len() + 3000 + 2 + 2 + 5 + 4) as u64);
        assert_eq!(report.new_bytes, report.bytes - 2, "two files of the same content: one blob");
        assert_eq!(report.revision.len(), 40);
        assert!(report.revision.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));

        let repo = cache.join("hub/models--org--tiny-model");
        assert_eq!(fs::read_to_string(repo.join("refs/main")).unwrap(), report.revision, "no newline");
        let snapshot = repo.join("snapshots").join(&report.revision);
        let config = snapshot.join("config.json");
        assert!(fs::symlink_metadata(&config).unwrap().file_type().is_symlink());
        let config_sha = sha(b"{\"model_type\": \"gpt2\"}");
        assert_eq!(fs::read_link(&config).unwrap(), PathBuf::from(format!("../../blobs/{config_sha}")));
        assert_eq!(fs::read(&config).unwrap(), b"{\"model_type\": \"gpt2\"}");
        assert_eq!(
            fs::read_link(snapshot.join("sub/extra.txt")).unwrap(),
            PathBuf::from(format!("../../../blobs/{}", sha(b"extra")))
        );
        assert_eq!(
            fs::read_link(snapshot.join("sub/deeper/x.bin")).unwrap(),
            PathBuf::from(format!("../../../../blobs/{}", sha(b"deep")))
        );
        assert_eq!(fs::read(snapshot.join("sub/deeper/x.bin")).unwrap(), b"deep");
        assert_eq!(fs::read(snapshot.join("model.safetensors")).unwrap(), [7u8; 3000]);
        assert!(!snapshot.join(".git").exists() && !snapshot.join(".cache").exists());
        assert_eq!(mode(&repo.join("blobs").join(&config_sha)), 0o644);
        assert_eq!(mode(&repo.join("refs/main")), 0o644);
        for dir in [&cache, &cache.join("hub"), &repo, &repo.join("blobs"), &snapshot, &snapshot.join("sub/deeper")] {
            assert_eq!(mode(dir), 0o755, "{}", dir.display());
        }
        assert!(fs::metadata(cache.join("modules/__init__.py")).unwrap().is_file());
        assert_eq!(mode(&cache.join("modules/__init__.py")), 0o644);
        assert_eq!(current_revision(&repo).as_deref(), Some(report.revision.as_str()));
        assert!(temporaries(&repo).is_empty(), "{:?}", temporaries(&repo));
        assert_eq!(cached_models(&cache), ["org/tiny-model"]);
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn the_same_content_is_the_same_revision_and_a_change_makes_a_new_one() {
        let root = scratch("revisions");
        let (from, cache) = (root.join("saved"), root.join("cache"));
        saved_model(&from);
        let first = fill(&cache, "gpt2", &from).unwrap();
        let again = fill(&cache, "gpt2", &from).unwrap();
        assert_eq!(again.revision, first.revision);
        assert_eq!(again.new_bytes, 0, "every blob was there");
        let repo = cache.join("hub/models--gpt2");
        assert_eq!(snapshot_names(&repo), std::slice::from_ref(&first.revision));
        // The same content elsewhere is the same revision too: it depends on paths and content only.
        let copy = root.join("copy");
        saved_model(&copy);
        fs::remove_dir_all(copy.join(".git")).unwrap();
        assert_eq!(fill(&cache, "gpt2", &copy).unwrap().revision, first.revision);

        write(&from.join("sub/extra.txt"), b"changed");
        let changed = fill(&cache, "gpt2", &from).unwrap();
        assert_ne!(changed.revision, first.revision);
        assert_eq!(changed.new_bytes, 7, "only the changed file is new");
        assert_eq!(fs::read_to_string(repo.join("refs/main")).unwrap(), changed.revision);
        let mut both = vec![first.revision.clone(), changed.revision.clone()];
        both.sort();
        assert_eq!(snapshot_names(&repo), both, "the previous snapshot stays");
        let snapshot = repo.join("snapshots").join(&changed.revision);
        assert_eq!(fs::read(snapshot.join("sub/extra.txt")).unwrap(), b"changed");
        // A renamed file is another listing: another revision.
        fs::rename(from.join("tokenizer.json"), from.join("tokenizer2.json")).unwrap();
        assert_ne!(fill(&cache, "gpt2", &from).unwrap().revision, changed.revision);
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn an_existing_blob_is_kept_and_stale_temporaries_go() {
        let root = scratch("existing");
        let (from, cache) = (root.join("saved"), root.join("cache"));
        write(&from.join("config.json"), b"{}");
        write(&from.join("weights.bin"), b"0123456789");
        let blobs = cache.join("hub/models--org--m/blobs");
        fs::create_dir_all(&blobs).unwrap();
        // As huggingface-cli under a strict umask may have left it: content right, mode 0600.
        write(&blobs.join(sha(b"0123456789")), b"0123456789");
        fs::set_permissions(blobs.join(sha(b"0123456789")), fs::Permissions::from_mode(0o600)).unwrap();
        let stale = blobs.join(format!("{TEMPORARY_PREFIX}1-2-3"));
        write(&stale, b"half a blob");
        let old = SystemTime::now() - Duration::from_secs(2 * 3600);
        fs::File::options().write(true).open(&stale).unwrap().set_modified(old).unwrap();
        let fresh = blobs.join(format!("{TEMPORARY_PREFIX}4-5-6"));
        write(&fresh, b"another fill's, still being written");
        let report = fill(&cache, "org/m", &from).unwrap();
        assert_eq!((report.bytes, report.new_bytes), (12, 2));
        assert_eq!(mode(&blobs.join(sha(b"0123456789"))), 0o644, "made readable by jobs");
        assert!(!stale.exists(), "an interrupted fill's leftover is removed");
        assert!(fresh.exists(), "a recent one may be another fill's");
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn only_models_with_a_current_snapshot_are_listed() {
        let root = scratch("list");
        let (from, cache) = (root.join("saved"), root.join("cache"));
        assert!(cached_models(&cache).is_empty(), "no cache yet");
        write(&from.join("config.json"), b"{}");
        fill(&cache, "b-org/model", &from).unwrap();
        fill(&cache, "a-model", &from).unwrap();
        let hub = cache.join("hub");
        // A link to a model's folder is not followed.
        std::os::unix::fs::symlink(hub.join("models--a-model"), hub.join("models--linked--model")).unwrap();
        // A ref naming a snapshot that is not there, no ref at all, a file, other kinds of repository.
        write(&hub.join("models--no--snapshot/refs/main"), b"0123456789012345678901234567890123456789");
        fs::create_dir_all(hub.join("models--no--ref/snapshots/x")).unwrap();
        write(&hub.join("models--a--file"), b"");
        fs::create_dir_all(hub.join("datasets--x--y/refs")).unwrap();
        fs::create_dir_all(hub.join("models--..--x")).unwrap();
        write(&hub.join("models--bad--ref/refs/main"), b"../../../etc");
        // A ref written by hand with a newline still counts.
        let rev = current_revision(&hub.join("models--a-model")).unwrap();
        write(&hub.join("models--a-model/refs/main"), format!("{rev}\n").as_bytes());
        assert_eq!(cached_models(&cache), ["a-model", "b-org/model"]);
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn links_special_files_bad_ids_and_non_directories_are_refused() {
        let root = scratch("refusals");
        let (from, cache) = (root.join("saved"), root.join("cache"));
        write(&from.join("config.json"), b"{}");
        std::os::unix::fs::symlink("/etc/passwd", from.join("sub-link")).unwrap();
        let err = format!("{:#}", fill(&cache, "org/m", &from).unwrap_err());
        assert!(err.contains("symbolic link") && err.contains(&from.join("sub-link").display().to_string()), "{err}");
        fs::remove_file(from.join("sub-link")).unwrap();
        fs::create_dir_all(from.join("nested")).unwrap();
        std::os::unix::fs::symlink("../config.json", from.join("nested/linked.json")).unwrap();
        assert!(format!("{:#}", fill(&cache, "org/m", &from).unwrap_err()).contains("nested/linked.json"));
        fs::remove_file(from.join("nested/linked.json")).unwrap();
        let _socket = std::os::unix::net::UnixListener::bind(from.join("nested/sock")).unwrap();
        let err = format!("{:#}", fill(&cache, "org/m", &from).unwrap_err());
        assert!(err.contains("not a regular file or a directory") && err.contains("nested/sock"), "{err}");
        fs::remove_file(from.join("nested/sock")).unwrap();
        assert!(!cache.exists(), "nothing was written for a refused fill");

        for bad in ["../x", "a/b/c", "", "org/..", "/abs", "a--b/c"] {
            let err = format!("{:#}", fill(&cache, bad, &from).unwrap_err());
            assert!(err.contains("not a hub model id"), "{bad:?}: {err}");
        }
        let err = format!("{:#}", fill(&cache, "org/m", &from.join("config.json")).unwrap_err());
        assert!(err.contains("is not a directory"), "{err}");
        assert!(fill(&cache, "org/m", &root.join("missing")).is_err());
        let empty = root.join("empty");
        fs::create_dir_all(empty.join(".git")).unwrap();
        assert!(format!("{:#}", fill(&cache, "org/m", &empty).unwrap_err()).contains("no files"));
        assert!(!cache.exists());
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn paths_inside_a_model_are_plain() {
        for ok in ["config.json", "sub/x.bin", "a b/c"] {
            assert!(check_relative(ok).is_ok(), "{ok}");
        }
        for bad in ["", "..", "../x", "a/../b", "./a", "/abs", "a//b", "a/", "a\nb"] {
            assert!(check_relative(bad).unwrap_err().to_string().contains("plain relative path"), "{bad:?}");
        }
    }
}
