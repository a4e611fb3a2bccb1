//! Rendering a job into one launch spec per node of its lease: argv, environment and framework config files.
//! Pure: the caller supplies the lease's topology, the plan and the template.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::templates::{Builtin, LAUNCH_VARS, PLAN_VARS, Segment, parse_element};
use crate::error::FieldError;
use crate::planner::{ModelArch, Offload, Pins, Plan, PlanInput, Precision, Recompute, Workload, WorkloadKind};
pub use gpuplane_protocol::jobs::{LaunchSpec, PLAN_FILE, STEPS_FILE, SpecFile};

/// Names the plan file among a planned job's launch files (what `gpuplane_runtime` reads).
pub const PLAN_FILE_ENV: &str = "GPUPLANE_PLAN_FILE";
/// Where a job states its progress (`{"done", "total"}`), in its environment: its directory's
/// `gpuplane_progress.json`.
pub const PROGRESS_FILE_ENV: &str = "GPUPLANE_PROGRESS_FILE";
/// The port a serving job's server listens on (`serve.port`), in its environment.
pub const SERVE_PORT_ENV: &str = "GPUPLANE_SERVE_PORT";
/// Names the file where the runtime appends each step's measurements (the agent ships them).
pub const STEPS_FILE_ENV: &str = "GPUPLANE_METRICS_FILE";

/// Default rendezvous port on the first node.
pub const DEFAULT_MASTER_PORT: u16 = 29500;

/// Environment variables the launch sets; a job's own `env` may not override them.
pub const RESERVED_ENV: &[&str] = &[
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "NODE_RANK",
    "NNODES",
    "NPROC_PER_NODE",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "RANK",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GPUPLANE_JOB_ID",
    "GPUPLANE_NODE_ADDRS",
    RANK_PREFIX_ENV,
    SERVE_PORT_ENV,
    PROGRESS_FILE_ENV,
    PLAN_FILE_ENV,
    STEPS_FILE_ENV,
    "NCCL_IB_DISABLE",
    "NCCL_P2P_DISABLE",
    // Set by the agent's sandbox.
    "GPUPLANE_HOST_GPUS",
    gpuplane_protocol::jobs::STOP_NOTICE_ENV,
    "HOME",
    "USER",
    "LOGNAME",
];

/// torchrun's template for the prefix of each rank's lines (with `--tee=3`, which every template's torchrun gets):
/// the agent takes `[rankN]:` off a line into its rank, so a job's logs can be read per rank.
pub const RANK_PREFIX_ENV: &str = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE";
pub const RANK_PREFIX_TEMPLATE: &str = "[rank${rank}]:";
/// Where torchrun keeps its copy of the ranks' output, relative to the job's working directory.
pub const TORCHRUN_LOG_DIR: &str = "torchrun-logs";

/// A job's setup script, written into each part's working directory and run by [`with_setup`].
pub const SETUP_FILE: &str = "gpuplane-setup.sh";
/// Runs the setup script (its path, `$1`) with `sh -e` (it stops at its first failing command), then replaces
/// itself with the part's own argv (the rest, `"$@"`): the part's process, exit code and signals are the
/// command's, as without a setup.
const SETUP_WRAPPER: &str = concat!(
    "setup=$1; shift; sh -e \"./$setup\" || ",
    "{ status=$?; echo \"gpuplane: the job's setup failed (exit code $status)\" >&2; exit $status; }\n",
    "exec \"$@\""
);

/// A part that runs the job's setup before its command, on every node and every start (a restart included), in
/// its working directory with its environment; its output is the part's. A setup that fails fails the part with
/// the setup's exit code, and the command does not run.
pub fn with_setup(mut spec: LaunchSpec, setup: &str) -> LaunchSpec {
    spec.files.push(SpecFile { path: SETUP_FILE.into(), content: setup.to_string() });
    let mut argv: Vec<String> =
        ["/bin/sh", "-c", SETUP_WRAPPER, "gpuplane-setup", SETUP_FILE].map(str::to_owned).into();
    argv.append(&mut spec.argv);
    spec.argv = argv;
    spec
}

/// A node of the lease as a job sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSlot {
    pub node_id: Uuid,
    pub hostname: String,
    pub address: String,
    /// The lease's own address on this node (its network namespace there), when the node isolates leases.
    pub lease_address: Option<String>,
    /// The leased GPUs' indices on this node, ascending.
    pub gpu_indices: Vec<i32>,
    /// The node's network supports RDMA (InfiniBand/RoCE).
    pub rdma: bool,
}

impl NodeSlot {
    /// Where the job's processes on this node are reached by the lease's other nodes: the lease's own address
    /// there when the node isolates leases in network namespaces, else the node's address.
    pub fn rendezvous_address(&self) -> &str {
        self.lease_address.as_deref().unwrap_or(&self.address)
    }
}

/// The template a job renders.
#[derive(Debug, Clone, Copy)]
pub enum TemplateChoice<'a> {
    Builtin(Builtin),
    /// A custom template's argv (validated when it was created).
    Custom(&'a [String]),
}

/// Everything rendering needs.
pub struct RenderInput<'a> {
    pub job_id: Uuid,
    /// The lease's nodes in rank order (rank 0 first); each with at least one GPU.
    pub nodes: &'a [NodeSlot],
    /// GPUs of the pool's model talk peer to peer (false for PCIe-only cards such as RTX 4090 and A10).
    pub gpu_p2p: bool,
    pub master_port: u16,
    pub template: TemplateChoice<'a>,
    /// The validated planning input and its best plan (absent for a custom template without a model).
    pub planned: Option<(&'a PlanInput, &'a Plan)>,
    pub command: &'a [String],
    pub args: &'a [String],
    pub env: &'a BTreeMap<String, String>,
    pub params: &'a BTreeMap<String, String>,
    pub image: Option<&'a str>,
}

/// Pick the built-in template for a job named `auto`, before planning (the template's abilities bound the
/// plan, see [`template_pins`]): serving is vLLM (diffusion models: data-parallel generation); training runs
/// the gpuplane runtime, which applies the plan to the tenant's PyTorch model, unless the command is
/// Megatron-LM's own entry point (`pretrain_gpt.py`, also the default without a command): then Megatron.
pub fn auto_template(kind: WorkloadKind, model: &ModelArch, command: &[String]) -> Builtin {
    if model.diffusion.is_some() {
        return Builtin::DiffusionDp;
    }
    let megatron_script = command.iter().take(3).any(|a| a.rsplit('/').next() == Some("pretrain_gpt.py"));
    match kind {
        WorkloadKind::Inference => Builtin::Vllm,
        _ if command.is_empty() || megatron_script => Builtin::Megatron,
        _ => Builtin::Runtime,
    }
}

/// Restrict the planner's search to what a built-in template can run; a pin that contradicts it is a field error.
pub fn template_pins(
    template: Builtin,
    pins: &Pins,
    kind: WorkloadKind,
    model: &ModelArch,
) -> Result<Pins, FieldError> {
    let mut pins = pins.clone();
    let force = |field: &str, slot: &mut Option<u32>, value: u32, why: &str| -> Result<(), FieldError> {
        match *slot {
            Some(v) if v != value => {
                Err(FieldError::new(format!("pins.{field}"), format!("{}: {why}", template.name())))
            }
            _ => {
                *slot = Some(value);
                Ok(())
            }
        }
    };
    let training = matches!(kind, WorkloadKind::Train | WorkloadKind::Lora);
    match template {
        Builtin::TorchrunDdp | Builtin::TorchrunFsdp | Builtin::Deepspeed => {
            if !training {
                return Err(FieldError::new("workload.kind", format!("{} is for training", template.name())));
            }
            force("tp", &mut pins.tp, 1, "data parallel only, no tensor parallelism")?;
            force("pp", &mut pins.pp, 1, "data parallel only, no pipeline parallelism")?;
            force("cp", &mut pins.cp, 1, "data parallel only, no context parallelism")?;
            force("ep", &mut pins.ep, 1, "data parallel only, no expert parallelism")?;
            if template == Builtin::TorchrunDdp {
                match pins.offload {
                    Some(o) if o != Offload::None => {
                        return Err(FieldError::new("pins.offload", "torchrun-ddp: no CPU offload"));
                    }
                    _ => pins.offload = Some(Offload::None),
                }
            }
            match template {
                Builtin::TorchrunDdp => match pins.zero_stage {
                    Some(z) if z != 0 => {
                        return Err(FieldError::new("pins.zero_stage", "torchrun-ddp: plain DDP shards nothing (0)"));
                    }
                    _ => pins.zero_stage = Some(0),
                },
                Builtin::Deepspeed if pins.zero_stage == Some(0) => {
                    return Err(FieldError::new("pins.zero_stage", "deepspeed: ZeRO stage 1, 2 or 3"));
                }
                _ => {}
            }
        }
        Builtin::Megatron => {
            if !training {
                return Err(FieldError::new("workload.kind", "megatron is for training"));
            }
        }
        Builtin::Runtime => {
            if !training {
                return Err(FieldError::new("workload.kind", "gpuplane-runtime is for training"));
            }
            let runtime = super::runtime_capabilities::capabilities();
            if model.moe.is_some() && !runtime.mixture_of_experts {
                return Err(FieldError::new(
                    "model",
                    "gpuplane-runtime does not train mixtures of experts (the runtime refuses them): run the job \
                     with the megatron template (Megatron-LM's pretrain_gpt.py)",
                ));
            }
            if !runtime.context_parallel {
                force("cp", &mut pins.cp, 1, "the runtime applies data, tensor and pipeline parallelism, not context")?;
            }
            force("ep", &mut pins.ep, 1, "the runtime applies data, tensor and pipeline parallelism, not expert")?;
            if !runtime.interleaved_pipeline {
                force("vp", &mut pins.vp, 1, "the runtime's pipeline schedule is not interleaved")?;
            }
            if let Some(family) = &model.model_type {
                if !runtime.split_families.contains(family) {
                    let why = format!(
                        "the runtime splits {} models; a {family} model runs with data parallelism alone",
                        runtime.split_families.join(", ")
                    );
                    force("tp", &mut pins.tp, 1, &why)?;
                    force("pp", &mut pins.pp, 1, &why)?;
                }
                if kind == WorkloadKind::Lora && runtime.lora_refused_families.contains(family) {
                    return Err(FieldError::new(
                        "workload.kind",
                        format!("gpuplane-runtime puts no LoRA adapters on {family}'s fused projections"),
                    ));
                }
            }
        }
        Builtin::Vllm => {
            if kind != WorkloadKind::Inference || model.diffusion.is_some() {
                return Err(FieldError::new("workload.kind", "vllm serves language models: kind inference"));
            }
        }
        Builtin::DiffusionDp => {
            if model.diffusion.is_none() {
                return Err(FieldError::new("model", "diffusion-dp needs a diffusion model (e.g. preset sdxl)"));
            }
        }
    }
    Ok(pins)
}

/// Per-node facts shared by every template.
struct NodeCtx<'a> {
    rank: usize,
    nnodes: usize,
    nproc: usize,
    world: usize,
    master_addr: &'a str,
    master_port: u16,
    job_id: Uuid,
    /// Nodes hold different GPU counts: torchrun then needs a c10d rendezvous instead of static ranks.
    uneven: bool,
}

/// How long a multi-node job's nodes wait for each other at torchrun's rendezvous before they fail (torchrun's
/// own default is 600 s, retried in silence): nodes that cannot reach each other fail the job within this with
/// torchrun's error (`DistStoreError: Timed out after 300 seconds waiting for clients. 1/2 clients joined.`),
/// which the agent reports as the job's reason. The bound covers starting the processes, not loading the model.
pub const RENDEZVOUS_TIMEOUT_S: u32 = 300;

fn torchrun(ctx: &NodeCtx<'_>, script: &[String]) -> Vec<String> {
    let mut argv =
        vec!["torchrun".to_string(), format!("--nnodes={}", ctx.nnodes), format!("--nproc-per-node={}", ctx.nproc)];
    // Each rank's output through torchrun, prefixed with its rank ([`RANK_PREFIX_ENV`]). Teeing keeps a copy of
    // each rank's output in files: in the job's working directory (the lease's disk), not in the sandbox's /tmp,
    // a tmpfs, where a chatty run's copy would grow in the host's memory.
    argv.extend([format!("--log-dir={TORCHRUN_LOG_DIR}"), "--tee=3".to_string()]);
    if ctx.uneven {
        argv.extend([
            "--rdzv-backend=c10d".to_string(),
            format!("--rdzv-endpoint={}:{}", ctx.master_addr, ctx.master_port),
            format!("--rdzv-id={}", ctx.job_id),
            format!("--rdzv-conf=join_timeout={RENDEZVOUS_TIMEOUT_S}"),
        ]);
    } else {
        argv.extend([
            format!("--node-rank={}", ctx.rank),
            format!("--master-addr={}", ctx.master_addr),
            format!("--master-port={}", ctx.master_port),
        ]);
        if ctx.nnodes > 1 {
            argv.push(format!("--rdzv-conf=timeout={RENDEZVOUS_TIMEOUT_S}"));
        }
    }
    // torchrun runs a .py file (or `-m module`) with Python itself; anything else (e.g. `python3 train.py`) runs
    // as is.
    if !script.first().is_some_and(|s| s.ends_with(".py") || s == "-m") {
        argv.push("--no-python".to_string());
    }
    argv.extend(script.iter().cloned());
    argv
}

fn dtype_flag(precision: Precision) -> &'static str {
    match precision {
        Precision::Fp16 => "--fp16",
        _ => "--bf16",
    }
}

fn train_spec(input: &PlanInput) -> Option<(u32, u32, Precision)> {
    match input.workload {
        Workload::Train(t) | Workload::Lora(t) => Some((t.seq_len, t.global_batch, t.precision)),
        Workload::Inference(_) => None,
    }
}

/// DeepSpeed's config for a plan (train_batch_size must equal micro x accumulation x dp).
pub fn deepspeed_config(plan: &Plan, precision: Precision) -> serde_json::Value {
    let mut config = serde_json::json!({
        "train_batch_size": plan.micro_batch * plan.grad_accum.max(1) * plan.dp,
        "train_micro_batch_size_per_gpu": plan.micro_batch,
        "gradient_accumulation_steps": plan.grad_accum.max(1),
        "gradient_clipping": 1.0,
        "zero_optimization": {
            "stage": plan.zero_stage,
            "overlap_comm": true,
            "contiguous_gradients": true,
            "reduce_bucket_size": 500_000_000u64,
        },
        "bf16": { "enabled": precision != Precision::Fp16 },
        "fp16": { "enabled": precision == Precision::Fp16 },
        "steps_per_print": 10,
    });
    if plan.offload != Offload::None {
        config["zero_optimization"]["offload_optimizer"] = serde_json::json!({ "device": "cpu", "pin_memory": true });
    }
    if plan.offload == Offload::OptimizerAndParams {
        config["zero_optimization"]["offload_param"] = serde_json::json!({ "device": "cpu", "pin_memory": true });
    }
    if plan.recompute != Recompute::None {
        config["activation_checkpointing"] = serde_json::json!({ "partition_activations": plan.zero_stage == 3, "contiguous_memory_optimization": false });
    }
    config
}

/// Megatron-LM arguments for a plan and model.
pub fn megatron_args(
    plan: &Plan,
    model: &ModelArch,
    seq_len: u32,
    global_batch: u32,
    precision: Precision,
) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    let mut flag = |name: &str, value: Option<String>| {
        args.push(format!("--{name}"));
        if let Some(v) = value {
            args.push(v);
        }
    };
    flag("tensor-model-parallel-size", Some(plan.tp.to_string()));
    flag("pipeline-model-parallel-size", Some(plan.pp.to_string()));
    if plan.cp > 1 {
        flag("context-parallel-size", Some(plan.cp.to_string()));
    }
    // How the layers lie over the stages (the embedding-and-loss split, uneven first/last stages,
    // a pipeline layout) and the virtual-stage degree, as the planner renders them.
    for (name, value) in crate::planner::render::megatron_pipeline_args(plan, model.layers) {
        flag(name, value);
    }
    if plan.sequence_parallel {
        flag("sequence-parallel", None);
    }
    if plan.zero_stage >= 1 {
        // Megatron's distributed optimizer shards the optimizer states over data-parallel ranks (ZeRO-1).
        flag("use-distributed-optimizer", None);
    }
    if plan.offload != Offload::None {
        flag("optimizer-cpu-offload", None);
    }
    flag("micro-batch-size", Some(plan.micro_batch.to_string()));
    // The plan may run the nearest batch that divides by its data-parallel degree.
    let global_batch = if plan.global_batch > 0 { plan.global_batch } else { global_batch };
    flag("global-batch-size", Some(global_batch.to_string()));
    flag("seq-length", Some(seq_len.to_string()));
    flag("max-position-embeddings", Some(seq_len.to_string()));
    flag("num-layers", Some(model.layers.to_string()));
    flag("hidden-size", Some(model.hidden.to_string()));
    flag("ffn-hidden-size", Some(model.ffn.to_string()));
    flag("num-attention-heads", Some(model.heads.to_string()));
    if let Some(head_dim) = model.head_dim {
        flag("kv-channels", Some(head_dim.to_string()));
    }
    if model.kv_heads < model.heads {
        flag("group-query-attention", None);
        flag("num-query-groups", Some(model.kv_heads.to_string()));
    }
    if let Some(moe) = model.moe {
        flag("num-experts", Some(moe.experts.to_string()));
        flag("moe-router-topk", Some(moe.experts_per_token.to_string()));
        for (name, value) in crate::planner::render::megatron_expert_args(plan) {
            flag(name, value);
        }
        if moe.shared_experts > 0 {
            flag("moe-shared-expert-intermediate-size", Some((moe.shared_experts * model.ffn).to_string()));
        }
        if let Some(cf) = moe.capacity_factor {
            flag("moe-expert-capacity-factor", Some(cf.to_string()));
        }
        if moe.dense_layers > 0 {
            let dense = moe.dense_layers.min(model.layers);
            flag("moe-layer-freq", Some(format!("([0]*{dense}+[1]*{})", model.layers - dense)));
        }
    }
    match plan.recompute {
        Recompute::None => {}
        Recompute::Selective => flag("recompute-granularity", Some("selective".into())),
        Recompute::Full => {
            flag("recompute-granularity", Some("full".into()));
            flag("recompute-method", Some("uniform".into()));
            flag("recompute-num-layers", Some("1".into()));
        }
    }
    flag(dtype_flag(precision).trim_start_matches("--"), None);
    if precision == Precision::Fp8 {
        flag("fp8-format", Some("hybrid".into()));
    }
    args
}

/// Hugging Face Accelerate's config for `accelerate launch --config_file` (JSON is one of the formats its
/// loader reads): FSDP with the plan's sharding, offload, checkpointing and precision, and this node's place.
fn accelerate_config(plan: &Plan, precision: Precision, ctx: &NodeCtx<'_>) -> serde_json::Value {
    let strategy = match plan.zero_stage {
        0 => "NO_SHARD",
        1 | 2 => "SHARD_GRAD_OP",
        _ => "FULL_SHARD",
    };
    serde_json::json!({
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "FSDP",
        "mixed_precision": if precision == Precision::Fp16 { "fp16" } else { "bf16" },
        "num_machines": ctx.nnodes,
        "machine_rank": ctx.rank,
        "num_processes": ctx.world,
        "main_process_ip": ctx.master_addr,
        "main_process_port": ctx.master_port,
        "rdzv_backend": "static",
        "same_network": true,
        "use_cpu": false,
        "fsdp_config": {
            "fsdp_version": 1,
            "fsdp_sharding_strategy": strategy,
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "fsdp_backward_prefetch": "BACKWARD_PRE",
            "fsdp_offload_params": plan.offload == Offload::OptimizerAndParams,
            "fsdp_activation_checkpointing": plan.recompute != Recompute::None,
            "fsdp_state_dict_type": "SHARDED_STATE_DICT",
            "fsdp_use_orig_params": true,
            "fsdp_sync_module_states": true,
            "fsdp_cpu_ram_efficient_loading": true,
        },
    })
}

/// The plan file every planned job gets ([`PLAN_FILE`]): what the job was planned for (the architecture, which
/// the runtime checks against the model it loads; a LoRA plan's adapters as the planner sized them) and the plan,
/// for `gpuplane_runtime` to apply and for any script to read.
pub fn plan_file(planned: &PlanInput, plan: &Plan) -> serde_json::Value {
    let (seq_len, precision) = match planned.workload {
        Workload::Train(t) | Workload::Lora(t) => (t.seq_len, t.precision),
        Workload::Inference(i) => (i.context_len, i.precision),
    };
    let mut file = serde_json::json!({
        "version": 1,
        "model": planned.model_name,
        "arch": planned.model,
        "workload": plan.workload,
        "seq_len": seq_len,
        "global_batch": plan.global_batch,
        "precision": precision,
        "plan": plan,
    });
    if let Workload::Lora(t) = planned.workload {
        file["lora"] = serde_json::json!({
            "rank": t.lora_rank,
            "alpha": t.lora_rank,
            "dropout": 0.0,
            "target_modules": crate::planner::LORA_TARGET_MODULES,
        });
    }
    file
}

fn need_plan<'a>(planned: Option<(&'a PlanInput, &'a Plan)>) -> Result<(&'a PlanInput, &'a Plan), Vec<FieldError>> {
    planned.ok_or_else(|| vec![FieldError::new("model", "built-in templates are planned: give a model and workload")])
}

/// Render every node's launch spec, rank 0 first.
pub fn render(input: &RenderInput<'_>) -> Result<Vec<LaunchSpec>, Vec<FieldError>> {
    let nodes = input.nodes;
    let Some(first) = nodes.first() else {
        return Err(vec![FieldError::new("lease", "the lease holds no GPUs")]);
    };
    let world: usize = nodes.iter().map(|n| n.gpu_indices.len()).sum();
    let uneven = nodes.iter().any(|n| n.gpu_indices.len() != first.gpu_indices.len());
    let rdma = nodes.iter().all(|n| n.rdma);
    let addrs: Vec<&str> = nodes.iter().map(NodeSlot::rendezvous_address).collect();
    let mut specs = Vec::with_capacity(nodes.len());
    for (rank, node) in nodes.iter().enumerate() {
        let ctx = NodeCtx {
            rank,
            nnodes: nodes.len(),
            nproc: node.gpu_indices.len(),
            world,
            master_addr: first.rendezvous_address(),
            master_port: input.master_port,
            job_id: input.job_id,
            uneven,
        };
        let mut env: BTreeMap<String, String> = input.env.clone();
        let devices: Vec<String> = node.gpu_indices.iter().map(|i| i.to_string()).collect();
        for (key, value) in [
            ("MASTER_ADDR", first.rendezvous_address().to_owned()),
            ("MASTER_PORT", input.master_port.to_string()),
            ("WORLD_SIZE", world.to_string()),
            ("NODE_RANK", rank.to_string()),
            ("NNODES", nodes.len().to_string()),
            ("NPROC_PER_NODE", ctx.nproc.to_string()),
            ("CUDA_DEVICE_ORDER", "PCI_BUS_ID".to_string()),
            ("CUDA_VISIBLE_DEVICES", devices.join(",")),
            ("GPUPLANE_JOB_ID", input.job_id.to_string()),
            ("GPUPLANE_NODE_ADDRS", addrs.join(",")),
            (RANK_PREFIX_ENV, RANK_PREFIX_TEMPLATE.to_string()),
        ] {
            env.insert(key.to_string(), value);
        }
        if !rdma {
            // No InfiniBand/RoCE between the nodes: NCCL must use sockets.
            env.insert("NCCL_IB_DISABLE".into(), "1".into());
        }
        if !input.gpu_p2p {
            // PCIe-only consumer/inference cards: peer-to-peer transfers are unsupported or slower than host copies.
            env.insert("NCCL_P2P_DISABLE".into(), "1".into());
        }
        let (argv, mut files) = match input.template {
            TemplateChoice::Custom(template) => (render_custom(template, &ctx, input)?, Vec::new()),
            TemplateChoice::Builtin(builtin) => render_builtin(builtin, &ctx, input)?,
        };
        if let Some((planned, plan)) = input.planned {
            files.push(SpecFile { path: PLAN_FILE.into(), content: pretty(&plan_file(planned, plan)) });
            env.insert(PLAN_FILE_ENV.into(), PLAN_FILE.into());
        }
        env.insert(STEPS_FILE_ENV.into(), STEPS_FILE.into());
        env.insert(PROGRESS_FILE_ENV.into(), gpuplane_protocol::jobs::PROGRESS_FILE.into());
        specs.push(LaunchSpec { argv, env, files, image: input.image.map(str::to_owned), serve: None, workdir: None });
    }
    Ok(specs)
}

fn render_builtin(
    builtin: Builtin,
    ctx: &NodeCtx<'_>,
    input: &RenderInput<'_>,
) -> Result<(Vec<String>, Vec<SpecFile>), Vec<FieldError>> {
    let (planned, plan) = need_plan(input.planned)?;
    let command = |default: &[&str]| -> Result<Vec<String>, Vec<FieldError>> {
        if !input.command.is_empty() {
            Ok(input.command.to_vec())
        } else if default.is_empty() {
            Err(vec![FieldError::new(
                "command",
                format!("{} needs the training script, e.g. [\"train.py\"]", builtin.name()),
            )])
        } else {
            Ok(default.iter().map(|s| s.to_string()).collect())
        }
    };
    let precision = train_spec(planned).map(|t| t.2).unwrap_or_default();
    let mut files = Vec::new();
    let mut argv = match builtin {
        Builtin::TorchrunDdp => torchrun(ctx, &command(&[])?),
        Builtin::TorchrunFsdp => {
            let config = accelerate_config(plan, precision, ctx);
            files.push(SpecFile { path: "accelerate_config.json".into(), content: pretty(&config) });
            let mut argv: Vec<String> =
                ["accelerate", "launch", "--config_file", "accelerate_config.json"].map(str::to_owned).into();
            let script = command(&[])?;
            if !script.first().is_some_and(|s| s.ends_with(".py")) {
                argv.push("--no_python".into());
            }
            argv.extend(script);
            argv
        }
        Builtin::Runtime => torchrun(ctx, &command(&[])?),
        Builtin::Deepspeed => {
            files.push(SpecFile { path: "ds_config.json".into(), content: pretty(&deepspeed_config(plan, precision)) });
            let mut argv = torchrun(ctx, &command(&[])?);
            argv.extend(["--deepspeed".to_string(), "--deepspeed_config".into(), "ds_config.json".into()]);
            argv
        }
        Builtin::Megatron => {
            let (seq_len, global_batch, precision) = train_spec(planned).unwrap_or((4096, 512, Precision::Bf16));
            let args = megatron_args(plan, &planned.model, seq_len, global_batch, precision);
            files.push(SpecFile { path: "megatron_args.txt".into(), content: args.join("\n") + "\n" });
            let mut argv = torchrun(ctx, &command(&["pretrain_gpt.py"])?);
            argv.extend(args);
            argv
        }
        Builtin::Vllm => {
            let Workload::Inference(spec) = planned.workload else {
                return Err(vec![FieldError::new("workload.kind", "vllm serves: kind inference")]);
            };
            let served = input.params.get("served_model").cloned().unwrap_or_else(|| planned.model_name.clone());
            let port = input.params.get("port").cloned().unwrap_or_else(|| "8000".into());
            let group = (plan.tp * plan.pp).max(1) as usize;
            let mut argv = command(&["vllm"])?;
            argv.extend([
                "serve".to_string(),
                served,
                "--tensor-parallel-size".into(),
                plan.tp.to_string(),
                "--pipeline-parallel-size".into(),
                plan.pp.to_string(),
            ]);
            if group <= ctx.nproc {
                // Each node serves on its own: as many replicas as tensor x pipeline groups fit on it.
                argv.extend(["--data-parallel-size".to_string(), (ctx.nproc / group).max(1).to_string()]);
            } else {
                // One model across nodes: vLLM's multi-node launch, the first node serving.
                argv.extend([
                    "--distributed-executor-backend".to_string(),
                    "mp".into(),
                    "--nnodes".into(),
                    ctx.nnodes.to_string(),
                    "--node-rank".into(),
                    ctx.rank.to_string(),
                    "--master-addr".into(),
                    ctx.master_addr.to_string(),
                    "--master-port".into(),
                    ctx.master_port.to_string(),
                ]);
                if ctx.rank > 0 {
                    argv.push("--headless".into());
                }
            }
            argv.extend([
                "--max-model-len".to_string(),
                spec.context_len.to_string(),
                "--max-num-seqs".into(),
                // The plan's concurrency per replica (searched for the most throughput within the latency bounds,
                // or as the request fixed it).
                plan.serving.as_ref().map_or(spec.concurrent_seqs, |s| s.concurrency).to_string(),
                "--dtype".into(),
                if spec.precision == Precision::Fp16 { "float16" } else { "bfloat16" }.into(),
                "--host".into(),
                "0.0.0.0".into(),
                "--port".into(),
                port,
            ]);
            if spec.precision == Precision::Fp8 {
                argv.extend(["--quantization".to_string(), "fp8".into()]);
            }
            argv
        }
        Builtin::DiffusionDp => {
            // The runtime's batch image generation (`gpuplane_runtime.images`), one replica per GPU.
            let steps = planned.model.diffusion.map(|d| d.steps).unwrap_or(30);
            let param = |name: &str, default: &str| input.params.get(name).cloned().unwrap_or_else(|| default.into());
            let mut argv = torchrun(ctx, &command(&["-m", "gpuplane_runtime.images"])?);
            argv.extend([
                "--input".to_string(),
                param("prompts", "prompts.jsonl"),
                "--output".into(),
                param("output", "images"),
                "--num-inference-steps".into(),
                steps.to_string(),
                "--batch-size".into(),
                plan.micro_batch.max(1).to_string(),
            ]);
            if let Some(model) = input.params.get("diffusers_model") {
                argv.extend(["--model".to_string(), model.clone()]);
            }
            argv
        }
    };
    argv.extend(input.args.iter().cloned());
    Ok((argv, files))
}

fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default() + "\n"
}

fn render_custom(
    template: &[String],
    ctx: &NodeCtx<'_>,
    input: &RenderInput<'_>,
) -> Result<Vec<String>, Vec<FieldError>> {
    let plan = input.planned.map(|p| p.1);
    let train = input.planned.and_then(|p| train_spec(p.0));
    let var = |name: &str| -> Option<String> {
        let launch = match name {
            "nnodes" => Some(ctx.nnodes.to_string()),
            "node_rank" => Some(ctx.rank.to_string()),
            "nproc_per_node" => Some(ctx.nproc.to_string()),
            "world_size" => Some(ctx.world.to_string()),
            "master_addr" => Some(ctx.master_addr.to_string()),
            "master_port" => Some(ctx.master_port.to_string()),
            "job_id" => Some(ctx.job_id.to_string()),
            _ => None,
        };
        launch.or_else(|| {
            let p = plan?;
            Some(match name {
                "tp" => p.tp.to_string(),
                "pp" => p.pp.to_string(),
                "dp" => p.dp.to_string(),
                "vp" => p.vp.to_string(),
                "micro_batch" => p.micro_batch.to_string(),
                "grad_accum" => p.grad_accum.to_string(),
                "zero_stage" => p.zero_stage.to_string(),
                "global_batch" => train?.1.to_string(),
                "seq_len" => train?.0.to_string(),
                _ => return None,
            })
        })
    };
    let mut argv = Vec::new();
    let mut used_command = false;
    let mut used_args = false;
    let mut errors = Vec::new();
    for element in template {
        let segments = parse_element(element).map_err(|m| vec![FieldError::new("template", m)])?;
        match segments.as_slice() {
            [Segment::Var(v)] if v == "command" => {
                used_command = true;
                argv.extend(input.command.iter().cloned());
                continue;
            }
            [Segment::Var(v)] if v == "args" => {
                used_args = true;
                argv.extend(input.args.iter().cloned());
                continue;
            }
            _ => {}
        }
        let mut text = String::new();
        for segment in segments {
            match segment {
                Segment::Literal(l) => text.push_str(&l),
                Segment::Var(v) => match input.params.get(&v).cloned().or_else(|| var(&v)) {
                    Some(value) => text.push_str(&value),
                    None if PLAN_VARS.contains(&v.as_str()) => errors.push(FieldError::new(
                        "model",
                        format!("the template uses `{{{v}}}` from the plan: give a model and workload"),
                    )),
                    None if LAUNCH_VARS.contains(&v.as_str()) => {}
                    None => errors.push(FieldError::new(format!("parameters.{v}"), "no value")),
                },
            }
        }
        argv.push(text);
    }
    if !used_command && !input.command.is_empty() {
        errors.push(FieldError::new("command", "this template takes no command (it has no `{command}`)"));
    }
    if used_command && input.command.is_empty() {
        errors.push(FieldError::new("command", "this template runs `{command}`: give one"));
    }
    if !used_args {
        argv.extend(input.args.iter().cloned());
    }
    errors.dedup();
    if argv.first().is_none_or(|p| p.is_empty()) {
        errors.push(FieldError::new("command", "the rendered program is empty"));
    }
    if errors.is_empty() { Ok(argv) } else { Err(errors) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::{ClusterFields, ModelRef, PlanRequest, StageSplit, WorkloadFields};

    fn slots(counts: &[&[i32]], rdma: bool) -> Vec<NodeSlot> {
        counts
            .iter()
            .enumerate()
            .map(|(i, idx)| NodeSlot {
                node_id: Uuid::from_u128(i as u128 + 1),
                hostname: format!("node-{i}"),
                address: format!("10.0.0.{}", i + 1),
                lease_address: None,
                gpu_indices: idx.to_vec(),
                rdma,
            })
            .collect()
    }

    fn planned(preset: &str, kind: WorkloadKind, gpu: &str, gpus: u32, per_node: u32, pins: Pins) -> (PlanInput, Plan) {
        let request = PlanRequest {
            model: ModelRef::preset(preset),
            workload: WorkloadFields::bf16(kind, 4096, 512),
            cluster: ClusterFields::catalog(gpu, gpus, per_node, 400.0),
            pins,
            top_n: Some(1),
        };
        let input = request.resolve().unwrap();
        let plan = crate::planner::plan(&input).unwrap().plans.remove(0);
        (input, plan)
    }

    fn input<'a>(
        nodes: &'a [NodeSlot],
        template: TemplateChoice<'a>,
        planned: Option<(&'a PlanInput, &'a Plan)>,
        command: &'a [String],
        empty: &'a BTreeMap<String, String>,
    ) -> RenderInput<'a> {
        RenderInput {
            job_id: Uuid::nil(),
            nodes,
            gpu_p2p: true,
            master_port: DEFAULT_MASTER_PORT,
            template,
            planned,
            command,
            args: &[],
            env: empty,
            params: empty,
            image: None,
        }
    }

    #[test]
    fn isolated_nodes_rendezvous_at_the_lease_addresses() {
        let mut nodes = slots(&[&[0, 1], &[2, 3]], false);
        nodes[0].lease_address = Some("100.64.1.2".into());
        nodes[1].lease_address = Some("100.64.2.4".into());
        let empty = BTreeMap::new();
        let template = vec!["python3".to_string(), "train.py".to_string(), "--addr={master_addr}".to_string()];
        let specs = render(&input(&nodes, TemplateChoice::Custom(&template), None, &[], &empty)).unwrap();
        for spec in &specs {
            assert_eq!(spec.env["MASTER_ADDR"], "100.64.1.2");
            assert_eq!(spec.env["GPUPLANE_NODE_ADDRS"], "100.64.1.2,100.64.2.4");
            assert!(spec.argv.iter().any(|a| a.contains("100.64.1.2")), "{:?}", spec.argv);
            assert!(!spec.argv.iter().any(|a| a.contains("10.0.0.1")), "{:?}", spec.argv);
        }
    }

    #[test]
    fn a_70b_on_two_nodes_of_eight_a100_is_megatron_with_per_node_devices() {
        let (pi, plan) = planned("llama3-70b", WorkloadKind::Train, "a100-80g", 16, 8, Pins::default());
        assert!(plan.tp > 1 || plan.pp > 1, "{plan:?}");
        let template = auto_template(WorkloadKind::Train, &pi.model, &[]);
        assert_eq!(template, Builtin::Megatron, "no command: Megatron-LM's own entry point");
        let nodes = slots(&[&[0, 1, 2, 3, 4, 5, 6, 7], &[0, 1, 2, 3, 4, 5, 6, 7]], true);
        let empty = BTreeMap::new();
        let specs = render(&input(&nodes, TemplateChoice::Builtin(template), Some((&pi, &plan)), &[], &empty)).unwrap();
        assert_eq!(specs.len(), 2);
        for (rank, spec) in specs.iter().enumerate() {
            assert_eq!(spec.env["WORLD_SIZE"], "16");
            assert_eq!(spec.env["NODE_RANK"], rank.to_string());
            assert_eq!(spec.env["MASTER_ADDR"], "10.0.0.1");
            assert_eq!(spec.env["CUDA_VISIBLE_DEVICES"], "0,1,2,3,4,5,6,7");
            assert!(!spec.env.contains_key("NCCL_IB_DISABLE"));
            let tp_at = spec.argv.iter().position(|a| a == "--tensor-model-parallel-size").unwrap();
            assert_eq!(spec.argv[tp_at + 1], plan.tp.to_string());
            assert!(spec.argv.contains(&format!("--node-rank={rank}")));
            assert!(spec.argv.contains(&"pretrain_gpt.py".to_string()));
            assert_eq!(spec.files[0].path, "megatron_args.txt");
            assert!(spec.files[0].content.contains("--pipeline-model-parallel-size"));
        }
    }

    #[test]
    fn small_models_pick_data_parallel_templates_and_deepspeed_gets_its_config() {
        let (pi, plan) = planned("llama2-7b", WorkloadKind::Train, "h100", 8, 8, Pins::default());
        let pins = template_pins(Builtin::Deepspeed, &Pins::default(), WorkloadKind::Train, &pi.model).unwrap();
        assert_eq!((pins.tp, pins.pp), (Some(1), Some(1)));
        let (pi, ds) = planned("llama2-7b", WorkloadKind::Train, "h100", 8, 8, Pins { zero_stage: Some(2), ..pins });
        let nodes = slots(&[&[0, 1, 2, 3, 4, 5, 6, 7]], false);
        let empty = BTreeMap::new();
        let command = vec!["train.py".to_string()];
        let specs =
            render(&input(&nodes, TemplateChoice::Builtin(Builtin::Deepspeed), Some((&pi, &ds)), &command, &empty))
                .unwrap();
        let config: serde_json::Value = serde_json::from_str(&specs[0].files[0].content).unwrap();
        assert_eq!(config["zero_optimization"]["stage"], 2);
        assert_eq!(config["train_micro_batch_size_per_gpu"], ds.micro_batch);
        assert_eq!(config["gradient_accumulation_steps"], ds.grad_accum);
        assert_eq!(config["bf16"]["enabled"], true);
        assert_eq!(
            config["train_batch_size"].as_u64().unwrap(),
            u64::from(ds.micro_batch * ds.grad_accum * ds.dp),
            "DeepSpeed checks this identity"
        );
        assert_eq!(specs[0].env["NCCL_IB_DISABLE"], "1", "no RDMA");
        assert!(specs[0].argv.ends_with(&["--deepspeed".into(), "--deepspeed_config".into(), "ds_config.json".into()]));
        // Auto: a training script runs the gpuplane runtime, Megatron's own script Megatron; serving is vLLM;
        // SDXL is diffusion.
        let script = |s: &[&str]| s.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        assert_eq!(auto_template(WorkloadKind::Train, &pi.model, &script(&["train.py"])), Builtin::Runtime);
        assert_eq!(auto_template(WorkloadKind::Lora, &pi.model, &script(&["python3", "ft.py"])), Builtin::Runtime);
        let megatron = script(&["python3", "/opt/Megatron-LM/pretrain_gpt.py"]);
        assert_eq!(auto_template(WorkloadKind::Train, &pi.model, &megatron), Builtin::Megatron);
        assert_eq!(auto_template(WorkloadKind::Inference, &pi.model, &[]), Builtin::Vllm);
        let sdxl = crate::planner::preset("sdxl").unwrap();
        assert_eq!(auto_template(WorkloadKind::Inference, &sdxl, &[]), Builtin::DiffusionDp);
        let runtime = template_pins(Builtin::Runtime, &Pins::default(), WorkloadKind::Train, &pi.model).unwrap();
        // The runtime runs interleaved 1F1B: the planner may choose virtual stages.
        assert_eq!((runtime.cp, runtime.ep, runtime.vp, runtime.tp), (Some(1), Some(1), None, None));
        // A family the runtime does not split is planned for data parallelism alone; a mixture of experts and
        // LoRA on Phi-3's fused projections are refused, naming why, rather than sent to a runtime that would.
        let gpt2 = ModelArch { model_type: Some("gpt2".into()), ..pi.model.clone() };
        let pins = template_pins(Builtin::Runtime, &Pins::default(), WorkloadKind::Train, &gpt2).unwrap();
        assert_eq!((pins.tp, pins.pp), (Some(1), Some(1)));
        let err = template_pins(Builtin::Runtime, &Pins { tp: Some(2), ..Pins::default() }, WorkloadKind::Train, &gpt2)
            .unwrap_err();
        assert!(err.field == "pins.tp" && err.message.contains("a gpt2 model runs with data parallelism alone"));
        let qwen3 = ModelArch { model_type: Some("qwen3".into()), ..pi.model.clone() };
        assert_eq!(template_pins(Builtin::Runtime, &Pins::default(), WorkloadKind::Train, &qwen3).unwrap().tp, None);
        let mixtral = crate::planner::preset("mixtral-8x7b").unwrap();
        let err = template_pins(Builtin::Runtime, &Pins::default(), WorkloadKind::Train, &mixtral).unwrap_err();
        assert!(err.field == "model" && err.message.contains("mixtures of experts"), "{err:?}");
        let phi3 = ModelArch { model_type: Some("phi3".into()), ..pi.model.clone() };
        let err = template_pins(Builtin::Runtime, &Pins::default(), WorkloadKind::Lora, &phi3).unwrap_err();
        assert!(err.message.contains("fused projections"), "{err:?}");
        let _ = &plan;
        // A pin against the template is a field error.
        let err = template_pins(
            Builtin::TorchrunDdp,
            &Pins { tp: Some(2), ..Pins::default() },
            WorkloadKind::Train,
            &pi.model,
        )
        .unwrap_err();
        assert_eq!(err.field, "pins.tp");
    }

    #[test]
    fn a_lora_plan_file_says_what_the_adapters_are_and_for_which_architecture() {
        let pins = template_pins(Builtin::Runtime, &Pins::default(), WorkloadKind::Lora, &{
            crate::planner::preset("llama2-7b").unwrap()
        })
        .unwrap();
        let (pi, plan) = planned("llama2-7b", WorkloadKind::Lora, "rtx4090", 4, 4, pins);
        let file = plan_file(&pi, &plan);
        assert_eq!(file["workload"], "lora");
        assert_eq!(file["plan"]["workload"], "lora");
        assert_eq!(file["lora"]["rank"], 16);
        assert_eq!(file["lora"]["target_modules"], serde_json::json!(["q_proj", "v_proj"]));
        // The runtime refuses a model whose config differs from the architecture the plan was made for.
        assert_eq!((file["arch"]["layers"].as_u64(), file["arch"]["hidden"].as_u64()), (Some(32), Some(4096)));
        let train = planned("llama2-7b", WorkloadKind::Train, "h100", 8, 8, Pins::default());
        assert!(plan_file(&train.0, &train.1).get("lora").is_none());
    }

    #[test]
    fn diffusion_batches_run_the_runtimes_image_module_with_the_plans_steps_and_batch() {
        let (pi, plan) = planned("sdxl", WorkloadKind::Inference, "rtx4090", 8, 8, Pins::default());
        let nodes = slots(&[&[0, 1, 2, 3, 4, 5, 6, 7]], false);
        let empty = BTreeMap::new();
        let params: BTreeMap<String, String> = [
            ("prompts".to_string(), "/volumes/data/prompts.jsonl".to_string()),
            ("diffusers_model".to_string(), "/models/sdxl".to_string()),
        ]
        .into();
        let mut rendered =
            input(&nodes, TemplateChoice::Builtin(Builtin::DiffusionDp), Some((&pi, &plan)), &[], &empty);
        rendered.params = &params;
        let specs = render(&rendered).unwrap();
        let argv = &specs[0].argv;
        assert_eq!((argv[0].as_str(), argv[2].as_str()), ("torchrun", "--nproc-per-node=8"), "{argv:?}");
        let at = argv.iter().position(|a| a == "-m").expect("a module");
        assert!(!argv.contains(&"--no-python".to_string()), "torchrun runs the module with Python: {argv:?}");
        let expected =
            ["-m", "gpuplane_runtime.images", "--input", "/volumes/data/prompts.jsonl", "--output", "images"];
        assert_eq!(argv[at..at + 6], expected, "{argv:?}");
        let steps = pi.model.diffusion.unwrap().steps.to_string();
        let batch = plan.micro_batch.max(1).to_string();
        let tail = ["--num-inference-steps", &steps, "--batch-size", &batch, "--model", "/models/sdxl"];
        assert_eq!(argv[at + 6..], tail, "{argv:?}");
    }

    #[test]
    fn planned_jobs_get_the_plan_file_and_fsdp_an_accelerate_config() {
        let pins = template_pins(Builtin::Runtime, &Pins { tp: Some(2), ..Pins::default() }, WorkloadKind::Train, &{
            crate::planner::preset("llama2-7b").unwrap()
        })
        .unwrap();
        let (pi, plan) = planned("llama2-7b", WorkloadKind::Train, "h100", 8, 4, pins);
        let nodes = slots(&[&[0, 1, 2, 3], &[0, 1, 2, 3]], true);
        let empty = BTreeMap::new();
        let command = vec!["train.py".to_string()];
        let specs =
            render(&input(&nodes, TemplateChoice::Builtin(Builtin::Runtime), Some((&pi, &plan)), &command, &empty))
                .unwrap();
        for spec in &specs {
            assert_eq!(spec.argv[0], "torchrun");
            assert_eq!(spec.argv.last().unwrap(), "train.py");
            // Two nodes: they wait for each other at most this long.
            assert!(spec.argv.iter().any(|a| a == "--rdzv-conf=timeout=300"), "{:?}", spec.argv);
            assert_eq!(spec.env[PLAN_FILE_ENV], PLAN_FILE);
            assert_eq!(spec.env[STEPS_FILE_ENV], STEPS_FILE);
            let file = spec.files.iter().find(|f| f.path == PLAN_FILE).expect("the plan file");
            let written: serde_json::Value = serde_json::from_str(&file.content).unwrap();
            assert_eq!(written["version"], 1);
            assert_eq!(written["plan"]["tp"], 2);
            assert_eq!(written["arch"]["layers"], pi.model.layers);
            let back: Plan = serde_json::from_value(written["plan"].clone()).unwrap();
            assert_eq!(back, plan, "the plan as the service holds it");
        }
        // FSDP runs through Accelerate with a config its loader reads, one per node.
        let dp = Pins { zero_stage: Some(3), ..Pins::default() };
        let fsdp_pins = template_pins(Builtin::TorchrunFsdp, &dp, WorkloadKind::Train, &pi.model).unwrap();
        let (pi, plan) = planned("llama2-7b", WorkloadKind::Train, "h100", 8, 4, fsdp_pins);
        let specs = render(&input(
            &nodes,
            TemplateChoice::Builtin(Builtin::TorchrunFsdp),
            Some((&pi, &plan)),
            &command,
            &empty,
        ))
        .unwrap();
        for (rank, spec) in specs.iter().enumerate() {
            assert_eq!(spec.argv[..4], ["accelerate", "launch", "--config_file", "accelerate_config.json"]);
            let config: serde_json::Value = serde_json::from_str(&spec.files[0].content).unwrap();
            assert_eq!(config["machine_rank"], rank);
            assert_eq!((config["num_machines"].as_u64(), config["num_processes"].as_u64()), (Some(2), Some(8)));
            assert_eq!(config["fsdp_config"]["fsdp_sharding_strategy"], "FULL_SHARD");
        }
    }

    #[test]
    fn custom_templates_fill_placeholders_and_splice_command_and_args() {
        let nodes = slots(&[&[2, 3], &[0, 1, 5]], true);
        let mut params = BTreeMap::new();
        params.insert("lr".to_string(), "0.1".to_string());
        let template: Vec<String> =
            ["{command}", "--lr={lr}", "--rank={node_rank}/{nnodes}", "--world={world_size}", "{args}", "--end"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        let command = vec!["python3".to_string(), "x.py".to_string()];
        let args = vec!["--extra".to_string()];
        let env = BTreeMap::new();
        let mut i = input(&nodes, TemplateChoice::Custom(&template), None, &command, &env);
        i.params = &params;
        i.args = &args;
        i.gpu_p2p = false;
        let specs = render(&i).unwrap();
        assert_eq!(specs[1].argv, ["python3", "x.py", "--lr=0.1", "--rank=1/2", "--world=5", "--extra", "--end"]);
        assert_eq!(specs[0].env["CUDA_VISIBLE_DEVICES"], "2,3");
        assert_eq!(specs[1].env["CUDA_VISIBLE_DEVICES"], "0,1,5");
        assert_eq!(specs[1].env["NPROC_PER_NODE"], "3");
        assert_eq!(specs[1].env["NCCL_P2P_DISABLE"], "1");
        // Plan placeholders without a plan, and a command the template cannot take, are field errors.
        let template = vec!["/usr/bin/env".to_string(), "{tp}".to_string()];
        let i = input(&nodes, TemplateChoice::Custom(&template), None, &command, &env);
        let fields: Vec<String> = render(&i).unwrap_err().into_iter().map(|e| e.field).collect();
        assert_eq!(fields, ["model", "command"]);
    }

    #[test]
    fn uneven_nodes_use_a_rendezvous() {
        let (pi, plan) = planned(
            "llama2-7b",
            WorkloadKind::Lora,
            "h100",
            8,
            2,
            Pins { tp: Some(1), pp: Some(1), zero_stage: Some(0), ..Pins::default() },
        );
        let nodes = slots(&[&[0, 1, 2, 3, 4, 5], &[6, 7]], true);
        let empty = BTreeMap::new();
        let command = vec!["train.py".to_string()];
        let specs =
            render(&input(&nodes, TemplateChoice::Builtin(Builtin::TorchrunDdp), Some((&pi, &plan)), &command, &empty))
                .unwrap();
        assert!(specs[1].argv.iter().any(|a| a == "--rdzv-endpoint=10.0.0.1:29500"));
        assert!(specs[1].argv.iter().any(|a| a == "--rdzv-conf=join_timeout=300"), "{:?}", specs[1].argv);
        assert_eq!(specs[1].argv.last().unwrap(), "train.py");
        assert_eq!(specs[0].env["WORLD_SIZE"], "8");
        assert_eq!(specs[1].env["NPROC_PER_NODE"], "2");
    }

    #[test]
    fn megatron_args_carry_cp_ep_and_the_stage_split() {
        // B200 Llama 3.1 405B as NeMo runs it: TP 4, PP 8 (126 + embedding + loss = 128), CP 2, VP 8.
        let pins = Pins { tp: Some(4), pp: Some(8), cp: Some(2), vp: Some(8), ..Pins::default() };
        let (pi, plan) = planned("llama3.1-405b", WorkloadKind::Train, "b200", 128, 8, pins);
        let args = megatron_args(&plan, &pi.model, 4096, 512, Precision::Bf16);
        let value = |name: &str| args.iter().position(|a| a == name).map(|i| args[i + 1].clone());
        assert_eq!(value("--context-parallel-size").as_deref(), Some("2"));
        assert!(args.iter().any(|a| a == "--account-for-embedding-in-pipeline-split"), "{args:?}");
        assert_eq!(value("--num-layers-per-virtual-pipeline-stage").as_deref(), Some("2"));
        // MoE: the planned EP degree, not 1.
        let pins = Pins { ep: Some(8), ..Pins::default() };
        let (pi, plan) = planned("mixtral-8x7b", WorkloadKind::Train, "h100", 64, 8, pins);
        let args = megatron_args(&plan, &pi.model, 4096, 512, Precision::Bf16);
        let i = args.iter().position(|a| a == "--expert-model-parallel-size").unwrap();
        assert_eq!(args[i + 1], "8");
        // A CPU-offload plan gets DeepSpeed's offload section.
        let ds = deepspeed_config(&Plan { offload: Offload::Optimizer, ..plan }, Precision::Bf16);
        assert_eq!(ds["zero_optimization"]["offload_optimizer"]["device"], "cpu");
    }

    #[test]
    fn megatron_args_carry_uneven_stages_with_virtual_stages() {
        // 60 layers over PP 8 x VP 4 (61 over 8 x 4 has no first/last split Megatron accepts:
        // every part must divide by VP): the planner's first/last split is 8 / 6 x 8 / 4, two
        // layers a chunk on the first and middle stages and one on the last (a pipeline layout
        // is offered beside it).
        let (pi, plan) = planned("llama2-7b", WorkloadKind::Train, "h100", 8, 8, Pins::default());
        let model = ModelArch { layers: 60, ..pi.model.clone() };
        let mut splits = Vec::new();
        crate::planner::cost::Split::options(60, 8, 4, &mut splits);
        let split = splits.iter().find(|s| s.kind == StageSplit::Uneven).expect("a first/last split");
        assert_eq!(split.kind, StageSplit::Uneven);
        let plan = Plan {
            tp: 1,
            pp: 8,
            vp: 4,
            dp: 1,
            stage_split: split.kind,
            layers_per_stage: split.layers_per_stage(8),
            ..plan
        };
        assert_eq!(plan.layers_per_stage, vec![8, 8, 8, 8, 8, 8, 8, 4]);
        let args = megatron_args(&plan, &model, 4096, 512, Precision::Bf16);
        let value = |name: &str| args.iter().position(|a| a == name).map(|i| args[i + 1].clone());
        assert_eq!(value("--pipeline-model-parallel-size").as_deref(), Some("8"));
        assert_eq!(value("--num-layers").as_deref(), Some("60"));
        assert_eq!(value("--decoder-first-pipeline-num-layers").as_deref(), Some("8"));
        assert_eq!(value("--decoder-last-pipeline-num-layers").as_deref(), Some("4"));
        // Megatron takes the virtual degree of an uneven split only this way ...
        assert_eq!(value("--num-virtual-stages-per-pipeline-rank").as_deref(), Some("4"));
        // ... and refuses the layers-per-chunk flag next to the first/last counts.
        assert!(!args.iter().any(|a| a == "--num-layers-per-virtual-pipeline-stage"), "{args:?}");
        assert!(!args.iter().any(|a| a.starts_with("--account-for-")), "{args:?}");
        // What Megatron then builds: first, last and each middle stage divide by VP, and the
        // middle layers spread evenly over the 6 middle stages, 2 a chunk.
        let (first, last) = (8u32, 4u32);
        let middle = 60 - first - last;
        assert_eq!((first % 4, last % 4, middle % 6, (middle / 6) % 4), (0, 0, 0, 0));
        assert!(split.megatron_accepts(60, 8, 4));
        let chunks = split.layers_per_chunk(8, 4);
        assert_eq!(chunks[0], vec![2, 2, 2, 2]);
        assert_eq!(chunks[7], vec![1, 1, 1, 1]);
        assert_eq!(chunks.iter().flatten().sum::<u32>(), 60);

        // Even and embedding-and-loss splits keep the layers-per-chunk flag.
        let even = Plan { stage_split: StageSplit::Even, layers_per_stage: vec![8; 8], vp: 2, ..plan };
        let args = megatron_args(&even, &ModelArch { layers: 64, ..model }, 4096, 512, Precision::Bf16);
        let value = |name: &str| args.iter().position(|a| a == name).map(|i| args[i + 1].clone());
        assert_eq!(value("--num-layers-per-virtual-pipeline-stage").as_deref(), Some("4"));
        assert!(!args.iter().any(|a| a == "--num-virtual-stages-per-pipeline-rank"), "{args:?}");

        // 61 layers (DeepSeek-V3's count) on 8 x 4: the pipeline layout, and no other split flag.
        crate::planner::cost::Split::options(61, 8, 4, &mut splits);
        let layout = splits.iter().find(|s| s.kind == StageSplit::Layout).expect("a layout");
        let plan = Plan { stage_split: layout.kind, layers_per_stage: layout.layers_per_stage(8), vp: 4, ..even };
        let args = megatron_args(&plan, &ModelArch { layers: 61, ..pi.model.clone() }, 4096, 512, Precision::Bf16);
        let value = |name: &str| args.iter().position(|a| a == name).map(|i| args[i + 1].clone());
        assert_eq!(value("--pipeline-model-parallel-layout").as_deref(), Some("Et|(tt|)*30L"));
        assert_eq!(value("--num-layers").as_deref(), Some("61"));
        assert!(!args.iter().any(|a| a.contains("virtual") || a.starts_with("--decoder-")), "{args:?}");
    }

    /// The wrapper as `/bin/sh` runs it: the setup first, in the part's directory, then the command in its place;
    /// a failing setup stops at its failing line and ends the part with its exit code.
    #[test]
    fn a_setup_runs_before_the_command_and_a_failing_one_stops_it() {
        let run = |setup: &str| {
            let spec = LaunchSpec {
                argv: vec![
                    "sh".into(),
                    "-c".into(),
                    "cat made; echo \"args: $*\"; exit 7".into(),
                    "x".into(),
                    "a b".into(),
                ],
                env: BTreeMap::new(),
                files: Vec::new(),
                image: None,
                serve: None,
                workdir: None,
            };
            let spec = with_setup(spec, setup);
            let dir = std::env::temp_dir().join(format!("gpuplane-setup-{}", Uuid::now_v7()));
            std::fs::create_dir(&dir).unwrap();
            for file in &spec.files {
                std::fs::write(dir.join(&file.path), &file.content).unwrap();
            }
            let out =
                std::process::Command::new(&spec.argv[0]).args(&spec.argv[1..]).current_dir(&dir).output().unwrap();
            std::fs::remove_dir_all(&dir).unwrap();
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        };
        let (code, stdout, _) = run("echo installed > made\n");
        assert_eq!(
            (code, stdout.as_str()),
            (Some(7), "installed\nargs: a b\n"),
            "the command's exit code and arguments"
        );
        let (code, stdout, stderr) = run("echo first\nfalse\necho never\n");
        assert_eq!(code, Some(1));
        assert_eq!(stdout, "first\n", "neither the rest of the setup nor the command ran");
        assert!(stderr.contains("gpuplane: the job's setup failed (exit code 1)"), "{stderr}");
        assert_eq!(run("exit 3").0, Some(3));
    }
}
