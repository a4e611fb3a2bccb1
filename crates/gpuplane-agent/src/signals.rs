//! Process signals: both binaries stop on SIGINT or SIGTERM (systemd's stop) by cancelling a token.

use tokio_util::sync::CancellationToken;

/// Cancel `token` on SIGINT or SIGTERM.
pub fn cancel_on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        #[cfg(not(unix))]
        let term = std::future::pending::<()>();
        tokio::select! {
            _ = ctrl_c => {},
            _ = term => {},
        }
        tracing::info!("shutdown signal received; finishing what is in flight");
        token.cancel();
    });
}
