//! Database connection, creation and migrations.

use std::time::Duration;

use sqlx::migrate::MigrateDatabase;
use sqlx::postgres::{PgPool, PgPoolOptions};

use crate::config::DatabaseArgs;

/// The migrations in `migrations/`, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Create the database if it does not exist, connect, run pending migrations and apply the allocation core.
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
    migrate(&pool).await?;
    Ok(pool)
}

/// Run pending migrations, then apply the allocation core (`leases::allocation`), which lives in a source file
/// of its own rather than in a migration so that changing it never edits a landed one.
pub async fn migrate(pool: &PgPool) -> anyhow::Result<()> {
    MIGRATOR.run(pool).await?;
    crate::leases::allocation::install(pool).await?;
    Ok(())
}
