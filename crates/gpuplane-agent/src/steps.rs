//! Reading the steps the gpuplane runtime writes in a job's directory ([`STEPS_FILE`], one JSON line per
//! optimizer step) so the heartbeat ships them.
//!
//! The file is the tenant's: the agent (root) opens it without following a symlink, reads only a regular file,
//! at most [`MAX_READ`] bytes per look and [`MAX_LINE`] bytes per line, and ships only lines that parse as a
//! step within the service's bounds. Whatever else is there is skipped, never an error of the job.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use uuid::Uuid;

use gpuplane_protocol::jobs::{JobStep, STEPS_FILE, StepLine};

/// Most bytes read from one job's file per look.
pub const MAX_READ: usize = 256 * 1024;
/// A longer line is not a step: it is skipped.
pub const MAX_LINE: usize = 4096;

/// Where reading one job's steps file stands.
#[derive(Debug, Default, Clone)]
pub struct StepsTail {
    /// Bytes consumed so far.
    offset: u64,
    /// Inside a line longer than [`MAX_LINE`]: skip to its end.
    skipping: bool,
    /// Lines that were not steps (logged once).
    rejected: u64,
}

impl StepsTail {
    /// The steps appended to `<job_dir>/gpuplane_steps.jsonl` since the last look.
    pub fn read_new(&mut self, job_dir: &Path, job_node_id: Uuid) -> Vec<JobStep> {
        let path = job_dir.join(STEPS_FILE);
        let Ok(mut file) =
            std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(&path)
        else {
            return Vec::new();
        };
        match file.metadata() {
            Ok(meta) if meta.is_file() && meta.len() > self.offset => {}
            _ => return Vec::new(),
        }
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return Vec::new();
        }
        let mut chunk = Vec::with_capacity(8192);
        if file.take(MAX_READ as u64).read_to_end(&mut chunk).is_err() {
            return Vec::new();
        }
        let mut steps = Vec::new();
        let mut consumed = 0;
        while let Some(end) = chunk[consumed..].iter().position(|b| *b == b'\n') {
            let line = &chunk[consumed..consumed + end];
            consumed += end + 1;
            if std::mem::take(&mut self.skipping) || line.len() > MAX_LINE {
                self.reject(job_node_id, "a line longer than 4096 bytes");
                continue;
            }
            match serde_json::from_slice::<StepLine>(line).map_err(|e| e.to_string()) {
                Ok(parsed) => match JobStep::from_line(job_node_id, &parsed) {
                    Ok(step) => steps.push(step),
                    Err(why) => self.reject(job_node_id, &why),
                },
                Err(why) if line.iter().all(u8::is_ascii_whitespace) => drop(why),
                Err(why) => self.reject(job_node_id, &why),
            }
        }
        // An unfinished line stays for the next look, unless it is already too long to be a step.
        if chunk.len() - consumed > MAX_LINE {
            self.skipping = true;
            consumed = chunk.len();
        }
        self.offset += consumed as u64;
        steps
    }

    fn reject(&mut self, job_node_id: Uuid, why: &str) {
        if self.rejected == 0 {
            tracing::warn!(job_node.id = %job_node_id, why, "a line of the job's steps file is not a step; skipping such lines");
        }
        self.rejected += 1;
    }
}

/// A job's progress file (`<job_dir>/gpuplane_progress.json`), read as the steps file is: no symlink followed, a
/// regular file only, at most 4 KiB; None when there is none or it does not hold a valid progress.
pub fn read_progress(job_dir: &Path) -> Option<gpuplane_protocol::jobs::Progress> {
    let path = job_dir.join(gpuplane_protocol::jobs::PROGRESS_FILE);
    let file =
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(&path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = Vec::new();
    file.take(4096).read_to_end(&mut text).ok()?;
    let progress: gpuplane_protocol::jobs::Progress = serde_json::from_slice(&text).ok()?;
    progress.valid().then_some(progress)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("gpuplane-steps-test-{}", Uuid::now_v7()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn line(step: i64) -> String {
        format!(
            "{{\"step\": {step}, \"step_time_s\": 0.5, \"tokens\": 2048, \"loss\": 9.5, \"peak_memory_bytes\": 1024, \
             \"time\": 1780000000.25}}\n"
        )
    }

    #[test]
    fn new_complete_lines_are_read_once_and_junk_is_skipped() {
        let dir = dir();
        let id = Uuid::now_v7();
        let mut tail = StepsTail::default();
        assert!(tail.read_new(&dir, id).is_empty(), "no file yet");
        let mut file = std::fs::File::create(dir.join(STEPS_FILE)).unwrap();
        write!(file, "{}not json\n{{\"step\": 0}}\n{}{{\"step\": 3, \"st", line(1), line(2)).unwrap();
        let steps = tail.read_new(&dir, id);
        assert_eq!(steps.iter().map(|s| s.step).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(steps[0].job_node_id, id);
        assert_eq!(steps[0].at.timestamp_millis(), 1_780_000_000_250);
        assert!(tail.read_new(&dir, id).is_empty(), "an unfinished line waits");
        writeln!(
            file,
            "ep_time_s\": 0.5, \"tokens\": 1, \"loss\": 1.0, \"peak_memory_bytes\": 0, \"time\": 1780000001}}"
        )
        .unwrap();
        assert_eq!(tail.read_new(&dir, id).iter().map(|s| s.step).collect::<Vec<_>>(), [3]);
        // A huge line without an end is skipped as a whole, and the next line still counts.
        write!(file, "{}", "x".repeat(MAX_LINE * 2)).unwrap();
        assert!(tail.read_new(&dir, id).is_empty());
        write!(file, "yyy\n{}", line(4)).unwrap();
        assert_eq!(tail.read_new(&dir, id).iter().map(|s| s.step).collect::<Vec<_>>(), [4]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_symlink_is_not_followed() {
        let dir = dir();
        let target = dir.join("elsewhere.jsonl");
        std::fs::write(&target, line(1)).unwrap();
        std::os::unix::fs::symlink(&target, dir.join(STEPS_FILE)).unwrap();
        assert!(StepsTail::default().read_new(&dir, Uuid::now_v7()).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn progress_is_read_from_a_regular_file_only_and_only_when_valid() {
        let dir = std::env::temp_dir().join(format!("gpuplane-progress-test-{}", Uuid::now_v7()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(super::read_progress(&dir), None);
        let file = dir.join(gpuplane_protocol::jobs::PROGRESS_FILE);
        std::fs::write(&file, r#"{"done": 3, "total": 10}"#).unwrap();
        assert_eq!(super::read_progress(&dir), Some(gpuplane_protocol::jobs::Progress { done: 3, total: 10 }));
        for bad in [r#"{"done": 11, "total": 10}"#, r#"{"done": -1, "total": 10}"#, "not json", ""] {
            std::fs::write(&file, bad).unwrap();
            assert_eq!(super::read_progress(&dir), None, "{bad}");
        }
        // A symlink to a file elsewhere (the agent's own, say) is not followed.
        let elsewhere = dir.join("elsewhere.json");
        std::fs::write(&elsewhere, r#"{"done": 1, "total": 1}"#).unwrap();
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
        assert_eq!(super::read_progress(&dir), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
