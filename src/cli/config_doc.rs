//! docs/configuration.md, generated from the flags' definitions (`serve`'s in src/config.rs, the agent's in
//! crates/gpuplane-agent/src/args.rs), so the table cannot drift from the code: `tests/api/config_docs.rs`
//! compares it with the committed file, and `UPDATE_DOCS=1 cargo test --test api config_docs` rewrites it.

use std::fmt::Write;

/// The whole of docs/configuration.md, from the `gpuplane` command's definition.
pub fn markdown(cli: &clap::Command) -> String {
    let subcommand = |name: &str| cli.find_subcommand(name).cloned().expect("a subcommand of gpuplane");
    let mut doc = String::from(
        "# Configuration\n\n\
         <!-- Generated from the flags' definitions (src/config.rs, crates/gpuplane-agent/src/args.rs): edit those \
         and run `UPDATE_DOCS=1 cargo test --test api config_docs`; a test fails while this file differs. -->\n\n\
         Every flag of `gpuplane serve` and of the node agent has an environment fallback; a flag given wins over \
         its variable. `gpuplane --help` and `gpuplane SUBCOMMAND --help` print the same text.\n\n\
         ## `gpuplane serve`\n\n",
    );
    table(&mut doc, &subcommand("serve"));
    doc.push_str(
        "| (no flag) | `GPUPLANE_SECRETS_KEY` | none | The secrets keyring itself instead of a file, entries comma-separated \
         or one a line; not both. A command line is visible to every user of the host, so there is no flag. |\n\n\
         `RUST_LOG` sets log levels (default `info`).\n\n\
         ## The node agent: `gpuplane-agent` (`gpuplane agent`)\n\n\
         The Debian package's unit runs `gpuplane-agent` with no flags: every setting comes from \
         `/etc/gpuplane/agent.env`, which lists each variable below, commented (docs/agent-install.md). At start the \
         agent logs the host's address, bandwidth and RDMA, each `given`, `detected` or `default`.\n\n",
    );
    table(&mut doc, &subcommand("agent"));
    doc.push_str("\n## Subcommands\n\n");
    for sub in cli.get_subcommands().filter(|sub| !sub.is_hide_set() && sub.get_name() != "help") {
        let about = sub.get_about().map(|about| one_line(&about.to_string())).unwrap_or_default();
        let _ = writeln!(doc, "- `{}`: {about}", sub.get_name());
    }
    doc.push_str(
        "\n`bootstrap`, `migrate` and `rotate-secrets` take `--database-url` (`DATABASE_URL`) as `serve` does, and \
         print which database they used. Under `cargo run`, `.cargo/config.toml` sets `DATABASE_URL` to the \
         `postgres` database (for the tests): name the service's database, e.g. `cargo run -- bootstrap \
         --database-url postgres://postgres@127.0.0.1:5432/gpuplane`.\n",
    );
    doc
}

/// One row per flag: flag, environment variable, default, meaning (the flag's full help).
fn table(doc: &mut String, command: &clap::Command) {
    doc.push_str("| flag | environment | default | meaning |\n|---|---|---|---|\n");
    for arg in command.get_arguments().filter(|arg| !arg.is_hide_set()) {
        let Some(long) = arg.get_long() else { continue };
        if matches!(long, "help" | "version") {
            continue;
        }
        let env = arg.get_env().map(|env| format!("`{}`", env.to_string_lossy())).unwrap_or_else(|| "none".into());
        let defaults: Vec<String> =
            arg.get_default_values().iter().map(|value| value.to_string_lossy().into_owned()).collect();
        let default = match defaults.is_empty() {
            // A switch (`--dev`): off unless given.
            true if !arg.get_action().takes_values() => "`false`".to_owned(),
            true => "none".to_owned(),
            false => format!("`{}`", defaults.join(",")),
        };
        let help = arg.get_long_help().or(arg.get_help()).map(|help| help.to_string()).unwrap_or_default();
        let mut meaning = one_line(&help);
        if !meaning.ends_with(['.', ')']) {
            meaning.push('.');
        }
        let values: Vec<String> = arg
            .get_possible_values()
            .iter()
            .filter(|value| !value.is_hide_set())
            .map(|value| format!("`{}`", value.get_name()))
            .collect();
        if arg.get_action().takes_values() && !values.is_empty() && !values.iter().any(|v| v == "`true`") {
            let _ = write!(meaning, " One of {}.", values.join(", "));
        }
        let _ = writeln!(doc, "| `--{long}` | {env} | {default} | {} |", meaning.replace('|', "\\|"));
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
