//! Jobs' full output: lines appended as agents ship them (each part's `seq` kept once), numbered per job in the
//! order they were stored, trimmed from the oldest past a cap, and read back by number, from the end, or by node
//! and rank.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::StoreResult;

/// The part an agent reports output for, if it is that agent's node's.
pub struct LoggedPart {
    pub job_id: Uuid,
    pub node_rank: i32,
}

pub async fn part_of_node(
    conn: &mut PgConnection,
    job_node_id: Uuid,
    node_id: Uuid,
) -> StoreResult<Option<LoggedPart>> {
    let part = sqlx::query_as!(
        LoggedPart,
        "SELECT job_id, node_rank FROM job_nodes WHERE id = $1 AND node_id = $2",
        job_node_id,
        node_id
    )
    .fetch_optional(conn)
    .await?;
    Ok(part)
}

/// Where a job's stored output stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JobLog {
    /// The number the next stored line gets.
    pub next_line: i64,
    /// The oldest line still stored.
    pub first_line: i64,
    /// Bytes of text stored.
    pub bytes: i64,
    /// Lines agents dropped before shipping them.
    pub lost_lines: i64,
}

/// Lock the job's log (made on its first line): every append of one job runs after the last one committed, so
/// line numbers are handed out and become visible in order, and a reader following by number never skips one.
pub async fn lock_job_log(conn: &mut PgConnection, job_id: Uuid) -> StoreResult<JobLog> {
    sqlx::query!("INSERT INTO job_logs (job_id) VALUES ($1) ON CONFLICT DO NOTHING", job_id)
        .execute(&mut *conn)
        .await?;
    let log = sqlx::query_as!(
        JobLog,
        "SELECT next_line, first_line, bytes, lost_lines FROM job_logs WHERE job_id = $1 FOR UPDATE",
        job_id
    )
    .fetch_one(conn)
    .await?;
    Ok(log)
}

/// The highest `seq` of the part stored so far (read under the job's log lock).
pub async fn part_log_seq(conn: &mut PgConnection, job_node_id: Uuid) -> StoreResult<i64> {
    Ok(sqlx::query_scalar!("SELECT log_seq FROM job_nodes WHERE id = $1", job_node_id).fetch_one(conn).await?)
}

/// A line to store.
pub struct NewLine {
    pub at: DateTime<Utc>,
    /// `o` or `e`.
    pub stream: &'static str,
    pub rank: Option<i32>,
    pub text: String,
}

/// What an append changed.
pub struct Appended {
    pub part: Uuid,
    pub node_rank: i32,
    /// The part's highest `seq` now stored.
    pub log_seq: i64,
    /// The part's process ended and this was the last of its output.
    pub closed: bool,
    /// Lines the agent dropped (gaps in `seq`).
    pub lost: i64,
}

/// Store `lines` as the job's next lines (numbered from `log.next_line`), record the part's progress, and return
/// the log as it stands now. The caller holds [`lock_job_log`].
pub async fn append(
    conn: &mut PgConnection,
    job_id: Uuid,
    log: JobLog,
    appended: &Appended,
    lines: &[NewLine],
) -> StoreResult<JobLog> {
    let count = lines.len() as i64;
    let bytes: i64 = lines.iter().map(|l| l.text.len() as i64).sum();
    if count > 0 {
        sqlx::query!(
            "INSERT INTO job_log_lines (job_id, line, job_node_id, node_rank, rank, stream, at, text) \
             SELECT $1, $2 + u.i - 1, $3, $4, u.rank, u.stream, u.at, u.text \
             FROM UNNEST($5::integer[], $6::text[], $7::timestamptz[], $8::text[]) WITH ORDINALITY \
                 AS u(rank, stream, at, text, i)",
            job_id,
            log.next_line,
            appended.part,
            appended.node_rank,
            &lines.iter().map(|l| l.rank).collect::<Vec<_>>() as &[Option<i32>],
            &lines.iter().map(|l| l.stream.to_owned()).collect::<Vec<_>>(),
            &lines.iter().map(|l| l.at).collect::<Vec<_>>(),
            &lines.iter().map(|l| l.text.clone()).collect::<Vec<_>>()
        )
        .execute(&mut *conn)
        .await?;
    }
    sqlx::query!(
        "UPDATE job_nodes SET log_seq = GREATEST(log_seq, $2), log_closed = log_closed OR $3 WHERE id = $1",
        appended.part,
        appended.log_seq,
        appended.closed
    )
    .execute(&mut *conn)
    .await?;
    let now = JobLog {
        next_line: log.next_line + count,
        first_line: log.first_line,
        bytes: log.bytes + bytes,
        lost_lines: log.lost_lines + appended.lost,
    };
    sqlx::query!(
        "UPDATE job_logs SET next_line = $2, bytes = $3, lost_lines = $4 WHERE job_id = $1",
        job_id,
        now.next_line,
        now.bytes,
        now.lost_lines
    )
    .execute(conn)
    .await?;
    Ok(now)
}

/// Delete the job's oldest lines until at most `keep_bytes` of text are left; returns the log as it stands now.
/// The caller holds [`lock_job_log`].
pub async fn trim(conn: &mut PgConnection, job_id: Uuid, log: JobLog, keep_bytes: i64) -> StoreResult<JobLog> {
    let excess = log.bytes - keep_bytes;
    if excess <= 0 {
        return Ok(log);
    }
    // The last line to go: the first whose running total of bytes, oldest first, reaches the excess.
    let (deleted_bytes, last_deleted) = sqlx::query!(
        r#"WITH running AS (
               SELECT line, sum(octet_length(text)) OVER (ORDER BY line) AS total
               FROM job_log_lines WHERE job_id = $1),
           cut AS (SELECT coalesce(min(line) FILTER (WHERE total >= $2), max(line)) AS upto FROM running),
           gone AS (
               DELETE FROM job_log_lines l USING cut WHERE l.job_id = $1 AND l.line <= cut.upto
               RETURNING l.line, octet_length(l.text) AS bytes)
           SELECT coalesce(sum(bytes), 0)::bigint AS "bytes!", max(line) AS last FROM gone"#,
        job_id,
        excess
    )
    .fetch_one(&mut *conn)
    .await
    .map(|r| (r.bytes, r.last))?;
    let now =
        JobLog { first_line: last_deleted.map_or(log.first_line, |l| l + 1), bytes: log.bytes - deleted_bytes, ..log };
    sqlx::query!(
        "UPDATE job_logs SET first_line = $2, bytes = $3 WHERE job_id = $1",
        job_id,
        now.first_line,
        now.bytes
    )
    .execute(conn)
    .await?;
    Ok(now)
}

/// A stored line.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRow {
    pub line: i64,
    pub node_rank: i32,
    pub rank: Option<i32>,
    pub stream: String,
    pub at: DateTime<Utc>,
    pub text: String,
}

/// Which lines to read.
#[derive(Debug, Clone, Copy, Default)]
pub struct LineFilter {
    /// Only this node's (its rank in the job).
    pub node: Option<i32>,
    /// Only this global rank's.
    pub rank: Option<i32>,
}

/// Up to `limit` of the job's lines after `after`, oldest first.
pub async fn lines_after(
    conn: &mut PgConnection,
    job_id: Uuid,
    after: i64,
    limit: i64,
    filter: LineFilter,
) -> StoreResult<Vec<LogRow>> {
    let rows = sqlx::query_as!(
        LogRow,
        "SELECT line, node_rank, rank, stream, at, text FROM job_log_lines \
         WHERE job_id = $1 AND line > $2 AND ($4::integer IS NULL OR node_rank = $4) \
             AND ($5::integer IS NULL OR rank = $5) \
         ORDER BY line LIMIT $3",
        job_id,
        after,
        limit,
        filter.node,
        filter.rank
    )
    .fetch_all(conn)
    .await?;
    Ok(rows)
}

/// The job's last `count` lines (of those the filter keeps), oldest first.
pub async fn last_lines(
    conn: &mut PgConnection,
    job_id: Uuid,
    count: i64,
    filter: LineFilter,
) -> StoreResult<Vec<LogRow>> {
    let mut rows = sqlx::query_as!(
        LogRow,
        "SELECT line, node_rank, rank, stream, at, text FROM job_log_lines \
         WHERE job_id = $1 AND ($3::integer IS NULL OR node_rank = $3) AND ($4::integer IS NULL OR rank = $4) \
         ORDER BY line DESC LIMIT $2",
        job_id,
        count,
        filter.node,
        filter.rank
    )
    .fetch_all(conn)
    .await?;
    rows.reverse();
    Ok(rows)
}

/// Delete every line of up to `limit` jobs that ended before `ended_before` and still have lines, marking their
/// logs expired; returns how many jobs. Each job's log row is locked (a report being stored passes it by).
pub async fn expire(conn: &mut PgConnection, ended_before: DateTime<Utc>, limit: i64) -> StoreResult<u64> {
    let done = sqlx::query!(
        r#"WITH due AS (
               SELECT l.job_id FROM job_logs l JOIN jobs j ON j.id = l.job_id
               WHERE l.expired_at IS NULL AND j.finished_at < $1
               ORDER BY j.finished_at LIMIT $2 FOR UPDATE OF l SKIP LOCKED),
           gone AS (DELETE FROM job_log_lines x USING due WHERE x.job_id = due.job_id)
           UPDATE job_logs l SET expired_at = now(), first_line = next_line, bytes = 0
           FROM due WHERE l.job_id = due.job_id"#,
        ended_before,
        limit
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

/// A job's log as a reader sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogState {
    pub log: JobLog,
    /// When its lines were deleted for their age.
    pub expired_at: Option<DateTime<Utc>>,
    /// The job has ended.
    pub job_ended_at: Option<DateTime<Utc>>,
    /// Parts of the job whose last output has not arrived.
    pub open_parts: i64,
}

pub async fn log_state(conn: &mut PgConnection, job_id: Uuid) -> StoreResult<LogState> {
    let row = sqlx::query!(
        r#"SELECT coalesce(l.next_line, 1) AS "next_line!", coalesce(l.first_line, 1) AS "first_line!",
               coalesce(l.bytes, 0) AS "bytes!", coalesce(l.lost_lines, 0) AS "lost_lines!",
               l.expired_at, j.finished_at,
               (SELECT count(*) FROM job_nodes jn WHERE jn.job_id = j.id AND NOT jn.log_closed) AS "open_parts!"
           FROM jobs j LEFT JOIN job_logs l ON l.job_id = j.id WHERE j.id = $1"#,
        job_id
    )
    .fetch_one(conn)
    .await?;
    Ok(LogState {
        log: JobLog {
            next_line: row.next_line,
            first_line: row.first_line,
            bytes: row.bytes,
            lost_lines: row.lost_lines,
        },
        expired_at: row.expired_at,
        job_ended_at: row.finished_at,
        open_parts: row.open_parts,
    })
}
