//! `GET /v1/jobs/{job_id}/logs`: HTTP only (the use cases are [`super::logs`]): a page as JSON, every line as a
//! plain-text download, or the lines as they arrive as server-sent events.

use std::convert::Infallible;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use uuid::Uuid;

use super::logs::{self, Followed, JobLogPage, Window};
use super::requests::{LogFormat, LogParams};
use crate::auth::TenantAuth;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiPath, ApiQuery};
use crate::state::AppState;
use gpuplane_store::jobs as stored;
use gpuplane_store::jobs::logs::LineFilter;

/// Lines the text download reads at a time.
const DOWNLOAD_BATCH: i64 = 5000;

/// A job's output: every line each node's process printed (per rank for torchrun's), with the job's secret values
/// masked. Lines are numbered per job in the order they were stored. Three forms: a JSON page (`after` or `tail`,
/// `limit`); with `format=text`, every line as a download; with `follow=true`, server-sent events (`line`
/// events whose `id` is the line number, so a reconnect with `Last-Event-ID` resumes where it stopped; one `end`
/// event when the job has ended and its last line is out). A job's logs keep at most the service's cap
/// (`--job-log-cap-mib`, 256 MiB by default): past it, the oldest lines are deleted, and `first_line` says where
/// the log now starts. Another tenant's job is 404.
#[utoipa::path(
    get, path = "/v1/jobs/{job_id}/logs", tag = "jobs", operation_id = "get_job_logs",
    params(("job_id" = Uuid, Path, description = "Job id"), LogParams,
        ("Last-Event-ID" = Option<i64>, Header, description = "With `follow`: the last line received (resume after it)")),
    responses(
        (status = 200, description = "A page of lines (JSON); every line (`format=text`); or the lines as they arrive (`follow=true`: `line` events with the line as JSON, then an `end` event)",
            content((JobLogPage = "application/json"), (String = "text/plain"), (String = "text/event-stream"))),
        (status = 404, description = "No such job (or another tenant's)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn get_job_logs(
    State(state): State<AppState>,
    auth: TenantAuth,
    ApiPath(job_id): ApiPath<Uuid>,
    headers: HeaderMap,
    ApiQuery(params): ApiQuery<LogParams>,
) -> ApiResult<Response> {
    params.check()?;
    let mut conn = state.db.acquire().await?;
    if !stored::tenant_has_job(&mut conn, job_id, auth.tenant_id).await? {
        return Err(ApiError::NotFound("job"));
    }
    let filter = LineFilter { node: params.node, rank: params.rank };
    let resumed = headers.get("last-event-id").and_then(|v| v.to_str().ok()?.trim().parse::<i64>().ok());
    let from = resumed.or(params.after);
    if params.follow == Some(true) {
        let after = start_after(&mut conn, job_id, from, params.tail, filter).await?;
        drop(conn);
        let events = logs::follow(state.db.clone(), &state.log_wakeups, job_id, after, filter).flat_map(move |next| {
            let events: Vec<Result<Event, Infallible>> = match next {
                Ok(Followed::Lines(lines)) => lines
                    .iter()
                    .map(|line| {
                        let event = Event::default().event("line").id(line.line.to_string());
                        Ok(event
                            .json_data(line)
                            .unwrap_or_else(|_| Event::default().event("error").data("unencodable line")))
                    })
                    .collect(),
                Ok(Followed::End { lost_lines, first_line }) => vec![Ok(Event::default()
                    .event("end")
                    .data(serde_json::json!({"lost_lines": lost_lines, "first_line": first_line}).to_string()))],
                Err(err) => {
                    tracing::error!(%err, %job_id, "following a job's logs");
                    vec![Ok(Event::default().event("error").data("the service could not read the log; reconnect"))]
                }
            };
            futures_util::stream::iter(events)
        });
        let mut response = Sse::new(events).keep_alive(KeepAlive::default()).into_response();
        // Proxies must pass events on as they come.
        response.headers_mut().insert("x-accel-buffering", HeaderValue::from_static("no"));
        return Ok(response);
    }
    if params.format == Some(LogFormat::Text) {
        let after = start_after(&mut conn, job_id, from, params.tail, filter).await?;
        drop(conn);
        let db = state.db.clone();
        let pages = futures_util::stream::unfold(Some(after), move |cursor| {
            let db = db.clone();
            async move {
                let after = cursor?;
                let read = async {
                    let mut conn = db.acquire().await?;
                    logs::page(&mut conn, job_id, Window::After(after), DOWNLOAD_BATCH, filter).await
                };
                match read.await {
                    Ok(page) => {
                        let next = (page.lines.len() as i64 == DOWNLOAD_BATCH).then_some(page.next_after);
                        let text: String = page.lines.iter().map(|l| l.render()).collect();
                        Some((Ok::<_, std::io::Error>(text), next))
                    }
                    Err(err) => {
                        tracing::error!(%err, %job_id, "downloading a job's logs");
                        Some((Err(std::io::Error::other("the service could not read the log")), None))
                    }
                }
            }
        });
        let disposition = format!("attachment; filename=\"job-{job_id}.log\"");
        return Ok((
            [
                (header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8")),
                (header::CONTENT_DISPOSITION, HeaderValue::from_str(&disposition).map_err(anyhow::Error::from)?),
            ],
            Body::from_stream(pages),
        )
            .into_response());
    }
    let limit = params.limit.unwrap_or(1000);
    let window = match params.tail {
        Some(tail) => Window::Tail(tail),
        None => Window::After(params.after.unwrap_or(0)),
    };
    let page = logs::page(&mut conn, job_id, window, limit, filter).await?;
    Ok(axum::Json(page).into_response())
}

/// Where a download or a follow starts: after a line, or before the last `tail` lines.
async fn start_after(
    conn: &mut sqlx::PgConnection,
    job_id: Uuid,
    after: Option<i64>,
    tail: Option<i64>,
    filter: LineFilter,
) -> Result<i64, sqlx::Error> {
    match (after, tail) {
        (Some(after), _) => Ok(after.max(0)),
        (None, Some(tail)) => {
            let page = logs::page(conn, job_id, Window::Tail(tail), tail, filter).await?;
            Ok(page.lines.first().map_or(page.next_after, |l| l.line - 1))
        }
        (None, None) => Ok(0),
    }
}
