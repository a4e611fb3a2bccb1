//! Jobs' full output (docs/logs.md): what an agent ships is masked and stored ([`ingest`]), and read back a page
//! at a time ([`page`]) or as it arrives ([`follow`]).
//!
//! Invariants: a part's line (`seq`) is stored once, however often it is sent; a job's lines are numbered in the
//! order they became visible, so a reader that asks for the lines after the last one it saw misses none and sees
//! none twice; no stored line holds a secret value of its job; a job's stored text stays within the cap (its
//! oldest lines go first, a tenth of the cap at a time).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgPool};
use utoipa::ToSchema;
use uuid::Uuid;

use super::lifecycle::{ReportError, mask_secrets, secrets_of};
use crate::secrets::Keyring;
use crate::state::log_wakeups::{LogWakeups, Wakeups};
use gpuplane_protocol::logs::{CUT_MARK, LogReport, LogStream};
use gpuplane_store::jobs as stored;
use gpuplane_store::jobs::logs::{Appended, LineFilter, LogRow, NewLine};

/// How long after a job ends its readers wait for output still on its way from a node that never said it sent
/// its last (a node lost with the job).
pub const LOG_SETTLE: Duration = Duration::from_secs(30);

/// Store a part's report; returns the highest `seq` of the part now stored.
pub async fn ingest(
    conn: &mut PgConnection,
    keyring: &Keyring,
    node_id: Uuid,
    generation: i64,
    job_node_id: Uuid,
    report: &LogReport,
    cap_bytes: i64,
) -> Result<i64, ReportError> {
    if !stored::agent_current(conn, node_id, generation).await? {
        return Err(ReportError::StaleCredential);
    }
    let Some(part) = stored::logs::part_of_node(conn, job_node_id, node_id).await? else {
        return Err(ReportError::NotFound);
    };
    let log = stored::logs::lock_job_log(conn, part.job_id).await?;
    let stored_seq = stored::logs::part_log_seq(conn, job_node_id).await?;
    let fresh: Vec<_> = report.lines.iter().filter(|l| l.seq > stored_seq).collect();
    let secrets = if fresh.is_empty() { Vec::new() } else { secrets_of(conn, keyring, part.job_id).await? };
    let mut lost = 0;
    let mut previous = stored_seq;
    let mut lines = Vec::with_capacity(fresh.len());
    for line in &fresh {
        lost += line.seq - previous - 1;
        previous = line.seq;
        lines.push(NewLine {
            at: line.at,
            stream: line.stream.code(),
            rank: line.rank,
            text: mask_line(&line.text, &secrets),
        });
    }
    let appended =
        Appended { part: job_node_id, node_rank: part.node_rank, log_seq: previous, closed: report.last, lost };
    let log = stored::logs::append(conn, part.job_id, log, &appended, &lines).await?;
    if log.bytes > cap_bytes {
        stored::logs::trim(conn, part.job_id, log, cap_bytes - cap_bytes / 10).await?;
    }
    Ok(previous)
}

/// A line with its job's secret values masked; a line the agent cut also loses the start of a secret it was cut
/// in the middle of.
pub fn mask_line(text: &str, secrets: &[(String, String)]) -> String {
    let masked = mask_secrets(text, secrets);
    let Some(body) = masked.strip_suffix(CUT_MARK) else { return masked };
    for (_, value) in secrets {
        // The longest start of the value (4 characters at least) that the cut line ends with.
        let starts = value.char_indices().map(|(i, _)| i).skip(4).chain([value.len()]);
        if let Some(end) = starts.filter(|&end| body.ends_with(&value[..end])).last() {
            return format!("{}***{CUT_MARK}", &body[..body.len() - end]);
        }
    }
    masked
}

/// One line of a job's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct JobLogLine {
    /// The line's number in the job's log, from 1: lines are numbered in the order they were stored, across
    /// every node.
    pub line: i64,
    /// The node's rank in the job that printed it.
    pub node: i32,
    /// The global rank that printed it, where the launcher said (torchrun's ranks); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<i32>,
    pub stream: LogStream,
    /// When its agent read it.
    pub at: DateTime<Utc>,
    /// The line, with the job's secret values replaced by `***`.
    pub text: String,
}

impl JobLogLine {
    fn from_row(row: LogRow) -> Self {
        JobLogLine {
            line: row.line,
            node: row.node_rank,
            rank: row.rank,
            stream: LogStream::from_code(&row.stream).unwrap_or(LogStream::Stdout),
            at: row.at,
            text: row.text,
        }
    }

    /// As `gpuplane logs` and the text download show it: `[node 0 rank 3] text`.
    pub fn render(&self) -> String {
        match self.rank {
            Some(rank) => format!("[node {} rank {rank}] {}\n", self.node, self.text),
            None => format!("[node {}] {}\n", self.node, self.text),
        }
    }
}

/// A page of a job's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct JobLogPage {
    pub lines: Vec<JobLogLine>,
    /// Pass as `after` for the lines that follow (the last line returned; `after` itself when none was).
    pub next_after: i64,
    /// The oldest line still stored: the ones before it were deleted to keep the job's logs within the cap.
    pub first_line: i64,
    /// Lines the nodes could not ship (their agents buffer a bounded amount while the service is away).
    pub lost_lines: i64,
    /// The job has ended and every line of it is here: nothing more will come.
    pub complete: bool,
    /// When the job's lines were deleted, the service's log retention after it ended (`first_line` is then past
    /// the last line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expired_at: Option<DateTime<Utc>>,
}

/// What to read.
#[derive(Debug, Clone, Copy)]
pub enum Window {
    /// The lines after this number, oldest first.
    After(i64),
    /// The last this many lines.
    Tail(i64),
}

/// A page of the job's lines.
pub async fn page(
    conn: &mut PgConnection,
    job_id: Uuid,
    window: Window,
    limit: i64,
    filter: LineFilter,
) -> Result<JobLogPage, sqlx::Error> {
    // The state is read first: a line stored after it is not counted as missing from a `complete` page.
    let state = stored::logs::log_state(conn, job_id).await?;
    let (rows, after, drained) = match window {
        Window::After(after) => {
            let rows = stored::logs::lines_after(conn, job_id, after, limit, filter).await?;
            let last = rows.last().map_or(after, |r| r.line);
            let drained = (rows.len() as i64) < limit || last + 1 >= state.log.next_line;
            (rows, after, drained)
        }
        // The newest lines: none stored before this read comes after them.
        Window::Tail(count) => (stored::logs::last_lines(conn, job_id, count, filter).await?, 0, true),
    };
    let next_after = rows.last().map_or(after, |r| r.line);
    let lines: Vec<JobLogLine> = rows.into_iter().map(JobLogLine::from_row).collect();
    Ok(JobLogPage {
        lines,
        next_after,
        first_line: state.log.first_line,
        lost_lines: state.log.lost_lines,
        complete: settled(&state, Utc::now()) && drained,
        expired_at: state.expired_at,
    })
}

/// Jobs whose lines one round of [`expire`] deletes at most.
const EXPIRE_BATCH: i64 = 20;

/// Delete the lines of jobs that ended more than `retention` ago (nothing without a retention); returns whether
/// a full batch went (more may be due).
pub async fn expire(db: &PgPool, retention: Option<Duration>) -> anyhow::Result<bool> {
    let Some(retention) = retention else { return Ok(false) };
    let ended_before = Utc::now() - chrono::Duration::from_std(retention)?;
    let jobs = stored::logs::expire(&mut *db.acquire().await?, ended_before, EXPIRE_BATCH).await?;
    if jobs > 0 {
        tracing::info!(jobs, "ended jobs' log lines deleted (--job-log-retention-days)");
    }
    Ok(jobs == EXPIRE_BATCH as u64)
}

/// Pure: whether nothing more will be stored for the job: it has ended, and every part sent its last output or
/// [`LOG_SETTLE`] has passed.
fn settled(state: &stored::logs::LogState, now: DateTime<Utc>) -> bool {
    match state.job_ended_at {
        Some(ended) => {
            state.open_parts == 0 || now - ended >= chrono::Duration::from_std(LOG_SETTLE).unwrap_or_default()
        }
        None => false,
    }
}

/// The least time between two looks of a follower: a chatty job's reports come faster than this, and each wakes
/// every follower of the job, so a follower looks at most this often (as often as the service polled before
/// followers were woken) and takes each look's lines in one.
pub const FOLLOW_MIN_INTERVAL: Duration = Duration::from_millis(500);
/// Lines a follower reads at a time.
const FOLLOW_BATCH: i64 = 1000;

/// What a follower gets next.
pub enum Followed {
    Lines(Vec<JobLogLine>),
    /// Nothing more will come.
    End {
        lost_lines: i64,
        first_line: i64,
    },
}

/// The job's lines after `after`, as they arrive, until the job has ended and its last line is out. Lines the
/// cap deleted before the follower read them are skipped (the end says where the log now starts).
/// It looks again when woken for the job (`wakeups`) or at their fallback interval.
pub fn follow(
    db: PgPool,
    wakeups: &LogWakeups,
    job_id: Uuid,
    after: i64,
    filter: LineFilter,
) -> impl futures_util::Stream<Item = Result<Followed, sqlx::Error>> + use<> {
    let cursor = Cursor { after, woken: wakeups.subscribe(&db), caught_up_at: None, ended: None };
    futures_util::stream::unfold(Some(cursor), move |cursor| {
        let db = db.clone();
        async move {
            let mut cursor = cursor?;
            if let Some((lost_lines, first_line)) = cursor.ended {
                return Some((Ok(Followed::End { lost_lines, first_line }), None));
            }
            loop {
                // Caught up: nothing to read until the job's log moves.
                if let Some(looked) = cursor.caught_up_at {
                    cursor.woken.wait(job_id).await;
                    tokio::time::sleep_until(looked + FOLLOW_MIN_INTERVAL).await;
                }
                let looked = tokio::time::Instant::now();
                let read = async {
                    let mut conn = db.acquire().await?;
                    page(&mut conn, job_id, Window::After(cursor.after), FOLLOW_BATCH, filter).await
                };
                let page = match read.await {
                    Ok(page) => page,
                    Err(err) => return Some((Err(err), None)),
                };
                let end = page.complete.then_some((page.lost_lines, page.first_line));
                if let Some(last) = page.lines.last() {
                    cursor.after = last.line;
                    // A full batch may have more behind it: read on at once.
                    cursor.caught_up_at = ((page.lines.len() as i64) < FOLLOW_BATCH).then_some(looked);
                    cursor.ended = end;
                    return Some((Ok(Followed::Lines(page.lines)), Some(cursor)));
                }
                if let Some((lost_lines, first_line)) = end {
                    return Some((Ok(Followed::End { lost_lines, first_line }), None));
                }
                cursor.caught_up_at = Some(looked);
            }
        }
    })
}

/// Where a follower is.
struct Cursor {
    /// The last line it was given.
    after: i64,
    woken: Wakeups,
    /// When it last looked and found all there was: its next look waits for a wake-up.
    caught_up_at: Option<tokio::time::Instant>,
    /// The page it was last given was the job's last: the end comes next.
    ended: Option<(i64, i64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets() -> Vec<(String, String)> {
        vec![("HF_TOKEN".into(), "hf_abcdefghijkl".into())]
    }

    #[test]
    fn secret_values_are_masked_even_where_a_line_was_cut() {
        assert_eq!(mask_line("token=hf_abcdefghijkl ok", &secrets()), "token=*** ok");
        assert_eq!(mask_line(&format!("token=hf_abcdef{CUT_MARK}"), &secrets()), format!("token=***{CUT_MARK}"));
        // A short ending that merely looks like a value's start is left: four characters at least are masked.
        assert_eq!(mask_line(&format!("x=hf_{CUT_MARK}"), &secrets()), format!("x=hf_{CUT_MARK}"));
        assert_eq!(mask_line("plain", &[]), "plain");
    }

    #[test]
    fn a_log_settles_when_its_job_ended_and_every_part_sent_its_last() {
        let now = Utc::now();
        let state = |ended: Option<DateTime<Utc>>, open_parts| stored::logs::LogState {
            log: Default::default(),
            expired_at: None,
            job_ended_at: ended,
            open_parts,
        };
        assert!(!settled(&state(None, 0), now));
        assert!(settled(&state(Some(now), 0), now));
        assert!(!settled(&state(Some(now - chrono::Duration::seconds(5)), 1), now));
        assert!(settled(&state(Some(now - chrono::Duration::seconds(31)), 1), now));
    }
}
