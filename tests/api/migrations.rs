//! Landed migrations are never edited: sqlx refuses to start against a database that applied a migration whose
//! text changed. `migrations/CHECKSUMS` records each migration's SHA-384 (what sqlx stores) when it lands; this
//! test fails on an edited migration, and on a new one until its line is added.

use sha2::{Digest, Sha384};

#[test]
fn landed_migrations_keep_their_recorded_checksums() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let recorded = std::fs::read_to_string(dir.join("CHECKSUMS")).unwrap();
    let recorded: std::collections::BTreeMap<&str, &str> =
        recorded.lines().filter_map(|line| line.split_once(' ')).collect();
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".sql"))
        .collect();
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
            None => panic!("{name} is new: record `{name} {checksum}` in migrations/CHECKSUMS"),
        }
    }
    assert_eq!(recorded.len(), files.len(), "CHECKSUMS names a migration that is gone");
}
