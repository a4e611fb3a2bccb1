//! The `gpuplane` command line: `serve`, `migrate`, `openapi`, `bootstrap`.

use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::app::{AppState, cancel_on_signal, openapi_document, run, spawn_background};
use crate::auth::Role;
use crate::config::{DatabaseArgs, LogFormat, ServeArgs};
use crate::telemetry::init_logging;

#[derive(Debug, Parser)]
#[command(name = "gpuplane", version, about = "Control plane of a GPU rental platform")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the API server (creates the database if missing and runs migrations first).
    Serve(ServeArgs),
    /// Create the database if missing and run pending migrations, then exit.
    Migrate(DatabaseArgs),
    /// Print the OpenAPI document as JSON.
    Openapi,
    /// Create the first operator API key and print it once. Refuses when an operator key exists.
    Bootstrap {
        #[command(flatten)]
        database: DatabaseArgs,
        /// A label for the key.
        #[arg(long, default_value = "bootstrap")]
        name: String,
    },
}

pub async fn execute(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => serve(args).await,
        Command::Migrate(db) => {
            init_logging(LogFormat::Text);
            crate::db::connect_and_migrate(&db).await?;
            println!("database is migrated");
            Ok(())
        }
        Command::Openapi => {
            println!("{}", serde_json::to_string_pretty(&openapi_document())?);
            Ok(())
        }
        Command::Bootstrap { database, name } => {
            init_logging(LogFormat::Text);
            let pool = crate::db::connect_and_migrate(&database).await?;
            let key = bootstrap_operator(&pool, &name).await?;
            println!("{key}");
            eprintln!("This is the operator API key. It is shown once: store it now.");
            Ok(())
        }
    }
}

/// Create the first operator key. Serialized with an advisory lock so two concurrent bootstraps cannot both win.
pub async fn bootstrap_operator(pool: &sqlx::PgPool, name: &str) -> anyhow::Result<String> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('gpuplane.bootstrap'))").execute(&mut *tx).await?;
    let (exists,): (bool,) =
        sqlx::query_as("SELECT EXISTS (SELECT 1 FROM api_keys WHERE role = 'operator')").fetch_one(&mut *tx).await?;
    if exists {
        anyhow::bail!("an operator already exists; create further keys with the API");
    }
    let created = crate::auth::routes::insert_api_key(&mut tx, None, name, Role::Operator).await?;
    tx.commit().await?;
    Ok(created.api_key)
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    init_logging(args.log_format);
    let settings = args.settings()?;
    let pool = crate::db::connect_and_migrate(&args.database).await?;
    let state = AppState::new(pool, settings)?;
    let listener = tokio::net::TcpListener::bind(args.bind).await?;
    let addr = listener.local_addr()?;
    // Printed on stdout so scripts and tests can read the port when binding to port 0.
    println!("gpuplane listening on http://{addr}");
    tracing::info!(%addr, "listening");
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone());
    let background = spawn_background(&state, &shutdown);
    run(listener, state, shutdown).await?;
    for task in background {
        let _ = task.await;
    }
    tracing::info!("stopped");
    Ok(())
}
