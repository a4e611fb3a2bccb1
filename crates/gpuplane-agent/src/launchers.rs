//! What this host can launch jobs with: the programs of [`LAUNCHERS`] on the PATH jobs see (the agent's own, as
//! `launch` passes it on), with the version each prints. Reported at registration (and on a heartbeat when it
//! changed), so the service refuses a job whose template needs a launcher the host lacks instead of the tenant
//! learning it from exit code 127.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpuplane_protocol::agent::{LAUNCHERS, Launchers, MAX_LAUNCHER_VERSION_CHARS};

use crate::sandbox::find_on_path;

/// How long one version query may take (`python3 -c 'import torch'` loads CUDA libraries: seconds).
const QUERY_TIMEOUT: Duration = Duration::from_secs(20);

/// Look for every launcher of [`LAUNCHERS`]; `container_runtime` is the program the agent starts images with.
pub fn detect(container_runtime: &str) -> Launchers {
    let mut found = Launchers::new();
    let python = find_on_path("python3");
    for name in LAUNCHERS {
        let version = match name {
            "python3" => python.as_ref().map(|p| version_of(p, &["--version"])),
            "torch" => python.as_ref().and_then(|p| python_import(p, "torch", "torch.__version__")),
            "gpuplane_runtime" => python
                .as_ref()
                .and_then(|p| python_import(p, "gpuplane_runtime", "getattr(gpuplane_runtime, '__version__', '')")),
            "sshd" => sshd().map(|p| version_of(&p, &["-V"])),
            "container_runtime" => find_on_path(container_runtime).map(|p| version_of(&p, &["--version"])),
            program => find_on_path(program).map(|p| version_of(&p, &["--version"])),
        };
        if let Some(version) = version {
            found.insert(name.to_owned(), version);
        }
    }
    found
}

/// sshd usually lives in an sbin directory that a service's PATH may lack.
fn sshd() -> Option<PathBuf> {
    find_on_path("sshd").or_else(|| {
        ["/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd"].iter().map(PathBuf::from).find(|p| p.is_file())
    })
}

/// Some(version) when `python -c 'import module'` works; the inner Option is the version it prints.
fn python_import(python: &Path, module: &str, expr: &str) -> Option<Option<String>> {
    let script = format!("import {module}; print({expr})");
    let (ok, text) = run(python, &["-c", &script])?;
    ok.then(|| version_in(&text))
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
    fn a_launcher_without_a_version_is_said_plainly() {
        let found = [("sshd".to_string(), None), ("torchrun".to_string(), Some("2.9.1".to_string()))].into();
        assert_eq!(describe(Some(&found)), "sshd (version not told), torchrun 2.9.1");
        assert_eq!(describe(Some(&Default::default())), "none");
        assert_eq!(describe(None), "not looked for");
    }
}
