//! The agent's credential, kept in its state directory so a restarted agent attaches to the same node instead of
//! registering again.

use std::fmt;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// `<state-dir>/credential.json`.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct Credential {
    /// The service this credential belongs to (normalized by [`normalize_server`]).
    pub server: String,
    pub node_id: Uuid,
    pub pool_id: Uuid,
    pub agent_token: String,
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("server", &self.server)
            .field("node_id", &self.node_id)
            .field("pool_id", &self.pool_id)
            .field("agent_token", &"<redacted>")
            .finish()
    }
}

/// `http://host:8080/` and `http://host:8080` are the same service.
pub fn normalize_server(server: &str) -> String {
    server.trim().trim_end_matches('/').to_owned()
}

pub struct CredentialStore {
    dir: PathBuf,
}

impl CredentialStore {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The state directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join("credential.json")
    }

    /// The saved credential, if there is one for `server`. An unreadable file is reported and ignored, so a join
    /// token can still register the node afresh.
    pub fn load_for(&self, server: &str) -> anyhow::Result<Option<Credential>> {
        let path = self.path();
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(err).with_context(|| format!("reading {}", path.display())),
        };
        match serde_json::from_str::<Credential>(&text) {
            Ok(credential) if credential.server == normalize_server(server) => Ok(Some(credential)),
            Ok(credential) => {
                tracing::info!(saved = %credential.server, "the saved credential is for another server; ignoring it");
                Ok(None)
            }
            Err(err) => {
                tracing::warn!(path = %path.display(), %err, "the saved credential is unreadable; ignoring it");
                Ok(None)
            }
        }
    }

    /// Write atomically (temporary file, then rename), readable by the owner only.
    pub fn save(&self, credential: &Credential) -> anyhow::Result<()> {
        create_private_dir(&self.dir).with_context(|| format!("creating {}", self.dir.display()))?;
        let path = self.path();
        let tmp = self.dir.join("credential.json.tmp");
        let json = serde_json::to_vec_pretty(credential)?;
        write_private(&tmp, &json).with_context(|| format!("writing {}", tmp.display()))?;
        fs::rename(&tmp, &path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
        Ok(())
    }
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dir)
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(0o600);
        let mut file = options.open(path)?;
        // `mode` applies only when the file is created; a leftover temporary file keeps its old mode.
        file.set_permissions(fs::Permissions::from_mode(0o600))?;
        file.write_all(bytes)?;
        file.sync_all()
    }
    #[cfg(not(unix))]
    {
        let mut file = options.open(path)?;
        file.write_all(bytes)?;
        file.sync_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gpuplane-agent-{name}-{}", Uuid::new_v4()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    fn credential(server: &str) -> Credential {
        Credential {
            server: normalize_server(server),
            node_id: Uuid::new_v4(),
            pool_id: Uuid::new_v4(),
            agent_token: "gpa_secret".to_owned(),
        }
    }

    #[test]
    fn saves_and_loads_for_the_same_server_only() {
        let dir = temp_dir("roundtrip");
        let store = CredentialStore::new(dir.join("nested"));
        assert_eq!(store.load_for("http://a:8080").unwrap(), None);
        let saved = credential("http://a:8080/");
        store.save(&saved).unwrap();
        assert_eq!(store.load_for("http://a:8080").unwrap(), Some(saved.clone()));
        assert_eq!(store.load_for("http://a:8080/").unwrap(), Some(saved));
        assert_eq!(store.load_for("http://b:8080").unwrap(), None);
        assert!(!store.dir.join("credential.json.tmp").exists());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(fs::metadata(store.path()).unwrap().permissions().mode() & 0o777, 0o600);
        }
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_corrupt_file_is_ignored_and_replaced() {
        let dir = temp_dir("corrupt");
        let store = CredentialStore::new(&dir);
        fs::create_dir_all(&dir).unwrap();
        fs::write(store.path(), "{not json").unwrap();
        assert_eq!(store.load_for("http://a").unwrap(), None);
        let saved = credential("http://a");
        store.save(&saved).unwrap();
        assert_eq!(store.load_for("http://a").unwrap(), Some(saved));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn debug_never_prints_the_token() {
        assert!(!format!("{:?}", credential("http://a")).contains("gpa_secret"));
    }
}
