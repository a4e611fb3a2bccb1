//! Usage exports: every usage record of a period as CSV or JSON lines, streamed so memory stays flat however
//! many rows there are. The column schema is stable (documented in the README); new columns are only ever
//! appended.

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Datelike, TimeZone, Utc};
use futures_util::{StreamExt, TryStreamExt};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::auth::{OperatorAuth, TenantAuth};
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiQuery;
use crate::state::AppState;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormat {
    #[default]
    Csv,
    Jsonl,
}

#[derive(Debug, Clone, Copy, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExportParams {
    /// Records whose period starts at or after this (RFC 3339). Default: the start of this month (UTC).
    #[serde(default, deserialize_with = "crate::extract::sane_time_opt")]
    #[param(pattern = r"^(19[7-9][0-9]|[2-9][0-9]{3})-")]
    pub from: Option<DateTime<Utc>>,
    /// Records whose period starts before this. Default: now.
    #[serde(default, deserialize_with = "crate::extract::sane_time_opt")]
    #[param(pattern = r"^(19[7-9][0-9]|[2-9][0-9]{3})-")]
    pub to: Option<DateTime<Utc>>,
    /// `csv` (default) or `jsonl`.
    pub format: Option<ExportFormat>,
    /// Operators only: one tenant.
    pub tenant_id: Option<Uuid>,
}

pub use gpuplane_store::billing::export::UsageRow;

pub const CSV_HEADER: &str = "record_id,tenant_id,lease_id,pool_id,pool_name,gpu_model,term,period_start,period_end,\
gpu_count,gpu_seconds,unit_price_minor,currency,amount_minor,volume_id,gib,gib_seconds\n";

/// CSV field: quoted only when it needs to be.
fn csv_field(out: &mut String, value: &str) {
    if value.contains([',', '"', '\n', '\r']) {
        out.push('"');
        out.push_str(&value.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(value);
    }
}

pub fn write_csv_row(out: &mut String, r: &UsageRow) {
    use std::fmt::Write;
    let optional = |v: Option<String>| v.unwrap_or_default();
    let lease = optional(r.lease_id.map(|id| id.to_string()));
    let _ = write!(out, "{},{},{},{},", r.record_id, r.tenant_id, lease, r.pool_id);
    csv_field(out, &r.pool_name);
    out.push(',');
    csv_field(out, &r.gpu_model);
    let _ = writeln!(
        out,
        ",{},{},{},{},{},{},{},{},{},{},{}",
        r.term,
        r.period_start.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        r.period_end.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        r.gpu_count,
        r.gpu_seconds,
        r.unit_price_minor,
        r.currency,
        r.amount_minor,
        optional(r.volume_id.map(|id| id.to_string())),
        optional(r.gib.map(|g| g.to_string())),
        optional(r.gib_seconds.map(|s| s.to_string())),
    );
}

fn start_of_month(t: DateTime<Utc>) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(t.year(), t.month(), 1, 0, 0, 0).single().unwrap_or(t)
}

/// Validate the range, run the query up to its first chunk, then stream the rest.
///
/// Everything that can be refused is refused before the first byte: the parameters, and the query itself (a
/// database that is down is a 503 problem, not a 200 with an empty body). A failure after streaming began
/// cannot change the status any more: the body then ends with an error, so the connection is aborted and the
/// client sees a broken transfer instead of a clean, silently short file; the failure is logged.
async fn stream_export(state: &AppState, tenant_id: Option<Uuid>, params: ExportParams) -> ApiResult<Response> {
    let now = Utc::now();
    let to = params.to.unwrap_or(now);
    let from = params.from.unwrap_or_else(|| start_of_month(to));
    if from >= to {
        return Err(ApiError::field("from", "must be before `to`"));
    }
    let format = params.format.unwrap_or_default();
    // A bounded channel between the query and the socket: a slow client slows the query, memory stays flat.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Bytes, sqlx::Error>>(8);
    let db = state.db.clone();
    tokio::spawn(async move {
        const CHUNK: usize = 64 * 1024;
        let mut buf = String::with_capacity(CHUNK + 1024);
        if format == ExportFormat::Csv {
            buf.push_str(CSV_HEADER);
        }
        let mut rows = gpuplane_store::billing::export::usage_rows(tenant_id, from, to).fetch(&db);
        loop {
            match rows.try_next().await {
                Ok(Some(row)) => {
                    match format {
                        ExportFormat::Csv => write_csv_row(&mut buf, &row),
                        ExportFormat::Jsonl => {
                            buf.push_str(&serde_json::to_string(&row).unwrap_or_default());
                            buf.push('\n');
                        }
                    }
                    if buf.len() >= CHUNK && tx.send(Ok(Bytes::from(std::mem::take(&mut buf)))).await.is_err() {
                        return; // the client went away
                    }
                }
                Ok(None) => break,
                Err(err) => {
                    let _ = tx.send(Err(err)).await;
                    return;
                }
            }
        }
        if !buf.is_empty() {
            let _ = tx.send(Ok(Bytes::from(buf))).await;
        }
    });
    // The first chunk (or the end, or the first failure) decides the status.
    let first = match rx.recv().await {
        Some(Ok(chunk)) => Some(chunk),
        Some(Err(err)) => return Err(err.into()),
        None => None,
    };
    let rest = futures_util::stream::unfold(rx, |mut rx| async move {
        match rx.recv().await? {
            Ok(chunk) => Some((Ok(chunk), rx)),
            Err(err) => {
                tracing::error!(error = %err, "usage export failed mid-stream; aborting the response");
                Some((Err(std::io::Error::other("usage export failed mid-stream")), rx))
            }
        }
    });
    let body = Body::from_stream(futures_util::stream::iter(first.map(Ok::<_, std::io::Error>)).chain(rest));
    let (content_type, extension) = match format {
        ExportFormat::Csv => ("text/csv; charset=utf-8", "csv"),
        ExportFormat::Jsonl => ("application/x-ndjson", "jsonl"),
    };
    let disposition =
        format!("attachment; filename=\"usage-{}-{}.{extension}\"", from.format("%Y%m%d"), to.format("%Y%m%d"));
    Ok(([(header::CONTENT_TYPE, content_type.to_string()), (header::CONTENT_DISPOSITION, disposition)], body)
        .into_response())
}

/// Export the caller's usage records for a period (streamed CSV or JSON lines).
#[utoipa::path(
    get, path = "/v1/billing/usage/export", tag = "billing", operation_id = "export_usage",
    params(ExportParams),
    responses(
        (status = 200, description = "Usage records, oldest first; CSV with a header row, or one JSON object per line",
            content((String = "text/csv"), (UsageRow = "application/x-ndjson"))),
        (status = 404, description = "`tenant_id` names another tenant (`not_found`)", body = crate::error::Problem, content_type = "application/problem+json"),
    )
)]
pub async fn export_usage(
    State(state): State<AppState>,
    auth: TenantAuth,
    ApiQuery(params): ApiQuery<ExportParams>,
) -> ApiResult<Response> {
    if params.tenant_id.is_some_and(|t| t != auth.tenant_id) {
        return Err(ApiError::NotFound("tenant"));
    }
    stream_export(&state, Some(auth.tenant_id), params).await
}

/// Export usage records across tenants for a period (streamed CSV or JSON lines).
#[utoipa::path(
    get, path = "/v1/admin/billing/usage/export", tag = "billing", operation_id = "admin_export_usage",
    params(ExportParams),
    responses((status = 200, description = "Usage records, oldest first; CSV with a header row, or one JSON object per line",
        content((String = "text/csv"), (UsageRow = "application/x-ndjson"))))
)]
pub async fn admin_export_usage(
    State(state): State<AppState>,
    _op: OperatorAuth,
    ApiQuery(params): ApiQuery<ExportParams>,
) -> ApiResult<Response> {
    stream_export(&state, params.tenant_id, params).await
}
