//! A job's uploaded working directory (docs/uploads.md): a gzip-compressed tar archive named by its digest
//! ([`digest_of`], [`is_digest`]), checked by the service
//! when it is uploaded ([`inspect`]) and again by the agent that unpacks it into the job's fresh directory
//! ([`unpack`]). One set of rules for both:
//!
//! - only regular files and directories: no symbolic or hard links, no device files, FIFOs or sockets;
//! - every path relative and plain (no `/` at the start, no `..`, nothing but names), at most 4,096 bytes, and
//!   each path once (a file is never replaced, nor used as a directory);
//! - at most [`Limits::max_entries`] entries and [`Limits::max_unpacked_bytes`] bytes unpacked, and at most
//!   [`Limits::max_ratio`] times the archive's own size (an archive bomb stops at the first byte past either);
//! - modes kept to read/write/execute for the owner, group and others (no set-user-id, set-group-id or sticky
//!   bit), owners ignored: everything unpacked belongs to the lease's user.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// What an upload's digest looks like: `sha256:` and 64 lowercase hex digits.
pub fn is_digest(text: &str) -> bool {
    text.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// The digest of an archive, as uploads are kept and named.
pub fn digest_of(bytes: &[u8]) -> String {
    use sha2::Digest;
    let hash = sha2::Sha256::digest(bytes);
    format!("sha256:{}", hash.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// What an archive may hold.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_entries: u64,
    pub max_unpacked_bytes: u64,
    /// Most unpacked bytes per archive byte (an archive under 1 MiB may unpack to 1 MiB whatever its ratio).
    pub max_ratio: u64,
}

/// The limits gpuplane applies.
pub const LIMITS: Limits = Limits { max_entries: 100_000, max_unpacked_bytes: 2 << 30, max_ratio: 200 };

/// What an archive holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    pub files: u64,
    pub directories: u64,
    pub unpacked_bytes: u64,
}

/// Why an archive was refused: the entry (when one is to blame) and the rule it broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub entry: Option<String>,
    pub reason: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.entry {
            Some(entry) => write!(f, "`{entry}`: {}", self.reason),
            None => f.write_str(&self.reason),
        }
    }
}

fn refuse(entry: Option<&str>, reason: impl Into<String>) -> Refusal {
    Refusal { entry: entry.map(|e| e.chars().take(200).collect()), reason: reason.into() }
}

/// Counts the bytes the decompressor gives, and stops it past the bound.
struct Bounded<R> {
    inner: R,
    read: u64,
    bound: u64,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read > self.bound {
            return Err(std::io::Error::other(BOMB));
        }
        Ok(n)
    }
}

const BOMB: &str = "unpacks to more than the limits allow";

/// One entry, checked: its plain relative path, and whether it is a directory.
struct Checked {
    path: PathBuf,
    shown: String,
    directory: bool,
    mode: u32,
}

/// Walk the archive, calling `each` for every entry that passes the rules (with its reader for a file); the first
/// entry that breaks one stops the walk.
fn walk(
    archive: &[u8],
    limits: Limits,
    mut each: impl FnMut(&Checked, &mut dyn Read) -> Result<(), Refusal>,
) -> Result<Summary, Refusal> {
    // The files' bytes and tar's own headers and padding (a kilobyte per entry at most), and no more than the
    // ratio allows.
    let bound = limits
        .max_unpacked_bytes
        .saturating_add(limits.max_entries.saturating_mul(1024))
        .min((archive.len() as u64).saturating_mul(limits.max_ratio).max(1 << 20));
    let decoder = Bounded { inner: flate2::read::GzDecoder::new(archive), read: 0, bound };
    let mut tar = tar::Archive::new(decoder);
    let entries = tar.entries().map_err(|err| refuse(None, format!("not a gzip-compressed tar archive: {err}")))?;
    let mut summary = Summary::default();
    // Every path seen, and whether it is a directory.
    let mut seen: BTreeMap<PathBuf, bool> = BTreeMap::new();
    let mut count = 0u64;
    for entry in entries {
        let mut entry = entry.map_err(|err| broken(&err))?;
        count += 1;
        if count > limits.max_entries {
            return Err(refuse(None, format!("more than {} entries", limits.max_entries)));
        }
        let raw = entry.path_bytes().into_owned();
        let shown = String::from_utf8_lossy(&raw).into_owned();
        let kind = entry.header().entry_type();
        let directory = match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous => false,
            tar::EntryType::Directory => true,
            tar::EntryType::Symlink | tar::EntryType::Link => {
                return Err(refuse(Some(&shown), "links are not allowed (only files and directories)"));
            }
            tar::EntryType::Char | tar::EntryType::Block | tar::EntryType::Fifo => {
                return Err(refuse(
                    Some(&shown),
                    "device files and FIFOs are not allowed (only files and directories)",
                ));
            }
            other => return Err(refuse(Some(&shown), format!("entries of type {other:?} are not allowed"))),
        };
        let path = plain_path(&raw).ok_or_else(|| {
            refuse(Some(&shown), "not a plain relative path (no leading `/`, no `..`, at most 4096 bytes)")
        })?;
        if path.as_os_str().is_empty() {
            continue; // `./` itself
        }
        // Each parent must be a directory, or not yet seen (made as one); the path itself must be new.
        for parent in path.ancestors().skip(1).filter(|p| !p.as_os_str().is_empty()) {
            match seen.get(parent) {
                Some(false) => return Err(refuse(Some(&shown), "a path under a file")),
                Some(true) => {}
                None => {
                    seen.insert(parent.to_owned(), true);
                }
            }
        }
        match seen.get(&path) {
            Some(true) if directory => continue,
            Some(_) => return Err(refuse(Some(&shown), "the archive holds this path twice")),
            None => {}
        }
        seen.insert(path.clone(), directory);
        let size = entry.header().size().map_err(|err| broken(&err))?;
        summary.unpacked_bytes += if directory { 0 } else { size };
        if summary.unpacked_bytes > limits.max_unpacked_bytes {
            return Err(refuse(None, format!("unpacks to more than {} bytes", limits.max_unpacked_bytes)));
        }
        if directory {
            summary.directories += 1;
        } else {
            summary.files += 1;
        }
        let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
        let checked = Checked { path, shown, directory, mode };
        each(&checked, &mut entry)?;
    }
    Ok(summary)
}

fn broken(err: &std::io::Error) -> Refusal {
    if err.to_string().contains(BOMB) || err.get_ref().is_some_and(|e| e.to_string().contains(BOMB)) {
        refuse(None, BOMB)
    } else {
        refuse(None, format!("not a well-formed gzip-compressed tar archive: {err}"))
    }
}

/// The path as plain names, or None when it is absolute, climbs (`..`) or is too long. `./a` is `a`.
fn plain_path(raw: &[u8]) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    if raw.len() > 4096 || raw.contains(&0) {
        return None;
    }
    let path = Path::new(std::ffi::OsStr::from_bytes(raw));
    let mut plain = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(name) => plain.push(name),
            Component::CurDir => {}
            Component::RootDir | Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    Some(plain)
}

/// Check an archive against the rules without writing anything.
pub fn inspect(archive: &[u8], limits: Limits) -> Result<Summary, Refusal> {
    walk(archive, limits, |_, reader| {
        std::io::copy(reader, &mut std::io::sink()).map(|_| ()).map_err(|err| broken(&err))
    })
}

/// Unpack an archive into `dir`, an empty directory the agent made (no path in it is the tenant's): every path
/// is created anew (an existing one is an error, never written through); returns what it wrote, for the caller
/// to give to the lease's user. On a refusal the caller removes `dir`.
pub fn unpack(archive: &[u8], dir: &Path, limits: Limits) -> Result<(Summary, Vec<PathBuf>), Refusal> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let mut created = Vec::new();
    let summary = walk(archive, limits, |entry, reader| {
        let target = dir.join(&entry.path);
        let io = |err: std::io::Error| refuse(Some(&entry.shown), format!("could not be written: {err}"));
        // Parents first (an archive may list a file before its directory).
        let mut parent = dir.to_owned();
        for name in entry.path.parent().into_iter().flat_map(Path::components) {
            parent.push(name);
            match std::fs::symlink_metadata(&parent) {
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => return Err(refuse(Some(&entry.shown), "a path under a file")),
                Err(_) => {
                    std::fs::DirBuilder::new().mode(0o755).create(&parent).map_err(io)?;
                    created.push(parent.clone());
                }
            }
        }
        if entry.directory {
            if std::fs::symlink_metadata(&target).is_err() {
                std::fs::DirBuilder::new().mode(0o755).create(&target).map_err(io)?;
                created.push(target.clone());
            }
            // Its own mode, with the owner always able to enter and write.
            std::fs::set_permissions(&target, std::os::unix::fs::PermissionsExt::from_mode(entry.mode | 0o700))
                .map_err(io)?;
            return Ok(());
        }
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(entry.mode | 0o600)
            .open(&target)
            .map_err(io)?;
        created.push(target.clone());
        std::io::copy(reader, &mut out)
            .map_err(|err| if err.to_string().contains(BOMB) { refuse(None, BOMB) } else { io(err) })?;
        Ok(())
    })?;
    Ok((summary, created))
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A gzip'd tar of `entries`: (path, kind, content), kind `f` file, `d` directory, `l` symlink to content,
    /// `h` hard link to content, `c` character device. Paths are written raw, as a hostile client would.
    pub fn archive(entries: &[(&str, char, &str)]) -> Vec<u8> {
        let mut tar = tar::Builder::new(Vec::new());
        for (path, kind, content) in entries {
            let mut header = tar::Header::new_gnu();
            let bytes = path.as_bytes();
            header.as_old_mut().name[..bytes.len()].copy_from_slice(bytes);
            header.set_mode(0o644);
            let body: &[u8] = match kind {
                'f' => {
                    header.set_entry_type(tar::EntryType::Regular);
                    header.set_size(content.len() as u64);
                    content.as_bytes()
                }
                'd' => {
                    header.set_entry_type(tar::EntryType::Directory);
                    header.set_size(0);
                    b""
                }
                'l' | 'h' => {
                    header.set_entry_type(if *kind == 'l' { tar::EntryType::Symlink } else { tar::EntryType::Link });
                    header.set_link_name(content).unwrap();
                    header.set_size(0);
                    b""
                }
                _ => {
                    header.set_entry_type(tar::EntryType::Char);
                    header.set_size(0);
                    b""
                }
            };
            header.set_cksum();
            tar.append(&header, body).unwrap();
        }
        gzip(&tar.into_inner().unwrap())
    }

    pub fn gzip(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(bytes).unwrap();
        gz.finish().unwrap()
    }

    /// A tar of one file of `size` zero bytes, gzip'd: a bomb when large.
    pub fn zeros(size: u64) -> Vec<u8> {
        use std::io::Write;
        let mut header = tar::Header::new_gnu();
        header.set_path("zeros").unwrap();
        header.set_size(size);
        header.set_mode(0o644);
        header.set_cksum();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(header.as_bytes()).unwrap();
        let chunk = vec![0u8; 1 << 20];
        let mut left = size;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            gz.write_all(&chunk[..n]).unwrap();
            left -= n as u64;
        }
        gz.write_all(&[0u8; 1024 + 512]).unwrap();
        gz.finish().unwrap()
    }

    #[test]
    fn digests_are_sha256_in_lowercase_hex() {
        let digest = digest_of(b"abc");
        assert_eq!(digest, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert!(is_digest(&digest));
        for bad in [
            "sha256:",
            "sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
            "md5:00",
            &digest[..70],
        ] {
            assert!(!is_digest(bad), "{bad}");
        }
    }

    #[test]
    fn a_plain_tree_is_accepted_and_unpacked_with_its_modes() {
        let bytes =
            archive(&[("./", 'd', ""), ("src/", 'd', ""), ("src/train.py", 'f', "print(1)\n"), ("README", 'f', "hi")]);
        let summary = inspect(&bytes, LIMITS).unwrap();
        assert_eq!(summary, Summary { files: 2, directories: 1, unpacked_bytes: 11 });
        let dir = std::env::temp_dir().join(format!("gpuplane-unpack-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir(&dir).unwrap();
        let (unpacked, created) = unpack(&bytes, &dir, LIMITS).unwrap();
        assert_eq!(unpacked, summary);
        assert_eq!(std::fs::read_to_string(dir.join("src/train.py")).unwrap(), "print(1)\n");
        assert_eq!(created.len(), 3);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn hostile_archives_are_refused_naming_the_entry() {
        for (entries, entry, words) in [
            (vec![("../escape", 'f', "x")], Some("../escape"), "plain relative path"),
            (vec![("a/../../escape", 'f', "x")], Some("a/../../escape"), "plain relative path"),
            (vec![("/etc/passwd", 'f', "x")], Some("/etc/passwd"), "plain relative path"),
            (vec![("link", 'l', "/etc")], Some("link"), "links are not allowed"),
            (vec![("hard", 'h', "/etc/shadow")], Some("hard"), "links are not allowed"),
            (vec![("tty", 'c', "")], Some("tty"), "device files"),
            (vec![("a", 'f', "1"), ("a", 'f', "2")], Some("a"), "twice"),
            (vec![("a", 'f', "1"), ("a/b", 'f', "2")], Some("a/b"), "under a file"),
        ] {
            let refusal = inspect(&archive(&entries), LIMITS).unwrap_err();
            assert_eq!(refusal.entry.as_deref(), entry, "{entries:?}");
            assert!(refusal.reason.contains(words), "{entries:?}: {refusal}");
        }
        assert!(inspect(b"not an archive", LIMITS).unwrap_err().reason.contains("gzip"));
        let many = Limits { max_entries: 3, ..LIMITS };
        let four: Vec<_> = ["a", "b", "c", "d"].iter().map(|p| (*p, 'f', "x")).collect();
        assert!(inspect(&archive(&four), many).unwrap_err().reason.contains("more than 3 entries"));
    }

    #[test]
    fn a_bomb_stops_at_the_bound_and_a_refused_unpack_writes_through_nothing() {
        // 64 MiB of zeros compress to about 64 KiB: past the 200x ratio.
        let bomb = zeros(64 << 20);
        assert!(bomb.len() < 1 << 20, "{}", bomb.len());
        let refusal = inspect(&bomb, LIMITS).unwrap_err();
        assert!(refusal.reason.contains("more than"), "{refusal}");
        // A small cap on the unpacked size, met by the header's claim before any byte is read.
        let small = Limits { max_unpacked_bytes: 1000, ..LIMITS };
        assert!(inspect(&zeros(4096), small).unwrap_err().reason.contains("more than 1000 bytes"));
        // Unpacking into a directory where a link already sits (never the case in a fresh job directory) does
        // not follow it.
        let dir = std::env::temp_dir().join(format!("gpuplane-unpack-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir(&dir).unwrap();
        let outside = dir.with_extension("outside");
        std::os::unix::fs::symlink(&outside, dir.join("planted")).unwrap();
        let refusal = unpack(&archive(&[("planted", 'f', "x")]), &dir, LIMITS).unwrap_err();
        assert!(refusal.reason.contains("could not be written"), "{refusal}");
        assert!(!outside.exists());
        let refusal = unpack(&archive(&[("planted/x", 'f', "x")]), &dir, LIMITS).unwrap_err();
        assert!(refusal.reason.contains("under a file"), "{refusal}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
