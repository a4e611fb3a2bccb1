//! The task file `gpuplane run` takes (docs/cli.md): what to rent, what to run on it, with what code and data.
//! Pure: parsed and checked here, every error naming its line and field; turned into API requests by `tenant`.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// A task file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// A name for the task (shown only).
    #[serde(default)]
    pub name: Option<String>,
    /// What to rent. Give this, or `lease`.
    #[serde(default)]
    pub resources: Option<Resources>,
    /// Run on a lease the tenant already has, by id.
    #[serde(default)]
    pub lease: Option<String>,
    /// The job's template: `auto` with a model, `torchrun-ddp` without (the default), or any other.
    #[serde(default)]
    pub template: Option<String>,
    /// The model, as the API takes it (`{"preset": "llama2-7b"}`, `{"hf": {...}}`).
    #[serde(default)]
    pub model: Option<Value>,
    /// The workload, as the API takes it (`{"kind": "lora", "seq_len": 2048, "global_batch": 32}`).
    #[serde(default)]
    pub workload: Option<Value>,
    /// The planner's pins, as the API takes them (`{"tp": 2, "micro_batch": 2}`).
    #[serde(default)]
    pub pins: Option<Value>,
    /// The template's parameters, as the API takes them.
    #[serde(default)]
    pub parameters: Option<Value>,
    /// The working directory to upload, relative to the task file (default: none).
    #[serde(default)]
    pub workdir: Option<String>,
    /// The tenant's volumes to attach to a new lease, by name.
    #[serde(default)]
    pub volumes: Vec<VolumeMount>,
    /// A shell script run on every node before `run` (installs, downloads): the job's `setup`.
    #[serde(default)]
    pub setup: Option<String>,
    /// The job's command (the template's `command`: a script, or a program and its arguments).
    #[serde(default)]
    pub run: Vec<String>,
    /// Extra arguments after the command.
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Names of secret variables: their values are read from the environment `gpuplane run` runs in, and never
    /// written anywhere.
    #[serde(default)]
    pub secrets: Vec<String>,
    /// The job's restart policy, as the API takes it.
    #[serde(default)]
    pub restart: Option<Value>,
}

/// What to rent.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    /// A GPU model key (`h100`, `a100-80g`): any pool of it.
    #[serde(default)]
    pub gpu: Option<String>,
    /// A pool, by id.
    #[serde(default)]
    pub pool: Option<String>,
    /// How many GPUs.
    #[serde(default)]
    pub gpus: Option<u32>,
    /// How long, hours.
    #[serde(default)]
    pub hours: Option<u32>,
    /// `pack` or `spread`.
    #[serde(default)]
    pub placement: Option<String>,
    /// Wait in the pool's queue when capacity is short, instead of failing.
    #[serde(default)]
    pub queue: bool,
    /// Instead of `gpu`/`pool`, `gpus` and `hours`: the cheapest option of the advice that finishes `tokens` by the
    /// deadline and within the budget.
    #[serde(default)]
    pub cheapest: Option<Cheapest>,
}

/// The cheapest option that meets a deadline and a budget.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cheapest {
    /// Tokens to train on in all.
    pub tokens: u64,
    #[serde(default)]
    pub deadline_hours: Option<f64>,
    /// In minor units of the pools' currency (cents).
    #[serde(default)]
    pub budget_minor: Option<i64>,
}

/// A volume to attach.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VolumeMount {
    pub name: String,
    /// Where jobs see it: `/volumes/<mount>` (default: its name).
    #[serde(default)]
    pub mount: Option<String>,
    #[serde(default)]
    pub read_only: bool,
}

/// A task file's fault: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskError {
    pub line: Option<usize>,
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for TaskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: `{}`: {}", self.field, self.message),
            None => write!(f, "`{}`: {}", self.field, self.message),
        }
    }
}

/// Parse and check a task file; every fault found, each with its line where the file shows one.
pub fn parse(text: &str) -> Result<Task, Vec<TaskError>> {
    let deserializer = serde_yaml_ng::Deserializer::from_str(text);
    let task: Task = serde_path_to_error::deserialize(deserializer).map_err(|err| {
        let field = err.path().to_string();
        let inner = err.into_inner();
        let line = inner.location().map(|l| l.line());
        let message = inner.to_string();
        // serde_yaml's message ends with its own "at line L column C": the line is said once, first.
        let message = message.split(" at line ").next().unwrap_or(&message).to_string();
        vec![TaskError { line, field: if field == "." { "(task)".into() } else { field }, message }]
    })?;
    let errors = check(&task);
    if errors.is_empty() {
        return Ok(task);
    }
    Err(errors.into_iter().map(|(field, message)| TaskError { line: line_of(text, &field), field, message }).collect())
}

/// The rules between fields, as (field, message).
fn check(task: &Task) -> Vec<(String, String)> {
    let mut errors = Vec::new();
    let mut error = |field: &str, message: &str| errors.push((field.to_string(), message.to_string()));
    match (&task.resources, &task.lease) {
        (None, None) => error("resources", "say what to rent (`resources`), or name a `lease` to run on"),
        (Some(_), Some(_)) => error("lease", "either `resources` or `lease`, not both"),
        (Some(r), None) => match &r.cheapest {
            Some(cheapest) => {
                if r.gpu.is_some() || r.pool.is_some() || r.gpus.is_some() || r.hours.is_some() {
                    error(
                        "resources.cheapest",
                        "the advice chooses the pool, GPUs and hours: leave out gpu, pool, gpus and hours",
                    );
                }
                if task.model.is_none() || task.workload.is_none() {
                    error("resources.cheapest", "the advice needs the task's `model` and `workload`");
                }
                if cheapest.tokens == 0 {
                    error("resources.cheapest.tokens", "the tokens to train on, at least 1");
                }
                if cheapest.deadline_hours.is_some_and(|h| !(h > 0.0 && h.is_finite())) {
                    error("resources.cheapest.deadline_hours", "a positive number of hours");
                }
                if cheapest.budget_minor.is_some_and(|b| b <= 0) {
                    error("resources.cheapest.budget_minor", "a positive amount in minor units");
                }
            }
            None => {
                if r.gpu.is_some() == r.pool.is_some() {
                    error("resources.gpu", "a GPU model (`gpu`) or a pool id (`pool`): one of them");
                }
                if r.pool.as_deref().is_some_and(|p| uuid::Uuid::parse_str(p).is_err()) {
                    error("resources.pool", "a pool id (a UUID)");
                }
                if !r.gpus.is_some_and(|g| (1..=4096).contains(&g)) {
                    error("resources.gpus", "how many GPUs: 1 to 4096");
                }
                if !r.hours.is_some_and(|h| (1..=8784).contains(&h)) {
                    error("resources.hours", "how many hours: 1 to 8784");
                }
            }
        },
        (None, Some(lease)) => {
            if uuid::Uuid::parse_str(lease).is_err() {
                error("lease", "a lease id (a UUID)");
            }
            if !task.volumes.is_empty() {
                error("volumes", "volumes are attached to a new lease: attach them to an existing one with the API");
            }
        }
    }
    if let Some(r) = &task.resources
        && r.placement.as_deref().is_some_and(|p| !["pack", "spread"].contains(&p))
    {
        error("resources.placement", "`pack` or `spread`");
    }
    if task.run.is_empty() && task.model.is_none() {
        error("run", "the command to run (a script, or a program and its arguments)");
    }
    if task.model.is_none() && task.template.is_none() {
        error("template", "without a model, name the template to run (`gpuplane templates` lists them)");
    }
    for (i, name) in task.secrets.iter().enumerate() {
        if task.env.contains_key(name) {
            errors.push((format!("secrets[{i}]"), format!("`{name}` is also in `env`")));
        }
    }
    for (i, volume) in task.volumes.iter().enumerate() {
        if volume.name.trim().is_empty() {
            errors.push((format!("volumes[{i}].name"), "a volume's name".into()));
        }
    }
    errors
}

/// The line of a field's key (`resources.gpus` looks for `gpus:` after `resources:`); of its nearest parent the file
/// shows when the key itself is missing.
fn line_of(text: &str, field: &str) -> Option<usize> {
    let mut from = 0;
    let mut found = None;
    for part in field.split('.') {
        let key = part.split('[').next().unwrap_or(part);
        let Some(hit) = text.lines().enumerate().skip(from).find(|(_, line)| {
            let trimmed = line.trim_start().trim_start_matches("- ");
            trimmed.starts_with(&format!("{key}:"))
        }) else {
            break;
        };
        found = Some(hit.0 + 1);
        from = hit.0 + 1;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "name: lora\nresources:\n  gpu: a100-80g\n  gpus: 4\n  hours: 2\nmodel: {preset: llama2-7b}\n\
                        workload: {kind: lora, seq_len: 2048, global_batch: 32}\nworkdir: .\n\
                        setup: |\n  pip install -r requirements.txt\n  echo ready\n\
                        run: [train.py]\nenv: {EPOCHS: \"1\"}\nsecrets: [HF_TOKEN]\n";

    #[test]
    fn a_task_file_parses() {
        let task = parse(GOOD).unwrap();
        let r = task.resources.unwrap();
        assert_eq!((r.gpu.as_deref(), r.gpus, r.hours), (Some("a100-80g"), Some(4), Some(2)));
        assert_eq!(task.run, ["train.py"]);
        assert_eq!(task.setup.as_deref(), Some("pip install -r requirements.txt\necho ready\n"));
        assert_eq!(task.secrets, ["HF_TOKEN"]);
    }

    #[test]
    fn faults_name_their_line_and_field() {
        let errors = parse("resources:\n  gpu: h100\n  gpus: many\n  hours: 1\nrun: [x]\ntemplate: t\n").unwrap_err();
        assert_eq!((errors[0].line, errors[0].field.as_str()), (Some(3), "resources.gpus"), "{errors:?}");
        let errors = parse("resources:\n  gpu: h100\n  gpus: 2\n  hours: 1\n  colour: red\nrun: [x]\ntemplate: t\n")
            .unwrap_err();
        assert_eq!(errors[0].line, Some(5), "{errors:?}");
        assert!(errors[0].message.contains("unknown field `colour`"), "{errors:?}");
        let errors =
            parse("resources:\n  gpu: h100\n  gpus: 0\n  placement: wide\nrun: [x]\ntemplate: t\n").unwrap_err();
        let said: Vec<(Option<usize>, &str)> = errors.iter().map(|e| (e.line, e.field.as_str())).collect();
        assert_eq!(said, [(Some(3), "resources.gpus"), (Some(1), "resources.hours"), (Some(4), "resources.placement")]);
        let errors = parse("lease: not-an-id\nresources: {gpu: h100, gpus: 1, hours: 1}\n").unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["lease", "run", "template"]);
        let errors = parse("resources:\n  cheapest: {tokens: 1000}\n  gpus: 4\nrun: [x]\ntemplate: t\n").unwrap_err();
        assert_eq!(errors[0].field, "resources.cheapest");
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(parse(": :\n- [").unwrap_err()[0].line.is_some());
    }
}
