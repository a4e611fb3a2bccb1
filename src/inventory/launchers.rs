//! The launchers a node's agent reports (`launchers` of registration and heartbeat): validated here, stored on
//! the node (`nodes.launchers`), shown by the node and readiness views, and checked by job creation against what
//! the job's template needs ([`missing_launchers`]; the table of needs is `jobs::templates::Builtin::launchers`).
//!
//! A node whose agent never reported launchers (an agent older than this report) is allowed to run any template,
//! with a warning in the service's log: refusing would stop every job on a fleet mid-upgrade, while allowing only
//! keeps what happened before the report existed (the job fails at launch if the host lacks the program). An
//! external node (no agent) runs no jobs at all.

use uuid::Uuid;

use crate::error::{ApiError, FieldError};
pub use gpuplane_protocol::agent::{LAUNCHERS, Launchers, MAX_LAUNCHER_VERSION_CHARS};

/// Field errors for a reported set of launchers: known names only, versions bounded and printable.
pub fn validate(field: &str, launchers: &Launchers, errors: &mut Vec<FieldError>) {
    for (name, version) in launchers {
        if !LAUNCHERS.contains(&name.as_str()) {
            let known = LAUNCHERS.join(", ");
            errors.push(FieldError::new(
                format!("{field}.{}", truncate(name)),
                format!("unknown launcher; one of {known}"),
            ));
        }
        if version.as_deref().is_some_and(|v| {
            v.is_empty() || v.chars().count() > MAX_LAUNCHER_VERSION_CHARS || v.chars().any(char::is_control)
        }) {
            errors.push(FieldError::new(
                format!("{field}.{}", truncate(name)),
                format!("a version of 1-{MAX_LAUNCHER_VERSION_CHARS} printable characters, or null"),
            ));
        }
    }
}

fn truncate(name: &str) -> String {
    name.chars().filter(|c| !c.is_control()).take(32).collect()
}

/// What one node of a lease has to launch jobs with, as job creation checks it.
pub struct NodeLaunchers {
    pub node_id: Uuid,
    pub hostname: String,
    pub external: bool,
    /// None: never reported.
    pub launchers: Option<Launchers>,
}

/// Refuse a job that a node of its lease cannot run: 422 `launcher_missing`, naming the first such node (by
/// hostname) and every launcher of `needed` it lacks; `launcher_missing` too for an external node, which has no
/// agent to run anything. A node that never reported its launchers passes, with a warning logged.
pub fn missing_launchers(template: &str, needed: &[&str], nodes: &[NodeLaunchers]) -> Result<(), ApiError> {
    for node in nodes {
        let missing: Vec<&str> = match (&node.launchers, node.external) {
            (_, true) => vec!["gpuplane-agent"],
            (None, false) => {
                if !needed.is_empty() {
                    tracing::warn!(node.id = %node.node_id, hostname = %node.hostname, template,
                        "the node's agent never reported its launchers: the job is created unchecked");
                }
                continue;
            }
            (Some(found), false) => needed.iter().copied().filter(|n| !found.contains_key(*n)).collect(),
        };
        if missing.is_empty() {
            continue;
        }
        let message = if node.external {
            format!("node {} is external: no gpuplane agent runs jobs on it", node.hostname)
        } else {
            format!(
                "node {} cannot run the template {template}: it lacks {} (see docs/agent-install.md)",
                node.hostname,
                missing.join(", ")
            )
        };
        return Err(ApiError::Unprocessable {
            code: "launcher_missing",
            message,
            context: Some(serde_json::json!({
                "template": template, "node_id": node.node_id, "hostname": node.hostname, "missing": missing,
            })),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, launchers: Option<&[&str]>) -> NodeLaunchers {
        NodeLaunchers {
            node_id: Uuid::nil(),
            hostname: name.into(),
            external: false,
            launchers: launchers.map(|l| l.iter().map(|n| (n.to_string(), Some("1.0".to_string()))).collect()),
        }
    }

    #[test]
    fn the_first_node_lacking_a_launcher_is_named_with_what_it_lacks() {
        let nodes = [node("a", Some(&["torchrun"])), node("b", Some(&["python3"])), node("old", None)];
        let err = missing_launchers("deepspeed", &["torchrun", "deepspeed"], &nodes).unwrap_err();
        let ApiError::Unprocessable { code, message, context } = err else { panic!() };
        assert_eq!(code, "launcher_missing");
        assert!(message.contains("node a") && message.contains("deepspeed"), "{message}");
        assert_eq!(context.unwrap()["missing"], serde_json::json!(["deepspeed"]));
        assert!(missing_launchers("torchrun-ddp", &["torchrun"], &nodes[..1]).is_ok());
        assert!(missing_launchers("vllm", &["vllm"], &nodes[2..]).is_ok(), "never reported: allowed");
        let mut external = node("ext", None);
        external.external = true;
        assert!(missing_launchers("run", &[], &[external]).is_err(), "an external node runs no jobs");
    }

    #[test]
    fn reports_are_bounded() {
        let mut errors = Vec::new();
        let mut reported = Launchers::new();
        reported.insert("torchrun".into(), Some("2.5.1".into()));
        reported.insert("sshd".into(), None);
        validate("node.launchers", &reported, &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        reported.insert("rm -rf".into(), None);
        reported.insert("vllm".into(), Some("x".repeat(65)));
        validate("node.launchers", &reported, &mut errors);
        assert_eq!(errors.len(), 2, "{errors:?}");
    }
}
