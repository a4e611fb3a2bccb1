//! What this host can launch jobs with: the programs of [`LAUNCHERS`] on the PATH jobs see (the agent's own, as
//! `launch` passes it on), with the version each prints. Reported at registration (and on a heartbeat when it
//! changed), so the service refuses a job whose template needs a launcher the host lacks instead of the tenant
//! learning it from exit code 127.
//!
//! Python's launchers are asked without importing them: `import torch` takes seconds (tens of seconds on a busy
//! host), and it was asked three times (torch, the runtime, torchrun), so registration waited for it. Instead one
//! short Python process per interpreter reads the packages' metadata (`importlib.util.find_spec`, then
//! `importlib.metadata.version`): a package found is reported with its distribution's version; a console script
//! (`torchrun`, `deepspeed`, `vllm`, `accelerate`) with the version of the distribution that ships it, read by
//! the interpreter its `#!` line names.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpuplane_protocol::agent::{Launchers, MAX_LAUNCHER_VERSION_CHARS};

use crate::sandbox::find_on_path;

/// How long one version query may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(20);

/// The Python modules reported by name: (launcher, module, distribution).
const PYTHON_MODULES: [(&str, &str, &str); 2] =
    [("torch", "torch", "torch"), ("gpuplane_runtime", "gpuplane_runtime", "gpuplane-runtime")];

/// The console scripts and the distribution that ships each.
const CONSOLE_SCRIPTS: [(&str, &str); 4] =
    [("torchrun", "torch"), ("deepspeed", "deepspeed"), ("vllm", "vllm"), ("accelerate", "accelerate")];

/// Prints, per argument `module:distribution`, a line `found <version>` (empty when the metadata has none) or
/// `missing`; the first line is the interpreter's own version. Imports nothing of the packages.
const METADATA_QUERY: &str = "import sys, importlib.util as u, importlib.metadata as m
print(sys.version.split()[0])
for arg in sys.argv[1:]:
    mod, dist = arg.split(':')
    try:
        found = u.find_spec(mod) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        print('missing')
        continue
    try:
        print('found', m.version(dist))
    except Exception:
        print('found')
";

/// Look for every launcher of [`LAUNCHERS`]; `container_runtime` is the program the agent starts images with.
pub fn detect(container_runtime: &str) -> Launchers {
    let mut found = Launchers::new();
    // What each Python interpreter is asked, so that each starts once: the PATH's `python3` for the modules, and
    // the interpreter each console script names for the distribution that ships it.
    let path_python = find_on_path("python3");
    let mut asked: Vec<(PathBuf, Vec<(&str, String)>)> = Vec::new();
    if let Some(python) = &path_python {
        let modules = PYTHON_MODULES.iter().map(|(name, module, dist)| (*name, format!("{module}:{dist}"))).collect();
        asked.push((python.clone(), modules));
    }
    for (name, dist) in CONSOLE_SCRIPTS {
        let Some(script) = find_on_path(name) else { continue };
        let Some(python) = python_of(&script) else {
            found.insert(name.to_owned(), version_of(&script, &["--version"]));
            continue;
        };
        // Found whatever its interpreter answers; the version when the metadata has one.
        found.insert(name.to_owned(), None);
        let query = (name, format!("{dist}:{dist}"));
        match asked.iter_mut().find(|(p, _)| *p == python) {
            Some((_, queries)) => queries.push(query),
            None => asked.push((python, vec![query])),
        }
    }
    for (python, queries) in &asked {
        let Some((version, answers)) = python_metadata(python, queries) else { continue };
        if path_python.as_ref() == Some(python) {
            found.insert("python3".to_owned(), version);
        }
        found.extend(answers);
    }
    if let Some(sshd) = sshd() {
        found.insert("sshd".to_owned(), version_of(&sshd, &["-V"]));
    }
    if let Some(runtime) = find_on_path(container_runtime) {
        found.insert("container_runtime".to_owned(), version_of(&runtime, &["--version"]));
    }
    found
}

/// The interpreter's version and, for each (launcher, `module:distribution`) it finds, the distribution's
/// version; None when the interpreter does not answer.
fn python_metadata(python: &Path, queries: &[(&str, String)]) -> Option<(Option<String>, Launchers)> {
    let mut args = vec!["-c", METADATA_QUERY];
    args.extend(queries.iter().map(|(_, q)| q.as_str()));
    let (ok, text) = run(python, &args)?;
    if !ok {
        return None;
    }
    let mut lines = text.lines();
    let version = lines.next().and_then(version_in);
    let answers = queries
        .iter()
        .zip(lines)
        .filter_map(|((name, _), line)| {
            let version = line.strip_prefix("found")?;
            Some(((*name).to_owned(), version_in(version)))
        })
        .collect();
    Some((version, answers))
}

/// The Python interpreter a script's `#!` line names (`#!/usr/bin/python3`, `#!/usr/bin/env python3`), if any.
fn python_of(script: &Path) -> Option<PathBuf> {
    let mut head = [0u8; 256];
    let read = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let first = String::from_utf8_lossy(&head[..read]);
    let line = first.lines().next()?.strip_prefix("#!")?.trim();
    let mut words = line.split_whitespace();
    let program = words.next()?;
    let interpreter = if program.ends_with("/env") { words.next()? } else { program };
    let name = Path::new(interpreter).file_name()?.to_string_lossy();
    if !name.starts_with("python") {
        return None;
    }
    if interpreter.contains('/') { Some(PathBuf::from(interpreter)) } else { find_on_path(interpreter) }
}

/// sshd usually lives in an sbin directory that a service's PATH may lack.
fn sshd() -> Option<PathBuf> {
    find_on_path("sshd").or_else(|| {
        ["/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd"].iter().map(PathBuf::from).find(|p| p.is_file())
    })
}

/// The version a found program prints (None when it prints none we recognise, or fails to answer).
fn version_of(program: &Path, args: &[&str]) -> Option<String> {
    run(program, args).and_then(|(_, text)| version_in(&text))
}

/// Run a program with no input, bounded in time; (exited successfully, stdout and stderr).
fn run(program: &Path, args: &[&str]) -> Option<(bool, String)> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < QUERY_TIMEOUT => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                tracing::warn!(program = %program.display(), "no answer to a version query in {QUERY_TIMEOUT:?}");
                return None;
            }
        }
    };
    let mut text = String::new();
    for pipe in [
        child.stdout.take().map(|p| Box::new(p) as Box<dyn Read>),
        child.stderr.take().map(|p| Box::new(p) as Box<dyn Read>),
    ]
    .into_iter()
    .flatten()
    {
        let mut bytes = Vec::new();
        let _ = pipe.take(64 * 1024).read_to_end(&mut bytes);
        text.push_str(&String::from_utf8_lossy(&bytes));
        text.push('\n');
    }
    Some((status.success(), text))
}

/// The first token that looks like a version (a digit first, a dot inside), e.g. `2.5.1+cu124` from
/// `torch 2.5.1+cu124`, `9.6p1` from `OpenSSH_9.6p1, OpenSSL 3.0.13`; cut to the protocol's bound.
pub fn version_in(text: &str) -> Option<String> {
    text.split(|c: char| c.is_whitespace() || c == '_' || c == ',' || c == '(' || c == ')' || c == '"')
        .map(|t| t.trim_start_matches('v').trim_end_matches(['.', ':', ';']))
        .find(|t| t.starts_with(|c: char| c.is_ascii_digit()) && t.contains('.'))
        .map(|t| t.chars().filter(|c| !c.is_control()).take(MAX_LAUNCHER_VERSION_CHARS).collect())
}

/// The launchers as a log line says them: `python3 3.11.2, torchrun 2.9.1, sshd (version not told)`; `none`
/// when nothing was found, `not looked for` without a lookup.
pub fn describe(found: Option<&gpuplane_protocol::agent::Launchers>) -> String {
    let Some(found) = found else { return "not looked for".to_string() };
    if found.is_empty() {
        return "none".to_string();
    }
    found
        .iter()
        .map(|(name, version)| match version {
            Some(version) => format!("{name} {version}"),
            None => format!("{name} (version not told)"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuplane_protocol::agent::LAUNCHERS;

    #[test]
    fn every_launcher_the_protocol_names_is_looked_for() {
        let mut looked_for: Vec<&str> = vec!["python3", "sshd", "container_runtime"];
        looked_for.extend(PYTHON_MODULES.iter().map(|m| m.0));
        looked_for.extend(CONSOLE_SCRIPTS.iter().map(|s| s.0));
        looked_for.sort();
        let mut named = LAUNCHERS.to_vec();
        named.sort();
        assert_eq!(looked_for, named);
    }

    #[test]
    fn versions_are_found_in_what_launchers_print() {
        assert_eq!(version_in("Python 3.12.3\n").as_deref(), Some("3.12.3"));
        assert_eq!(version_in("2.5.1+cu124\n").as_deref(), Some("2.5.1+cu124"));
        assert_eq!(
            version_in("OpenSSH_9.6p1 Ubuntu-3ubuntu13.5, OpenSSL 3.0.13 30 Jan 2024").as_deref(),
            Some("9.6p1")
        );
        assert_eq!(version_in("Docker version 27.3.1, build ce12230").as_deref(), Some("27.3.1"));
        assert_eq!(
            version_in("deepspeed info ................... 0.15.4, unknown, unknown").as_deref(),
            Some("0.15.4")
        );
        assert_eq!(version_in("usage: torchrun [-h]"), None);
    }

    #[test]
    fn detection_finds_this_hosts_python_and_only_known_names() {
        let found = detect("docker");
        assert!(found.keys().all(|k| LAUNCHERS.contains(&k.as_str())), "{found:?}");
        if find_on_path("python3").is_some() {
            assert!(
                found.get("python3").is_some_and(|v| v.as_deref().is_some_and(|v| v.starts_with('3'))),
                "{found:?}"
            );
        }
    }

    #[test]
    fn python_launchers_are_read_from_metadata_by_the_interpreter_their_script_names() {
        let dir = std::env::temp_dir().join(format!("gpuplane-launchers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let Some(python) = find_on_path("python3") else { return };
        let script = dir.join("torchrun");
        std::fs::write(&script, format!("#!{}\nimport sys\n", python.display())).unwrap();
        assert_eq!(python_of(&script), Some(python.clone()));
        std::fs::write(&script, "#!/usr/bin/env python3\n").unwrap();
        assert_eq!(python_of(&script), find_on_path("python3"));
        std::fs::write(&script, "#!/bin/sh\nexec true\n").unwrap();
        assert_eq!(python_of(&script), None, "not a Python script: asked for --version instead");
        // A module that is there (the standard library's json: no distribution, so no version), one that is not.
        let (version, answers) = python_metadata(
            &python,
            &[("json", "json:no-such-dist".to_string()), ("nothing", "no_such_module_x:x".to_string())],
        )
        .unwrap();
        assert!(version.is_some_and(|v| v.starts_with('3')));
        assert_eq!(answers, Launchers::from([("json".to_string(), None)]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_launcher_without_a_version_is_said_plainly() {
        let found = [("sshd".to_string(), None), ("torchrun".to_string(), Some("2.9.1".to_string()))].into();
        assert_eq!(describe(Some(&found)), "sshd (version not told), torchrun 2.9.1");
        assert_eq!(describe(Some(&Default::default())), "none");
        assert_eq!(describe(None), "not looked for");
    }
}
