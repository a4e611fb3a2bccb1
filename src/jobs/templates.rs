//! Launch templates: the six built-in ones (named in [`Builtin`]) and operators' custom argv templates with typed
//! parameters. Pure: validation and parameter resolution only; rendering a job is [`super::launch_specs`].
//!
//! A custom template is an argv whose elements may hold `{placeholders}`: its own parameters, the launch
//! variables ([`LAUNCH_VARS`]), the plan's figures ([`PLAN_VARS`]), and two splices that must stand alone as an
//! element: `{command}` (the job's command) and `{args}` (its extra arguments; appended at the end when absent).
//! Nothing is ever handed to a shell, and shell metacharacters are refused anyway (in literal text, defaults,
//! enum values and supplied values), so a template cannot smuggle a second command in.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::FieldError;

/// Launch variables every template may use.
pub const LAUNCH_VARS: &[&str] =
    &["nnodes", "node_rank", "nproc_per_node", "world_size", "master_addr", "master_port", "job_id"];
/// The plan's figures (a job with a model only).
pub const PLAN_VARS: &[&str] =
    &["tp", "pp", "dp", "vp", "micro_batch", "grad_accum", "global_batch", "zero_stage", "seq_len"];
/// Splices: the job's command and extra arguments, each a whole argv element.
pub const SPLICE_VARS: &[&str] = &["command", "args"];

/// Most argv elements, parameters and characters per element of a custom template.
pub const MAX_ARGV: usize = 256;
pub const MAX_PARAMS: usize = 64;
pub const MAX_ARG_CHARS: usize = 4096;

/// Characters a shell would act on. Values containing them are refused although no shell is ever used.
pub const SHELL_METACHARACTERS: &[char] = &[';', '|', '&', '$', '`', '<', '>', '(', ')', '{', '}', '\n', '\r', '\0'];

/// The first shell metacharacter in `text`, if any.
pub fn shell_metachar(text: &str) -> Option<char> {
    text.chars().find(|c| SHELL_METACHARACTERS.contains(c))
}

fn metachar_message(c: char) -> String {
    let shown = match c {
        '\n' => "a newline".to_string(),
        '\r' => "a carriage return".to_string(),
        '\0' => "a NUL byte".to_string(),
        c => format!("`{c}`"),
    };
    format!("contains {shown}: shell metacharacters are not allowed (arguments are passed without a shell)")
}

/// The built-in templates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Builtin {
    /// The gpuplane runtime (`gpuplane_runtime.parallelize`) applies the plan to a PyTorch model, launched with
    /// torchrun.
    #[serde(rename = "gpuplane-runtime")]
    Runtime,
    /// Data parallel with torchrun and PyTorch DDP.
    TorchrunDdp,
    /// Fully sharded data parallel with torchrun and PyTorch FSDP.
    TorchrunFsdp,
    /// DeepSpeed ZeRO stage 1, 2 or 3 (launched with torchrun).
    Deepspeed,
    /// Megatron-LM 3D parallelism: tensor, pipeline and data.
    Megatron,
    /// vLLM tensor-parallel serving.
    Vllm,
    /// Data-parallel Stable Diffusion batch generation.
    DiffusionDp,
}

/// What a host needs to run any job with an image.
pub const IMAGE_LAUNCHERS: &[&str] = &["container_runtime"];

impl Builtin {
    pub const ALL: [Builtin; 7] = [
        Builtin::Runtime,
        Builtin::TorchrunDdp,
        Builtin::TorchrunFsdp,
        Builtin::Deepspeed,
        Builtin::Megatron,
        Builtin::Vllm,
        Builtin::DiffusionDp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Builtin::Runtime => "gpuplane-runtime",
            Builtin::TorchrunDdp => "torchrun-ddp",
            Builtin::TorchrunFsdp => "torchrun-fsdp",
            Builtin::Deepspeed => "deepspeed",
            Builtin::Megatron => "megatron",
            Builtin::Vllm => "vllm",
            Builtin::DiffusionDp => "diffusion-dp",
        }
    }

    pub fn by_name(name: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|b| b.name() == name)
    }

    pub fn description(self) -> &'static str {
        match self {
            Builtin::TorchrunDdp => {
                "Data parallel with torchrun and PyTorch DDP: one process per GPU, `command` is the training script \
                 (e.g. [\"train.py\"] or [\"python3\", \"train.py\"])."
            }
            Builtin::Runtime => {
                "The plan applied to a PyTorch model by the gpuplane runtime: the training script calls \
                 `gpuplane_runtime.parallelize(model, ...)`, which reads the plan (gpuplane_plan.json) and applies \
                 its data, tensor and pipeline parallelism, ZeRO stage, recompute and precision; each step's time, \
                 tokens and loss are reported. Launched with torchrun; `command` is the training script."
            }
            Builtin::TorchrunFsdp => {
                "PyTorch FSDP through Hugging Face Accelerate: `accelerate launch --config_file \
                 accelerate_config.json` with the plan's sharding strategy (from its ZeRO stage), offload, \
                 activation checkpointing and precision. `command` is the training script."
            }
            Builtin::Deepspeed => {
                "DeepSpeed ZeRO 1/2/3 launched with torchrun; ds_config.json holds the plan's stage, micro-batch and \
                 accumulation; the script gets `--deepspeed --deepspeed_config ds_config.json`."
            }
            Builtin::Megatron => {
                "Megatron-LM 3D parallelism (tensor, pipeline, data) with torchrun; the plan's degrees, micro-batch, \
                 recompute and model shape as arguments (also in megatron_args.txt). `command` defaults to \
                 [\"pretrain_gpt.py\"]."
            }
            Builtin::Vllm => {
                "vLLM serving with the plan's tensor/pipeline parallel degrees and one data-parallel replica per \
                 group of GPUs on each node."
            }
            Builtin::DiffusionDp => {
                "Data-parallel diffusion batch generation: one replica per GPU with torchrun, each generating \
                 its share of a JSONL file of prompts with the runtime's `gpuplane_runtime.images` (a PNG per \
                 line); `command` replaces that module with a script of the tenant's."
            }
        }
    }

    /// What a host must have to run this template without an image (names of
    /// `gpuplane_protocol::agent::LAUNCHERS`, as its agent reports them): the one table of these needs, checked
    /// by job creation against every node of the lease (`inventory::launchers::missing_launchers`) and listed per
    /// template in docs/agent-install.md. With an image the host needs only `container_runtime`
    /// ([`IMAGE_LAUNCHERS`]): the template's programs come with the image.
    pub fn launchers(self) -> &'static [&'static str] {
        match self {
            Builtin::Runtime => &["torchrun", "gpuplane_runtime"],
            Builtin::TorchrunDdp | Builtin::Megatron => &["torchrun"],
            Builtin::DiffusionDp => &["torchrun", "gpuplane_runtime"],
            Builtin::TorchrunFsdp => &["accelerate"],
            Builtin::Deepspeed => &["torchrun", "deepspeed"],
            Builtin::Vllm => &["vllm"],
        }
    }

    /// The typed parameters a job may set.
    pub fn parameters(self) -> Vec<TemplateParam> {
        match self {
            Builtin::Vllm => vec![
                TemplateParam {
                    name: "served_model".into(),
                    kind: ParamType::String,
                    default: None,
                    values: Vec::new(),
                    description: Some("Model to serve (Hugging Face id or path); default: the preset name".into()),
                },
                TemplateParam {
                    name: "port".into(),
                    kind: ParamType::Int,
                    default: Some(serde_json::json!(8000)),
                    values: Vec::new(),
                    description: Some("HTTP port of the OpenAI-compatible server".into()),
                },
            ],
            Builtin::DiffusionDp => {
                let text = |name: &str, default: Option<&str>, description: &str| TemplateParam {
                    name: name.into(),
                    kind: ParamType::String,
                    default: default.map(|d| serde_json::json!(d)),
                    values: Vec::new(),
                    description: Some(description.into()),
                };
                vec![
                    text(
                        "prompts",
                        Some("prompts.jsonl"),
                        "JSONL file of {\"prompt\"} lines (optional negative_prompt, seed); replica r of n takes lines i with i % n == r",
                    ),
                    text(
                        "output",
                        Some("images"),
                        "Directory of the images (images/NNNNNNNN.png) and each replica's part file",
                    ),
                    text(
                        "diffusers_model",
                        None,
                        "Diffusers pipeline to load: a directory (a volume, /models) or a Hugging Face id; default: $GPUPLANE_MODEL",
                    ),
                ]
            }
            _ => Vec::new(),
        }
    }
}

/// A parameter's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ParamType {
    String,
    Int,
    Float,
    Bool,
    /// One of `values`.
    Enum,
}

/// A typed template parameter, e.g. `{"name": "lr", "type": "float", "default": 0.0003}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TemplateParam {
    /// `[a-z_][a-z0-9_]*`, used as `{name}` in the argv.
    #[schema(max_length = 64, pattern = r"^[a-z_][a-z0-9_]*$")]
    pub name: String,
    #[serde(rename = "type")]
    pub kind: ParamType,
    /// Used when a job does not set it; without a default the parameter is required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = any_value)]
    pub default: Option<serde_json::Value>,
    /// The allowed values of an `enum` parameter.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(inline, value_type = Vec<ValueText>)]
    pub values: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(pattern = r"^[^\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]*$")]
    pub description: Option<String>,
}

/// One piece of an argv element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Literal(String),
    Var(String),
}

/// Split an argv element into literal text and `{name}` placeholders.
pub fn parse_element(element: &str) -> Result<Vec<Segment>, String> {
    let mut out = Vec::new();
    let mut rest = element;
    while let Some(open) = rest.find(['{', '}']) {
        if rest[open..].starts_with('}') {
            return Err("a `}` without its `{`".into());
        }
        if open > 0 {
            out.push(Segment::Literal(rest[..open].to_string()));
        }
        let after = &rest[open + 1..];
        let close = after.find('}').ok_or("a `{` without its `}`")?;
        let name = &after[..close];
        if !is_identifier(name) {
            return Err(format!("`{{{name}}}` is not a placeholder: names are [a-z_][a-z0-9_]*"));
        }
        out.push(Segment::Var(name.to_string()));
        rest = &after[close + 1..];
    }
    if !rest.is_empty() {
        out.push(Segment::Literal(rest.to_string()));
    }
    Ok(out)
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 64
}

/// A custom template as an operator submits it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "finetune", "description": "Our fine-tuning entry point",
    "argv": ["torchrun", "--nnodes={nnodes}", "--nproc-per-node={nproc_per_node}", "--node-rank={node_rank}",
             "--master-addr={master_addr}", "--master-port={master_port}", "finetune.py", "--lr={lr}", "--optim={optim}", "{args}"],
    "parameters": [{"name": "lr", "type": "float", "default": 0.0003},
                   {"name": "optim", "type": "enum", "values": ["adamw", "lion"], "default": "adamw"}]}))]
pub struct TemplateSpec {
    /// `[a-z0-9][a-z0-9._-]*`; not a built-in name. An existing name gets a new version.
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The launch command, one element per argument, with `{placeholders}`.
    pub argv: Vec<String>,
    #[serde(default)]
    pub parameters: Vec<TemplateParam>,
}

impl TemplateSpec {
    /// Every problem, as field errors: unknown placeholders, bad types, shell metacharacters, bad names.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 63
            && self.name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            && self.name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c));
        if !name_ok {
            errors.push(FieldError::new(
                "name",
                "1-63 characters of a-z, 0-9, `.`, `_`, `-`, starting with a letter or digit",
            ));
        } else if self.name == "auto" || Builtin::by_name(&self.name).is_some() {
            errors.push(FieldError::new("name", "is a built-in template name"));
        }
        if self.description.chars().count() > 1000 {
            errors.push(FieldError::new("description", "at most 1000 characters"));
        }
        let mut names = BTreeSet::new();
        if self.parameters.len() > MAX_PARAMS {
            errors.push(FieldError::new("parameters", format!("at most {MAX_PARAMS} parameters")));
        }
        for (i, p) in self.parameters.iter().enumerate() {
            let field = |f: &str| format!("parameters[{i}].{f}");
            if !is_identifier(&p.name) {
                errors.push(FieldError::new(field("name"), "[a-z_][a-z0-9_]*, at most 64 characters"));
            } else if LAUNCH_VARS.contains(&p.name.as_str())
                || PLAN_VARS.contains(&p.name.as_str())
                || SPLICE_VARS.contains(&p.name.as_str())
            {
                errors.push(FieldError::new(field("name"), "is a reserved placeholder name"));
            } else if !names.insert(p.name.as_str()) {
                errors.push(FieldError::new(field("name"), "duplicate parameter name"));
            }
            if p.kind == ParamType::Enum {
                if p.values.is_empty() {
                    errors.push(FieldError::new(field("values"), "an enum needs at least one value"));
                }
                for (j, v) in p.values.iter().enumerate() {
                    if let Some(c) = shell_metachar(v) {
                        errors.push(FieldError::new(format!("parameters[{i}].values[{j}]"), metachar_message(c)));
                    } else if v.is_empty() || v.chars().count() > 256 {
                        errors.push(FieldError::new(format!("parameters[{i}].values[{j}]"), "1-256 characters"));
                    }
                }
            } else if !p.values.is_empty() {
                errors.push(FieldError::new(field("values"), "only enum parameters have values"));
            }
            if let Some(default) = &p.default
                && let Err(message) = value_to_arg(p, default)
            {
                errors.push(FieldError::new(field("default"), message));
            }
            if p.description.as_ref().is_some_and(|d| d.chars().count() > 500) {
                errors.push(FieldError::new(field("description"), "at most 500 characters"));
            }
        }
        if self.argv.is_empty() || self.argv.len() > MAX_ARGV {
            errors.push(FieldError::new("argv", format!("1-{MAX_ARGV} elements")));
        }
        for (i, element) in self.argv.iter().enumerate() {
            let field = format!("argv[{i}]");
            if element.chars().count() > MAX_ARG_CHARS {
                errors.push(FieldError::new(field, format!("at most {MAX_ARG_CHARS} characters")));
                continue;
            }
            if i == 0 && element.trim().is_empty() {
                errors.push(FieldError::new(field, "the program must not be empty"));
                continue;
            }
            let segments = match parse_element(element) {
                Ok(segments) => segments,
                Err(message) => {
                    errors.push(FieldError::new(field, message));
                    continue;
                }
            };
            for segment in &segments {
                match segment {
                    Segment::Literal(text) => {
                        if let Some(c) = shell_metachar(text) {
                            errors.push(FieldError::new(field.clone(), metachar_message(c)));
                        }
                    }
                    Segment::Var(var) if SPLICE_VARS.contains(&var.as_str()) => {
                        if segments.len() != 1 {
                            errors.push(FieldError::new(
                                field.clone(),
                                format!("`{{{var}}}` stands for several arguments: it must be a whole element"),
                            ));
                        }
                    }
                    Segment::Var(var) => {
                        if !names.contains(var.as_str())
                            && !LAUNCH_VARS.contains(&var.as_str())
                            && !PLAN_VARS.contains(&var.as_str())
                        {
                            errors.push(FieldError::new(field.clone(), format!("unknown placeholder `{{{var}}}`")));
                        }
                    }
                }
            }
        }
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }
}

/// A JSON value of parameter `p` as the argument text it becomes; the error says why it does not fit.
pub fn value_to_arg(p: &TemplateParam, value: &serde_json::Value) -> Result<String, String> {
    use serde_json::Value;
    let text = match (p.kind, value) {
        (ParamType::String, Value::String(s)) => {
            if s.chars().count() > MAX_ARG_CHARS {
                return Err(format!("at most {MAX_ARG_CHARS} characters"));
            }
            s.clone()
        }
        (ParamType::Int, Value::Number(n)) if n.is_i64() || n.is_u64() => n.to_string(),
        (ParamType::Float, Value::Number(n)) => match n.as_f64() {
            Some(f) if f.is_finite() => n.to_string(),
            _ => return Err("must be a finite number".into()),
        },
        (ParamType::Bool, Value::Bool(b)) => b.to_string(),
        (ParamType::Enum, Value::String(s)) => {
            if !p.values.contains(s) {
                return Err(format!("must be one of: {}", p.values.join(", ")));
            }
            s.clone()
        }
        (kind, other) => {
            let expected = match kind {
                ParamType::String => "a string",
                ParamType::Int => "an integer",
                ParamType::Float => "a number",
                ParamType::Bool => "true or false",
                ParamType::Enum => "a string",
            };
            return Err(format!("must be {expected}, not {other}"));
        }
    };
    if let Some(c) = shell_metachar(&text) {
        return Err(metachar_message(c));
    }
    Ok(text)
}

/// The parameters' values for a job: supplied ones checked against their type, the rest from defaults. Errors
/// name `parameters.<name>`.
pub fn resolve_params(
    params: &[TemplateParam],
    supplied: &BTreeMap<String, serde_json::Value>,
) -> Result<BTreeMap<String, String>, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut out = BTreeMap::new();
    for name in supplied.keys() {
        if !params.iter().any(|p| &p.name == name) {
            errors.push(FieldError::new(format!("parameters.{name}"), "the template has no such parameter"));
        }
    }
    for p in params {
        let field = format!("parameters.{}", p.name);
        match supplied.get(&p.name).or(p.default.as_ref()) {
            Some(value) => match value_to_arg(p, value) {
                Ok(text) => {
                    out.insert(p.name.clone(), text);
                }
                Err(message) => errors.push(FieldError::new(field, message)),
            },
            // Built-in templates may leave a parameter to a computed default (vLLM's served model).
            None if params_with_computed_default(&p.name) => {}
            None => errors.push(FieldError::new(field, "required: the template gives no default")),
        }
    }
    if errors.is_empty() { Ok(out) } else { Err(errors) }
}

fn params_with_computed_default(name: &str) -> bool {
    name == "served_model"
}

/// Check a list of arguments a tenant supplies (`command`, `args`): no shell metacharacters, bounded size.
pub fn check_args(field: &str, args: &[String], errors: &mut Vec<FieldError>) {
    if args.len() > MAX_ARGV {
        errors.push(FieldError::new(field, format!("at most {MAX_ARGV} elements")));
        return;
    }
    for (i, arg) in args.iter().enumerate() {
        if let Some(c) = shell_metachar(arg) {
            errors.push(FieldError::new(format!("{field}[{i}]"), metachar_message(c)));
        } else if arg.chars().count() > MAX_ARG_CHARS {
            errors.push(FieldError::new(format!("{field}[{i}]"), format!("at most {MAX_ARG_CHARS} characters")));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(argv: &[&str], parameters: serde_json::Value) -> TemplateSpec {
        TemplateSpec {
            name: "custom".into(),
            description: String::new(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            parameters: serde_json::from_value(parameters).unwrap(),
        }
    }

    fn fields(result: Result<(), Vec<FieldError>>) -> Vec<String> {
        result.unwrap_err().into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn placeholders_parse_and_bad_braces_do_not() {
        assert_eq!(
            parse_element("--lr={lr}x").unwrap(),
            vec![Segment::Literal("--lr=".into()), Segment::Var("lr".into()), Segment::Literal("x".into())]
        );
        assert!(parse_element("{lr").is_err());
        assert!(parse_element("lr}").is_err());
        assert!(parse_element("{Lr}").is_err());
        assert!(parse_element("{}").is_err());
    }

    #[test]
    fn a_good_template_validates() {
        let t = spec(
            &["python3", "train.py", "--lr={lr}", "--nodes={nnodes}", "--tp={tp}", "{args}"],
            json!([{"name": "lr", "type": "float", "default": 0.0003}]),
        );
        t.validate().unwrap();
    }

    #[test]
    fn unknown_placeholders_bad_types_and_metacharacters_are_field_errors() {
        let t = spec(&["train", "--x={nope}"], json!([]));
        assert_eq!(fields(t.validate()), ["argv[1]"]);
        let t = spec(&["train", "{lr}"], json!([{"name": "lr", "type": "float", "default": "fast"}]));
        assert_eq!(fields(t.validate()), ["parameters[0].default"]);
        let t = spec(&["train", "{tag}"], json!([{"name": "tag", "type": "string", "default": "x; rm -rf /"}]));
        assert_eq!(fields(t.validate()), ["parameters[0].default"]);
        let t = spec(&["train", "; rm -rf /"], json!([]));
        assert_eq!(fields(t.validate()), ["argv[1]"]);
        for bad in ["a|b", "a&b", "$(id)", "`id`", "a>b", "a\nb", "(x)"] {
            let t = spec(&["train", bad], json!([]));
            assert_eq!(fields(t.validate()), ["argv[1]"], "{bad:?}");
        }
        let t = spec(&["train", "{o}"], json!([{"name": "o", "type": "enum", "values": ["a", "b;c"], "default": "a"}]));
        assert_eq!(fields(t.validate()), ["parameters[0].values[1]"]);
        let t = spec(&["train", "x{command}"], json!([]));
        assert_eq!(fields(t.validate()), ["argv[1]"]);
        let t = spec(&["train"], json!([{"name": "world_size", "type": "int"}]));
        assert_eq!(fields(t.validate()), ["parameters[0].name"]);
        let mut t = spec(&["train"], json!([]));
        t.name = "megatron".into();
        assert_eq!(fields(t.validate()), ["name"]);
    }

    #[test]
    fn supplied_values_are_typed_and_checked() {
        let params: Vec<TemplateParam> = serde_json::from_value(json!([
            {"name": "lr", "type": "float", "default": 0.0003},
            {"name": "steps", "type": "int"},
            {"name": "fast", "type": "bool", "default": false},
            {"name": "tag", "type": "string", "default": "run"},
        ]))
        .unwrap();
        let supplied: BTreeMap<String, serde_json::Value> =
            serde_json::from_value(json!({"steps": 100, "fast": true})).unwrap();
        let values = resolve_params(&params, &supplied).unwrap();
        assert_eq!(values["lr"], "0.0003");
        assert_eq!(values["steps"], "100");
        assert_eq!(values["fast"], "true");
        let bad: BTreeMap<String, serde_json::Value> =
            serde_json::from_value(json!({"steps": 1.5, "tag": "a;b", "other": 1})).unwrap();
        let errors: Vec<String> = resolve_params(&params, &bad).unwrap_err().into_iter().map(|e| e.field).collect();
        assert_eq!(errors, ["parameters.other", "parameters.steps", "parameters.tag"]);
        let missing = resolve_params(&params, &BTreeMap::new()).unwrap_err();
        assert_eq!(missing[0].field, "parameters.steps");
    }
}

/// Schema of a value of any JSON type (a parameter's default is a string, a number or a boolean).
fn any_value() -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new().schema_type(utoipa::openapi::schema::SchemaType::AnyValue).build()
}

/// One allowed value of an `enum` parameter (schema only: text without control characters).
#[derive(utoipa::ToSchema)]
#[schema(pattern = r"^[^\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]*$")]
#[allow(dead_code)]
struct ValueText(String);
