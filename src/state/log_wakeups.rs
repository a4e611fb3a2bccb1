//! Wake-ups for a replica's log followers: one `LISTEN gpuplane_job_logs` connection (migration 0050's triggers
//! notify it with a job's id whenever that job's log moved or the job ended), fanned out to every follower, who
//! keeps the ones for its job. A follower that hears nothing still looks at its fallback interval: a notification
//! sent while the listener reconnected is lost, and a job's log also settles by time alone.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::broadcast;
use uuid::Uuid;

/// The channel the triggers notify.
pub const CHANNEL: &str = "gpuplane_job_logs";
/// How long a follower waits for a wake-up before it looks anyway.
pub const FALLBACK: Duration = Duration::from_secs(5);
/// Wake-ups held for a follower slower than the others (past them, it is told it lagged and looks at once).
const BUFFER: usize = 1024;

/// The listener, started with the first follower. Cheap to clone.
#[derive(Clone)]
pub struct LogWakeups {
    /// `None`: no listener; followers look every `fallback` (the service before NOTIFY, kept to measure it by).
    sender: Option<Arc<OnceLock<broadcast::Sender<Uuid>>>>,
    fallback: Duration,
}

impl Default for LogWakeups {
    fn default() -> Self {
        LogWakeups::listening(FALLBACK)
    }
}

impl LogWakeups {
    /// Followers woken by the listener, and looking anyway every `fallback`.
    pub fn listening(fallback: Duration) -> Self {
        LogWakeups { sender: Some(Arc::default()), fallback }
    }

    /// Followers that only poll, every `interval`.
    pub fn polling(interval: Duration) -> Self {
        LogWakeups { sender: None, fallback: interval }
    }

    /// A follower's wake-ups, from now on: subscribe before the first look, so nothing between is missed.
    pub fn subscribe(&self, db: &PgPool) -> Wakeups {
        let receiver = self.sender.as_ref().map(|cell| {
            cell.get_or_init(|| {
                let (sender, _) = broadcast::channel(BUFFER);
                tokio::spawn(listen(db.clone(), sender.clone()));
                sender
            })
            .subscribe()
        });
        Wakeups { receiver, fallback: self.fallback }
    }
}

/// One follower's wake-ups.
pub struct Wakeups {
    receiver: Option<broadcast::Receiver<Uuid>>,
    fallback: Duration,
}

impl Wakeups {
    /// Until `job_id`'s log moved (or may have: a lagged follower), or the fallback interval passed.
    pub async fn wait(&mut self, job_id: Uuid) {
        let Some(receiver) = &mut self.receiver else { return tokio::time::sleep(self.fallback).await };
        let heard = async {
            loop {
                match receiver.recv().await {
                    Ok(id) if id == job_id => return,
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => return,
                    Err(broadcast::error::RecvError::Closed) => std::future::pending::<()>().await,
                }
            }
        };
        let _ = tokio::time::timeout(self.fallback, heard).await;
    }
}

/// Hold the LISTEN connection for good, made anew a second after each failure.
async fn listen(db: PgPool, sender: broadcast::Sender<Uuid>) {
    loop {
        let Err(err) = relay(&db, &sender).await;
        tracing::warn!(error = %err, "log followers' LISTEN connection failed; they poll until it is back");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Listen on [`CHANNEL`] and pass each job id on, until the connection fails.
async fn relay(db: &PgPool, sender: &broadcast::Sender<Uuid>) -> Result<std::convert::Infallible, sqlx::Error> {
    let mut listener = PgListener::connect_with(db).await?;
    listener.listen(CHANNEL).await?;
    loop {
        let notification = listener.recv().await?;
        if let Ok(job_id) = notification.payload().parse::<Uuid>() {
            // No follower now is no error.
            let _ = sender.send(job_id);
        }
    }
}
