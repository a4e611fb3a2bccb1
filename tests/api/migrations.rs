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
