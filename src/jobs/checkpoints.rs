//! Where a job's checkpoints go by default: a directory of its own on the lease's read-write volume, so that they
//! outlive the lease (docs/volumes.md). A rule of jobs about the volumes a lease has, read from the store.

use gpuplane_store::volumes::Attachment;
use uuid::Uuid;

/// Where the gpuplane runtime saves and resumes a job's checkpoints.
pub const CHECKPOINT_DIR_ENV: &str = "GPUPLANE_CHECKPOINT_DIR";

/// A job's checkpoint directory when its lease has a read-write volume (the first by mount path) and the job
/// does not name one: `/volumes/<mount>/checkpoints/<job id>`, so its checkpoints outlive the lease (every
/// generation of the job saves and resumes there). A job that resumes another's names that one's directory.
pub fn checkpoint_dir(attached: &[Attachment], job_id: Uuid) -> Option<String> {
    let volume = attached.iter().filter(|a| !a.read_only).min_by(|a, b| a.mount_path.cmp(&b.mount_path))?;
    Some(format!("{}/checkpoints/{job_id}", volume.mount_path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_go_to_the_first_read_write_volume() {
        let at = |mount: &str, read_only| Attachment {
            volume_id: Uuid::nil(),
            volume_name: mount.into(),
            lease_id: Uuid::nil(),
            mount_path: format!("/volumes/{mount}"),
            read_only,
            attached_at: chrono::Utc::now(),
        };
        let job = Uuid::from_u128(7);
        assert_eq!(checkpoint_dir(&[], job), None);
        assert_eq!(checkpoint_dir(&[at("data", true)], job), None, "never on a read-only volume");
        let dir = checkpoint_dir(&[at("data", true), at("z", false), at("b", false)], job).unwrap();
        assert_eq!(dir, format!("/volumes/b/checkpoints/{job}"));
    }
}
