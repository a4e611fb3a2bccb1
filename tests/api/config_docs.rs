//! docs/configuration.md must equal what the flags' definitions generate. Regenerate with
//! `UPDATE_DOCS=1 cargo test --test api config_docs`.

const COMMITTED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md");

#[test]
fn committed_configuration_doc_matches_the_flags() {
    let generated = gpuplane::cli::configuration_markdown();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(COMMITTED, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(COMMITTED).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/configuration.md is stale: run `UPDATE_DOCS=1 cargo test --test api config_docs` and commit the result"
    );
}

#[test]
fn every_serve_and_agent_flag_and_variable_is_in_the_doc() {
    use clap::CommandFactory;
    let doc = gpuplane::cli::configuration_markdown();
    let cli = gpuplane::cli::Cli::command();
    for name in ["serve", "agent"] {
        let command = cli.find_subcommand(name).unwrap();
        for arg in command.get_arguments().filter(|arg| !matches!(arg.get_id().as_str(), "help" | "version")) {
            let long = arg.get_long().unwrap();
            assert!(doc.contains(&format!("| `--{long}` |")), "{name} --{long} missing");
            let env = arg.get_env().unwrap_or_else(|| panic!("{name} --{long} has no environment fallback"));
            assert!(doc.contains(&format!("`{}`", env.to_string_lossy())), "{name} {env:?} missing");
        }
    }
    for flag in ["--secure-cookies", "--webhook-retry-schedule-secs", "--network-gbps", "--env-ports", "--rdma"] {
        assert!(doc.contains(&format!("`{flag}`")), "{flag}");
    }
}

/// The README names API paths as the OpenAPI document does (`/v1/leases/{lease_id}/...`, not `{id}`).
#[test]
fn the_readme_writes_paths_as_the_spec_does() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let spec = serde_json::to_value(gpuplane::router::openapi_document()).unwrap();
    let paths: Vec<&String> = spec["paths"].as_object().unwrap().keys().collect();
    let mut checked = 0;
    for (start, _) in readme.match_indices("/v1/") {
        let path: String =
            readme[start..].chars().take_while(|c| c.is_ascii_alphanumeric() || "/{}_-.".contains(*c)).collect();
        let path = path.trim_end_matches(['.', '/']);
        if !path.contains('{') {
            continue;
        }
        checked += 1;
        assert!(
            paths.iter().any(|p| *p == path || p.starts_with(&format!("{path}/"))),
            "README: `{path}` is not a path (or the start of one) of the OpenAPI document"
        );
    }
    assert!(checked > 20, "{checked}");
}

/// `bootstrap` says which database it used, so a key made in the wrong one is seen at once.
#[sqlx::test]
async fn bootstrap_names_its_database(db: sqlx::PgPool) {
    let url = crate::support::binary::database_url(&db);
    let name = db.connect_options().get_database().unwrap().to_owned();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_gpuplane"))
        .args(["bootstrap", "--database-url", &url])
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&output.stdout).trim().starts_with("gpk_"), "the key on stdout");
    assert!(stderr.contains(&format!("using database `{name}` on ")), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    assert_eq!(gpuplane::cli::database_label("postgres://u:secret@db:5433/x"), "database `x` on db:5433");
}
