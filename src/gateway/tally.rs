//! This gateway process's count of each service's requests, per minute, added to the database's every few
//! seconds ([`flush`]) so that the figures of every service replica's gateway add up.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, DurationRound, Utc};
use uuid::Uuid;

use crate::services::stats::Counts;
use crate::state::AppState;
use gpuplane_store::services::RequestMinute;

/// How often the counts go to the database.
pub const FLUSH_EVERY: Duration = Duration::from_secs(5);

#[derive(Default)]
pub struct Tally {
    pending: Mutex<HashMap<(Uuid, DateTime<Utc>), Counts>>,
}

impl Tally {
    /// Count one request of `service`, answered with `status` after `took`, its answer reporting `output_tokens`.
    pub fn record(&self, service: Uuid, status: u16, took: Duration, output_tokens: u64) {
        let minute = Utc::now().duration_trunc(chrono::TimeDelta::minutes(1)).unwrap_or_else(|_| Utc::now());
        if let Ok(mut pending) = self.pending.lock() {
            pending.entry((service, minute)).or_default().add(status, took.as_secs_f64() * 1000.0, output_tokens);
        }
    }

    fn take(&self) -> Vec<RequestMinute> {
        let Ok(mut pending) = self.pending.lock() else { return Vec::new() };
        std::mem::take(&mut *pending)
            .into_iter()
            .map(|((service_id, minute), counts)| counts.into_minute(service_id, minute))
            .collect()
    }

    /// Counts that could not be written go back, to be added with the next.
    fn put_back(&self, minutes: Vec<RequestMinute>) {
        if let Ok(mut pending) = self.pending.lock() {
            for m in minutes {
                let key = (m.service_id, m.minute);
                pending.entry(key).or_default().merge(&Counts::from(m));
            }
        }
    }
}

/// Add what this process counted since the last flush to the database's counts (kept for the next flush if the
/// database does not answer).
pub async fn flush(state: &AppState, tally: &Tally) -> anyhow::Result<()> {
    let minutes = tally.take();
    if minutes.is_empty() {
        return Ok(());
    }
    let written = async {
        let mut tx = state.db.begin().await?;
        gpuplane_store::services::add_request_minutes(&mut tx, &minutes).await?;
        tx.commit().await?;
        anyhow::Ok(())
    }
    .await;
    if written.is_err() {
        tally.put_back(minutes);
    }
    written
}
