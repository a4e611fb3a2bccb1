//! The read-only model cache a host offers its leases (`gpuplane-agent --model-cache DIR`): a directory in the
//! Hugging Face hub layout (`DIR/hub/models--<org>--<name>/{blobs,snapshots,refs}`), mounted read-only at
//! [`MOUNT`] in every lease's sandbox with `HF_HOME` pointing at it. The agent reports the models it holds by
//! hub id; the service prefers those hosts for leases that name the model.

/// Where the cache is mounted inside a lease's sandbox (`HF_HOME`).
pub const MOUNT: &str = "/models";

/// The most models one host reports.
pub const MAX_MODELS: usize = 1024;

/// A model's hub id: `name` or `org/name`, each part 1-96 characters of ASCII letters, digits, `.`, `_`, `-`,
/// neither starting with `.` nor `-`, and no `--` (the hub layout's separator) anywhere. Never a path: no `..`,
/// no `/` beyond the one. Both sides check it: the agent before it names a directory by it, the service before it
/// stores it.
pub fn is_model_id(id: &str) -> bool {
    let part = |p: &str| {
        (1..=96).contains(&p.len())
            && !p.starts_with(['.', '-'])
            && !p.contains("--")
            && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    };
    let mut parts = id.split('/');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(name), None, None) => part(name),
        (Some(org), Some(name), None) => part(org) && part(name),
        _ => false,
    }
}

/// The hub layout's directory name for a model id (`org/name` -> `models--org--name`).
pub fn repo_folder(id: &str) -> String {
    format!("models--{}", id.replace('/', "--"))
}

/// The model id a hub-layout directory name stands for, if it is one (`models--org--name` -> `org/name`).
pub fn model_id_of(folder: &str) -> Option<String> {
    let rest = folder.strip_prefix("models--")?;
    let id = rest.replacen("--", "/", 1);
    is_model_id(&id).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_names_never_paths() {
        for ok in ["gpt2", "meta-llama/Llama-3.2-1B", "Qwen/Qwen3-0.6B", "org_1/m.v2"] {
            assert!(is_model_id(ok), "{ok}");
            assert_eq!(model_id_of(&repo_folder(ok)).as_deref(), Some(ok));
        }
        for bad in ["", "/", "a/", "/a", "a/b/c", "..", "../x", "a/..", ".hidden/x", "-a", "a--b/c", "a b", "é", "a\\b"]
        {
            assert!(!is_model_id(bad), "{bad:?}");
        }
        assert!(!is_model_id(&"a".repeat(97)));
        assert_eq!(model_id_of("datasets--x--y"), None);
        assert_eq!(model_id_of("models--..--x"), None);
    }
}
