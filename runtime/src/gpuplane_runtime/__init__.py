"""gpuplane_runtime: run a PyTorch model with the parallelism gpuplane's planner chose for the job.

    import gpuplane_runtime
    model, optimizer = gpuplane_runtime.parallelize(model, lambda params: torch.optim.AdamW(params, lr=3e-4))
    for batch in batches:              # [global_batch, seq_len] token ids, the same on every rank
        loss = model.train_step(batch)

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
from .metrics import DEFAULT_METRICS_FILE, METRICS_FILE_ENV, StepMetricsWriter
from .plan import PLAN_FILE_ENV, RuntimePlan, load_plan, parse_plan

__all__ = [
    "CHECKPOINT_DIR_ENV",
    "DEFAULT_METRICS_FILE",
    "METRICS_FILE_ENV",
    "PLAN_FILE_ENV",
    "CheckpointError",
    "CollectiveError",
    "GpuplaneRuntimeError",
    "ParallelModel",
    "PlanFileError",
    "PlanMismatchError",
    "RuntimePlan",
    "StepMetricsWriter",
    "UnsupportedModelError",
    "causal_lm_loss",
    "load_plan",
    "parallelize",
    "parse_plan",
]
__version__ = "0.1.0"
