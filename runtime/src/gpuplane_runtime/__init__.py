"""gpuplane_runtime: run a PyTorch model with the parallelism gpuplane's planner chose for the job.

    import gpuplane_runtime
    model, optimizer = gpuplane_runtime.parallelize(
        gpuplane_runtime.pretrained("/models/llama-3.2-1b"),   # or from_config(config), or a built nn.Module
        lambda params: torch.optim.AdamW(params, lr=3e-4),
    )
    for batch in batches:              # [global_batch, seq_len] token ids, the same on every rank
        loss = model.train_step(batch)
    model.export("/data/out")          # Hugging Face files (a PEFT adapter for a LoRA plan)

See runtime/README.md for the plan file, the metrics file and what each plan field does.
"""

from .checkpoint import CHECKPOINT_DIR_ENV
from .core import ParallelModel, causal_lm_loss, parallelize
from .errors import (
    CheckpointError,
    CollectiveError,
    GpuplaneRuntimeError,
    PlanFileError,
    PlanMismatchError,
    UnsupportedModelError,
)
from .lora import LoraSpec
from .metrics import DEFAULT_METRICS_FILE, METRICS_FILE_ENV, StepMetricsWriter
from .models.build import FromConfig, Pretrained, from_config, pretrained
from .models.families import SUPPORTED as SUPPORTED_FAMILIES
from .plan import PLAN_FILE_ENV, RuntimePlan, load_plan, parse_plan
from .weights.export import EXPORT_DIR_ENV

__all__ = [
    "CHECKPOINT_DIR_ENV",
    "DEFAULT_METRICS_FILE",
    "EXPORT_DIR_ENV",
    "METRICS_FILE_ENV",
    "PLAN_FILE_ENV",
    "SUPPORTED_FAMILIES",
    "CheckpointError",
    "CollectiveError",
    "FromConfig",
    "GpuplaneRuntimeError",
    "LoraSpec",
    "ParallelModel",
    "PlanFileError",
    "PlanMismatchError",
    "Pretrained",
    "RuntimePlan",
    "StepMetricsWriter",
    "UnsupportedModelError",
    "causal_lm_loss",
    "from_config",
    "load_plan",
    "parallelize",
    "parse_plan",
    "pretrained",
]
__version__ = "0.1.0"
