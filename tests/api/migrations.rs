//! Landed migrations are never edited: sqlx refuses to start against a database that applied a migration whose
//! text changed. Each migration's SHA-384 (what sqlx stores) is recorded when it lands, in a ledger file that is
//! itself never edited afterwards: `migrations/CHECKSUMS` for 0001 to 0019, then one `migrations/CHECKSUMS.<version>`
//! per new migration (sqlx ignores both: their names are not `<version>_<description>.sql`). This test fails on an
//! edited migration, on a new one until its ledger file is added, and on a migration recorded twice.

use sha2::{Digest, Sha384};

#[test]
fn landed_migrations_keep_their_recorded_checksums() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().filter_map(|e| e.ok()?.file_name().into_string().ok()).collect();
    let mut recorded = std::collections::BTreeMap::new();
    for ledger in names.iter().filter(|name| *name == "CHECKSUMS" || name.starts_with("CHECKSUMS.")) {
        let text = std::fs::read_to_string(dir.join(ledger)).unwrap();
        for (name, checksum) in text.lines().filter_map(|line| line.split_once(' ')) {
            let earlier = recorded.insert(name.to_owned(), checksum.to_owned());
            assert!(earlier.is_none(), "{name} is recorded twice (again in {ledger})");
        }
    }
    let mut files: Vec<&String> = names.iter().filter(|name| name.ends_with(".sql")).collect();
    files.sort();
    assert!(files.len() >= 8, "{files:?}");
    for name in &files {
        let sql = std::fs::read(dir.join(name)).unwrap();
        let checksum: String = Sha384::digest(&sql).iter().map(|b| format!("{b:02x}")).collect();
        match recorded.get(name.as_str()) {
            Some(expected) => assert_eq!(
                &checksum, expected,
                "{name} changed after it landed: restore it and put the change in a new migration"
            ),
            None => {
                let version = name.split('_').next().unwrap();
                panic!("{name} is new: record `{name} {checksum}` in a new file migrations/CHECKSUMS.{version}")
            }
        }
    }
    assert_eq!(recorded.len(), files.len(), "a ledger names a migration that is gone");
}

/// The allocation core (`src/leases/allocation.sql`) is applied at every start-up, not as a migration: replicas
/// starting together apply it one after another (advisory lock), applying it again changes nothing, and a
/// database that holds an older body of a function gets the one this build carries.
#[sqlx::test]
async fn the_allocation_core_is_applied_idempotently_by_concurrent_replicas(db: sqlx::PgPool) {
    use gpuplane::leases::allocation::install;
    let body = |db: sqlx::PgPool| async move {
        let (src,): (String,) =
            sqlx::query_as("SELECT prosrc FROM pg_proc WHERE proname = 'gp_lease_end'").fetch_one(&db).await.unwrap();
        src
    };
    // Without the lock, two replicas replacing one function at once fail ("tuple concurrently updated").
    for _ in 0..5 {
        let applied = tokio::join!(install(&db), install(&db), install(&db), install(&db));
        assert!(applied.0.is_ok() && applied.1.is_ok() && applied.2.is_ok() && applied.3.is_ok(), "{applied:?}");
    }
    let installed = body(db.clone()).await;
    assert!(installed.contains("FOR UPDATE"), "{installed}");
    for function in ["gp_lease_admit", "gp_lease_write", "gp_lease_end", "gp_lease_gpus", "gp_lease_json"] {
        let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM pg_proc WHERE proname = $1")
            .bind(function)
            .fetch_one(&db)
            .await
            .unwrap();
        assert_eq!(n, 1, "{function}");
    }
    // An older replica's body is replaced by this build's.
    sqlx::raw_sql(
        "CREATE OR REPLACE FUNCTION gp_lease_json(l leases, gpus jsonb) RETURNS jsonb LANGUAGE sql STABLE \
         AS $$ SELECT '{}'::jsonb $$",
    )
    .execute(&db)
    .await
    .unwrap();
    install(&db).await.unwrap();
    let (json,): (String,) =
        sqlx::query_as("SELECT prosrc FROM pg_proc WHERE proname = 'gp_lease_json'").fetch_one(&db).await.unwrap();
    assert!(json.contains("to_jsonb"), "{json}");
    assert_eq!(body(db.clone()).await, installed);
}
