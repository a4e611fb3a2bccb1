//! Database connection, creation and migrations.

use std::time::Duration;

use sqlx::migrate::MigrateDatabase;
use sqlx::postgres::{PgPool, PgPoolOptions};

use crate::config::DatabaseArgs;

/// The migrations in `migrations/`, embedded in the binary by the store.
pub use gpuplane_store::MIGRATOR;

/// A JSON value stored by the service read back as its type (a plan, template parameters, launchers, a restart
/// policy): a value that does not fit is a decoding error, as when the statement decoded it.
pub fn decode_json<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Result<T, sqlx::Error> {
    serde_json::from_value(value).map_err(|e| sqlx::Error::Decode(Box::new(e)))
}

/// Create the database if it does not exist, connect, and run pending migrations.
pub async fn connect_and_migrate(args: &DatabaseArgs) -> anyhow::Result<PgPool> {
    if !sqlx::Postgres::database_exists(&args.database_url).await? {
        tracing::info!("creating database");
        // Two replicas starting together may race here; the loser sees "already exists".
        if let Err(err) = sqlx::Postgres::create_database(&args.database_url).await
            && !sqlx::Postgres::database_exists(&args.database_url).await?
        {
            return Err(err.into());
        }
    }
    let pool = PgPoolOptions::new()
        .max_connections(args.db_max_connections)
        .acquire_timeout(Duration::from_secs(5))
        .connect(&args.database_url)
        .await?;
    MIGRATOR.run(&pool).await?;
    Ok(pool)
}
