//! The processes the agent starts (jobs' ranks, environments' sshd): started with their output kept in a tail
//! the service is shown, and their exit sent to whoever owns them.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::mpsc;
use uuid::Uuid;

use super::launch::Prepared;
use gpuplane_protocol::jobs::{OUTPUT_LINE_CHARS, OUTPUT_TAIL_LINES};
use gpuplane_protocol::logs::{LogLine, LogStream};

/// The last lines of a process's output, and the first error it printed (which the tail may no longer hold:
/// torchrun's report of a failed rank follows it by dozens of lines); and every line not yet shipped.
#[derive(Default)]
pub struct Tail {
    lines: VecDeque<String>,
    /// Bumped on every line, so a changed tail can be reported while the process runs.
    version: u64,
    first_error: Option<String>,
    /// Lines waiting to be shipped, oldest first, numbered from 1; bounded by [`LOG_BUFFER_BYTES`] (the oldest
    /// go first: the gap in the numbers tells the service how many were lost).
    unshipped: VecDeque<LogLine>,
    unshipped_bytes: usize,
    /// The number the last line read got.
    seq: i64,
    /// Every line of the process's output has been read (it ended, or its streams closed).
    ended: bool,
    /// Its lines are shipped (a job's part's are; an environment's sshd's are not).
    shipped: bool,
}

/// Most text a part's unshipped lines hold while the service is away: past it, the oldest are dropped.
pub const LOG_BUFFER_BYTES: usize = 16 * 1024 * 1024;

/// Longest first error kept for a job's reason.
const FIRST_ERROR_CHARS: usize = 400;

/// The error a line states, if it states one as Python does at the end of a traceback
/// (`[rank1]: ValueError: ...`, `gpuplane_runtime.errors.PlanMismatchError: ...`, `torch.OutOfMemoryError: ...`):
/// an exception's dotted name ending in `Error` or `Exception`, a colon and a message. Torchrun's own summary
/// (`ChildFailedError`) is not the cause, and neither is a line of source code that names an exception.
pub fn error_in(line: &str) -> Option<String> {
    let text = line.trim();
    // torchrun prefixes a rank's output with `[rank3]:` (or `[default0]:`) when it tees it.
    let text = match text.strip_prefix('[').and_then(|rest| rest.split_once("]:")) {
        Some((_, after)) => after.trim_start(),
        None => text,
    };
    let (name, message) = text.split_once(": ")?;
    let simple = name.rsplit('.').next().unwrap_or(name);
    let is_exception = (simple.ends_with("Error") || simple.ends_with("Exception"))
        && name.split('.').all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        && simple.chars().next().is_some_and(|c| c.is_ascii_uppercase());
    if !is_exception || simple == "ChildFailedError" || message.trim().is_empty() {
        return None;
    }
    Some(text.chars().take(FIRST_ERROR_CHARS).collect())
}

pub type SharedTail = Arc<Mutex<Tail>>;

pub fn push_line(tail: &SharedTail, line: &str) {
    push_output(tail, line, LogStream::Stdout);
}

/// A line the process printed on `stream`: into the tail, and into the lines to ship.
pub fn push_output(tail: &SharedTail, line: &str, stream: LogStream) {
    let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
    if tail.shipped {
        let (rank, text) = gpuplane_protocol::logs::clean_line(line);
        tail.seq += 1;
        tail.unshipped_bytes += text.len();
        let seq = tail.seq;
        tail.unshipped.push_back(LogLine { seq, at: chrono::Utc::now(), stream, rank, text });
        while tail.unshipped_bytes > LOG_BUFFER_BYTES {
            let Some(dropped) = tail.unshipped.pop_front() else { break };
            tail.unshipped_bytes -= dropped.text.len();
        }
    }
    if tail.lines.len() == OUTPUT_TAIL_LINES {
        tail.lines.pop_front();
    }
    // A job may print any bytes; the service refuses a report holding control characters (NUL among them). The
    // tail shows what the process printed, without the rank prefix the agent asks torchrun for.
    let line = gpuplane_protocol::text::replace_forbidden(gpuplane_protocol::logs::without_rank_prefix(line));
    if tail.first_error.is_none() {
        tail.first_error = error_in(&line);
    }
    tail.lines.push_back(line.chars().take(OUTPUT_LINE_CHARS).collect());
    tail.version += 1;
}

/// The oldest `max` unshipped lines (left in place until [`shipped`]), and whether they are the last the
/// process will print.
pub fn unshipped(tail: &SharedTail, max: usize) -> (Vec<LogLine>, bool) {
    let tail = tail.lock().unwrap_or_else(|e| e.into_inner());
    let lines: Vec<LogLine> = tail.unshipped.iter().take(max).cloned().collect();
    let last = tail.ended && lines.len() == tail.unshipped.len();
    (lines, last)
}

/// The service holds every line up to `seq`: forget them.
pub fn shipped(tail: &SharedTail, seq: i64) {
    let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
    while tail.unshipped.front().is_some_and(|l| l.seq <= seq) {
        if let Some(line) = tail.unshipped.pop_front() {
            tail.unshipped_bytes -= line.text.len();
        }
    }
}

/// No more output will come: the process ended (or never started).
pub fn end_output(tail: &SharedTail) {
    tail.lock().unwrap_or_else(|e| e.into_inner()).ended = true;
}

/// The first error the process printed, if any.
pub fn first_error(tail: &SharedTail) -> Option<String> {
    tail.lock().unwrap_or_else(|e| e.into_inner()).first_error.clone()
}

pub fn snapshot(tail: &SharedTail) -> (Vec<String>, u64) {
    let tail = tail.lock().unwrap_or_else(|e| e.into_inner());
    (tail.lines.iter().cloned().collect(), tail.version)
}

/// A process ended.
pub struct Exited {
    pub owner: Owner,
    /// Exit code, or 128 + signal.
    pub code: Option<i32>,
    pub tail: Vec<String>,
    /// The first error it printed ([`error_in`]).
    pub first_error: Option<String>,
}

/// Whose process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// An assignment (its `job_node_id`).
    Job(Uuid),
    /// The lease's environment (its lease id).
    Environment(Uuid),
}

/// Start a prepared command with its output kept in a tail; its exit is sent to `exits`.
pub fn spawn_process(
    prepared: &Prepared,
    owner: Owner,
    exits: &mpsc::UnboundedSender<Exited>,
) -> anyhow::Result<(u32, SharedTail)> {
    let program = prepared.argv.first().context("empty argv")?;
    let mut command = tokio::process::Command::new(program);
    command
        .args(&prepared.argv[1..])
        .env_clear()
        .envs(&prepared.env)
        .current_dir(&prepared.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group: stopping it for good signals everything it started outside a sandbox.
        .process_group(0);
    if let Some(sandbox) = &prepared.sandbox {
        use command_fds::CommandFdExt;
        command.fd_mappings(vec![sandbox.options_pipe()?])?;
    }
    let mut child = command.spawn().with_context(|| format!("starting `{program}`"))?;
    let pid = child.id().context("the process exited at once")?;
    let tail: SharedTail = Arc::new(Mutex::new(Tail { shipped: matches!(owner, Owner::Job(_)), ..Tail::default() }));
    let readers: Vec<_> = [
        child.stdout.take().map(|s| (Box::new(s) as Box<dyn AsyncRead + Send + Unpin>, LogStream::Stdout)),
        child.stderr.take().map(|s| (Box::new(s) as Box<dyn AsyncRead + Send + Unpin>, LogStream::Stderr)),
    ]
    .into_iter()
    .flatten()
    .map(|(stream, kind)| tokio::spawn(read_lines(stream, kind, tail.clone())))
    .collect();
    let exits = exits.clone();
    let watched = tail.clone();
    tokio::spawn(async move {
        let status = child.wait().await;
        // A process that left children holding its output open must not keep the report back.
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            for reader in readers {
                let _ = reader.await;
            }
        })
        .await;
        end_output(&watched);
        let code = status.ok().and_then(|s| {
            use std::os::unix::process::ExitStatusExt;
            s.code().or_else(|| s.signal().map(|sig| 128 + sig))
        });
        let _ = exits.send(Exited { owner, code, tail: snapshot(&watched).0, first_error: first_error(&watched) });
    });
    Ok((pid, tail))
}

async fn read_lines(stream: Box<dyn AsyncRead + Send + Unpin>, kind: LogStream, tail: SharedTail) {
    let mut reader = BufReader::new(stream);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let line = String::from_utf8_lossy(&buf);
                push_output(&tail, line.trim_end_matches(['\n', '\r']), kind);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipping() -> SharedTail {
        Arc::new(Mutex::new(Tail { shipped: true, ..Tail::default() }))
    }

    #[test]
    fn every_line_is_numbered_kept_until_shipped_and_the_oldest_go_past_the_bound() {
        let tail = shipping();
        push_output(&tail, "[rank1]:step 1", LogStream::Stdout);
        push_output(&tail, "warning", LogStream::Stderr);
        push_output(&tail, "[rank0]:step 2", LogStream::Stdout);
        let (lines, last) = unshipped(&tail, 2);
        assert!(!last);
        assert_eq!(
            lines.iter().map(|l| (l.seq, l.rank, l.stream)).collect::<Vec<_>>(),
            [(1, Some(1), LogStream::Stdout), (2, None, LogStream::Stderr)]
        );
        assert_eq!(snapshot(&tail).0, ["step 1", "warning", "step 2"], "the tail shows the lines without the prefix");
        shipped(&tail, 2);
        end_output(&tail);
        let (lines, last) = unshipped(&tail, 10);
        assert_eq!((lines.len(), lines[0].seq, lines[0].text.as_str(), last), (1, 3, "step 2", true));
        shipped(&tail, 3);
        assert_eq!(unshipped(&tail, 10), (vec![], true), "an ended, drained part still sends its last report");

        // The service away for long: the oldest go, and the numbers show the gap.
        let tail = shipping();
        let long = "x".repeat(4000);
        let count = LOG_BUFFER_BYTES / 4000 + 100;
        for _ in 0..count {
            push_output(&tail, &long, LogStream::Stdout);
        }
        let (lines, _) = unshipped(&tail, usize::MAX);
        assert_eq!(lines.len(), LOG_BUFFER_BYTES / 4000);
        assert_eq!(lines.last().unwrap().seq, count as i64);
        assert_eq!(lines[0].seq, (count - lines.len() + 1) as i64);
    }

    #[test]
    fn an_environments_output_is_not_kept_for_shipping() {
        let tail: SharedTail = Arc::default();
        push_output(&tail, "sshd listening", LogStream::Stderr);
        assert_eq!(unshipped(&tail, 10).0, vec![]);
        assert_eq!(snapshot(&tail).0, ["sshd listening"]);
    }

    #[test]
    fn the_tail_keeps_the_last_lines_cut_to_size() {
        let tail: SharedTail = Arc::default();
        for i in 0..120 {
            push_line(&tail, &format!("line {i}"));
        }
        push_line(&tail, "argv\0of\0a\0process\x1b[0m");
        push_line(&tail, &"x".repeat(5000));
        let (lines, version) = snapshot(&tail);
        assert_eq!(lines.len(), OUTPUT_TAIL_LINES);
        assert_eq!(lines[0], "line 72");
        assert_eq!(
            lines[OUTPUT_TAIL_LINES - 2],
            "argv\u{FFFD}of\u{FFFD}a\u{FFFD}process\u{FFFD}[0m",
            "what the service takes"
        );
        assert_eq!(lines.last().unwrap().len(), OUTPUT_LINE_CHARS);
        assert_eq!(version, 122);
    }

    #[test]
    fn the_first_error_is_the_exception_a_rank_raised_first() {
        for (line, want) in [
            ("[rank1]: ValueError: the batch has 3 rows", Some("ValueError: the batch has 3 rows")),
            (
                "gpuplane_runtime.errors.PlanMismatchError: tp 4 does not divide 2 kv heads",
                Some("gpuplane_runtime.errors.PlanMismatchError: tp 4 does not divide 2 kv heads"),
            ),
            (
                "[default0]:torch.OutOfMemoryError: CUDA out of memory",
                Some("torch.OutOfMemoryError: CUDA out of memory"),
            ),
            ("KeyboardInterruptException: x", Some("KeyboardInterruptException: x")),
            ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", None),
            ("    raise ValueError(f\"bad: {x}\")", None),
            ("Traceback (most recent call last):", None),
            ("step 3 loss 2.5", None),
            ("error: something", None),
            ("W1204 warnings.warn(UserWarning: x)", None),
            ("ValueError:", None),
        ] {
            assert_eq!(error_in(line).as_deref(), want, "{line}");
        }
        let tail: SharedTail = Arc::default();
        push_line(&tail, "Traceback (most recent call last):");
        push_line(&tail, "RuntimeError: first");
        push_line(&tail, "RuntimeError: second");
        push_line(&tail, &format!("ValueError: {}", "x".repeat(1000)));
        assert_eq!(first_error(&tail).as_deref(), Some("RuntimeError: first"));
        let long: SharedTail = Arc::default();
        push_line(&long, &format!("ValueError: {}", "x".repeat(1000)));
        assert_eq!(first_error(&long).unwrap().chars().count(), FIRST_ERROR_CHARS);
    }
}
