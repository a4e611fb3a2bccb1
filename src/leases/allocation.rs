//! The allocation core: the PL/pgSQL functions of `allocation.sql` that create, start and end leases, applied by the
//! service at start-up. `store` calls them; nothing else writes a lease's GPUs or its nodes' counters.

use sqlx::PgPool;

/// The functions as written, with `{{name}}` where a rule that Rust statements use too goes in.
const SOURCE: &str = include_str!("allocation.sql");

/// Advisory lock key under which replicas apply the functions one at a time ("gpuplane core" in ASCII).
const INSTALL_LOCK: i64 = 0x6770_636f_7265;

/// The functions as applied: `allocation.sql` with the one statement of each shared rule put in.
pub fn source() -> String {
    SOURCE
        .replace("{{key_check}}", &crate::auth::key_check_cte("p_key_id"))
        .replace("{{balance_covers}}", &crate::billing::balance_covers_sql("due.balance_minor", "due.required_minor"))
        .replace(
            "{{best_fit_lock}}",
            &super::store::best_fit_sql("p_pool_id", "p_gpu_count", "", "LIMIT 1 FOR UPDATE SKIP LOCKED", "id"),
        )
        .replace("{{best_fit_any}}", &super::store::best_fit_sql("p_pool_id", "p_gpu_count", "", "", "id"))
        .replace(
            "{{end_jobs}}",
            &crate::jobs::store::end_jobs_of_leases_ctes("SELECT p_lease_id", "p_job_state", "p_job_reason"),
        )
}

/// Apply the functions (`CREATE OR REPLACE`), in one transaction under an advisory lock so that replicas starting
/// together apply them one after another. Idempotent; run after the migrations, before serving.
pub async fn install(db: &PgPool) -> Result<(), sqlx::Error> {
    let mut tx = db.begin().await?;
    sqlx::query!("SELECT pg_advisory_xact_lock($1)", INSTALL_LOCK).execute(&mut *tx).await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(source())).execute(&mut *tx).await?;
    tx.commit().await
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_placeholder_is_filled() {
        let source = super::source();
        assert!(
            !source.contains("{{"),
            "a placeholder of allocation.sql has no rule: {}",
            &source[source.find("{{").unwrap()..]
        );
    }
}
