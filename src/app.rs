//! The server loop with graceful shutdown.

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::router::build_router;
use crate::state::AppState;

/// Serve until `shutdown` is cancelled; in-flight requests finish first.
pub async fn run(listener: TcpListener, state: AppState, shutdown: CancellationToken) -> anyhow::Result<()> {
    let router = build_router(state);
    // The peer address feeds the per-client throttling of the credential endpoints.
    axum::serve(listener, router.into_make_service_with_connect_info::<std::net::SocketAddr>())
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await?;
    Ok(())
}

/// Serve the gateway (services' callers) until `shutdown` is cancelled; answers in flight finish first.
/// Its request counts go to the database every few seconds, and once more at the end.
pub async fn run_gateway(listener: TcpListener, state: AppState, shutdown: CancellationToken) -> anyhow::Result<()> {
    let gateway = crate::gateway::Gateway::new(state.clone());
    let tally = gateway.tally.clone();
    let counting = {
        let (state, tally) = (state.clone(), tally.clone());
        tokio::spawn(crate::workers::every(
            "gateway_counts",
            crate::gateway::tally::FLUSH_EVERY,
            shutdown.clone(),
            move |_| {
                let (state, tally) = (state.clone(), tally.clone());
                async move {
                    crate::gateway::tally::flush(&state, &tally).await?;
                    Ok(crate::workers::Pace::Wait)
                }
            },
        ))
    };
    let router = crate::gateway::router(gateway);
    axum::serve(listener, router.into_make_service_with_connect_info::<std::net::SocketAddr>())
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await?;
    let _ = counting.await;
    if let Err(err) = crate::gateway::tally::flush(&state, &tally).await {
        tracing::warn!(err = format!("{err:#}"), "the gateway's last request counts were not written");
    }
    Ok(())
}

/// Cancel `token` on SIGINT or SIGTERM: one definition for the service and the agent.
pub use gpuplane_agent::signals::cancel_on_signal;
