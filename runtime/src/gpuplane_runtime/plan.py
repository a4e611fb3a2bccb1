"""The plan file: what gpuplane's planner chose for this job, as the job's launch files carry it.

Format (version 1), a JSON object::

    {"version": 1, "plan": <the planner's Plan, as serde writes it>, "model": "<catalog name>" | null,
     "seq_len": <int>, "precision": "bf16" | "fp16" | "fp8" | "fp32",
     "arch": {"layers", "hidden", "heads", "kv_heads", "ffn", "vocab"},                      (optional)
     "lora": {"rank": <int>, "alpha": <number>, "dropout": <number>, "target_modules": [..]}}  (optional)

``arch`` is the architecture the plan was made for: a model whose config differs is refused. ``lora`` applies to
``workload: "lora"`` plans (rank 16, alpha = rank, no dropout, ``q_proj`` and ``v_proj`` when it is absent).

``precision`` takes the planner's names (bf16, fp16, fp8); ``fp32`` is accepted too (no mixed precision; for
CPU runs and tests). ``$GPUPLANE_PRECISION``, when set, overrides it (a job's own environment may set it). Only
the plan fields the runtime applies are read; the others (predictions, memory breakdown, explanation) are kept in
:attr:`RuntimePlan.raw`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import PlanFileError, PlanMismatchError
from .lora import DEFAULT_TARGETS, LoraSpec

PLAN_FILE_ENV = "GPUPLANE_PLAN_FILE"
#: Overrides the plan file's precision (the job's own choice, e.g. ``fp32`` for exact comparisons on the CPU).
PRECISION_ENV = "GPUPLANE_PRECISION"
PLAN_FILE_VERSION = 1
PRECISIONS = ("bf16", "fp16", "fp8", "fp32")
RECOMPUTE = ("none", "selective", "full")
OFFLOAD = ("none", "optimizer", "optimizer_and_params")
STAGE_SPLITS = ("even", "embedding_and_loss", "uneven", "layout")


@dataclass(frozen=True)
class RuntimePlan:
    """The parts of a plan the runtime applies, validated."""

    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    vp: int
    micro_batch: int
    grad_accum: int
    global_batch: int
    zero_stage: int
    sequence_parallel: bool
    recompute: str
    offload: str
    layers_per_stage: tuple[int, ...]
    stage_split: str
    seq_len: int
    precision: str
    model: str | None
    step_time_s: float | None
    tokens_per_s: float | None
    lora: LoraSpec | None = None
    arch: dict[str, int] | None = None
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    def describe(self) -> str:
        parts = [f"tp{self.tp}", f"pp{self.pp}", f"dp{self.dp}"]
        if self.cp > 1:
            parts.append(f"cp{self.cp}")
        return (
            "x".join(parts)
            + f" zero{self.zero_stage} micro_batch {self.micro_batch} grad_accum {self.grad_accum}"
            + f" global_batch {self.global_batch} seq_len {self.seq_len} {self.precision}"
            + f" recompute {self.recompute}"
            + (" sequence_parallel" if self.sequence_parallel else "")
            + (f" offload {self.offload}" if self.offload != "none" else "")
            + (f" vp {self.vp}" if self.vp > 1 else "")
            + (f" lora r{self.lora.rank} on {','.join(self.lora.target_modules)}" if self.lora else "")
        )


def _int(obj: dict[str, Any], key: str, where: str, *, minimum: int = 1, default: int | None = None) -> int:
    if key not in obj:
        if default is not None:
            return default
        raise PlanFileError(f"{where}: field `{key}` is missing")
    value: object = obj[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlanFileError(f"{where}: field `{key}` must be an integer, got {json.dumps(value)}")
    if value < minimum:
        raise PlanFileError(f"{where}: field `{key}` must be at least {minimum}, got {value}")
    return value


def _choice(obj: dict[str, Any], key: str, where: str, choices: tuple[str, ...], default: str | None = None) -> str:
    if key not in obj and default is not None:
        return default
    value = obj.get(key)
    if not isinstance(value, str) or value not in choices:
        raise PlanFileError(f"{where}: field `{key}` must be one of {', '.join(choices)}, got {json.dumps(value)}")
    return value


def parse_plan(document: Any, source: str = "<plan>") -> RuntimePlan:
    """Validate a plan-file document (already parsed JSON). Raises :class:`PlanFileError` naming the field."""
    if not isinstance(document, dict):
        raise PlanFileError(f"{source}: a plan file is a JSON object, got {type(document).__name__}")
    version = document.get("version")
    if version != PLAN_FILE_VERSION:
        raise PlanFileError(
            f"{source}: plan file version {json.dumps(version)} is not supported (this runtime reads version "
            f"{PLAN_FILE_VERSION})"
        )
    plan = document.get("plan")
    if not isinstance(plan, dict):
        raise PlanFileError(f"{source}: field `plan` must be the planner's plan object")
    where = f"{source}: plan"
    workload = plan.get("workload", "train")
    if workload not in ("train", "lora"):
        raise PlanFileError(
            f"{where}: workload {json.dumps(workload)} is not training; the runtime applies train and lora plans"
        )
    lora = _lora(document.get("lora"), source) if workload == "lora" else None
    arch = _arch(document.get("arch"), source)
    model = document.get("model")
    if model is not None and not isinstance(model, str):
        raise PlanFileError(f"{source}: field `model` must be a string or null")
    layers = plan.get("layers_per_stage", [])
    if not isinstance(layers, list) or not all(isinstance(n, int) and not isinstance(n, bool) for n in layers):
        raise PlanFileError(f"{where}: field `layers_per_stage` must be a list of integers")
    sequence_parallel = plan.get("sequence_parallel")
    if not isinstance(sequence_parallel, bool):
        raise PlanFileError(f"{where}: field `sequence_parallel` must be true or false")

    def _float(key: str) -> float | None:
        value = plan.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    parsed = RuntimePlan(
        tp=_int(plan, "tp", where),
        pp=_int(plan, "pp", where),
        dp=_int(plan, "dp", where),
        cp=_int(plan, "cp", where, default=1),
        ep=_int(plan, "ep", where, default=1),
        vp=_int(plan, "vp", where),
        micro_batch=_int(plan, "micro_batch", where),
        grad_accum=_int(plan, "grad_accum", where),
        global_batch=_int(plan, "global_batch", where),
        zero_stage=_int(plan, "zero_stage", where, minimum=0),
        sequence_parallel=sequence_parallel,
        recompute=_choice(plan, "recompute", where, RECOMPUTE),
        offload=_choice(plan, "offload", where, OFFLOAD, default="none"),
        layers_per_stage=tuple(layers),
        stage_split=_choice(plan, "stage_split", where, STAGE_SPLITS, default="even"),
        seq_len=_int(document, "seq_len", source),
        precision=_choice(document, "precision", source, PRECISIONS),
        model=model,
        step_time_s=_float("step_time_s"),
        tokens_per_s=_float("tokens_per_s"),
        lora=lora,
        arch=arch,
        source=source,
        raw=plan,
    )
    _check_consistency(parsed)
    return parsed


def _lora(value: Any, source: str) -> LoraSpec:
    where = f"{source}: lora"
    if value is None:
        return LoraSpec(16, 16.0, 0.0, DEFAULT_TARGETS)
    if not isinstance(value, dict):
        raise PlanFileError(f"{where} must be an object")
    rank = _int(value, "rank", where, default=16)
    alpha = value.get("alpha", rank)
    dropout = value.get("dropout", 0.0)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or alpha <= 0:
        raise PlanFileError(f"{where}: field `alpha` must be a positive number, got {json.dumps(alpha)}")
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        raise PlanFileError(f"{where}: field `dropout` must be a number in [0, 1), got {json.dumps(dropout)}")
    targets = value.get("target_modules", list(DEFAULT_TARGETS))
    if not isinstance(targets, list) or not targets or not all(isinstance(t, str) and t for t in targets):
        raise PlanFileError(f"{where}: field `target_modules` must be a non-empty list of module names")
    return LoraSpec(rank, float(alpha), float(dropout), tuple(targets))


def _arch(value: Any, source: str) -> dict[str, int] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise PlanFileError(f"{source}: field `arch` must be an object")
    out = {}
    for key in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab"):
        if key in value:
            out[key] = _int(value, key, f"{source}: arch")
    return out


def _check_consistency(p: RuntimePlan) -> None:
    where = f"{p.source}: plan"
    if p.zero_stage > 3:
        raise PlanFileError(f"{where}: zero_stage {p.zero_stage} is not 0, 1, 2 or 3")
    if p.global_batch != p.micro_batch * p.grad_accum * p.dp:
        raise PlanMismatchError(
            f"{where}: global_batch {p.global_batch} is not micro_batch {p.micro_batch} x grad_accum "
            f"{p.grad_accum} x dp {p.dp}"
        )
    if p.layers_per_stage and len(p.layers_per_stage) != p.pp:
        raise PlanMismatchError(f"{where}: layers_per_stage has {len(p.layers_per_stage)} stages but pp is {p.pp}")
    if any(n < 1 for n in p.layers_per_stage):
        raise PlanMismatchError(f"{where}: layers_per_stage {list(p.layers_per_stage)} has a stage without layers")
    if p.sequence_parallel and p.tp > 1 and p.seq_len % p.tp:
        raise PlanMismatchError(
            f"{where}: sequence parallelism splits seq_len {p.seq_len} over tp {p.tp}, which does not divide it"
        )
    if p.offload != "none" and p.zero_stage == 0:
        raise PlanMismatchError(f"{where}: offload {p.offload} needs ZeRO stage 1 or more (FSDP), plan has 0")


def resolve_plan_path(path: str | os.PathLike[str] | None = None) -> Path:
    """The plan file: ``path`` if given, else ``$GPUPLANE_PLAN_FILE`` (relative to the working directory)."""
    if path is None:
        env = os.environ.get(PLAN_FILE_ENV)
        if not env:
            raise PlanFileError(
                f"no plan: environment variable {PLAN_FILE_ENV} is not set (gpuplane sets it to the job's plan file; "
                "to run by hand, point it at a plan JSON file)"
            )
        path = env
    return Path(path)


def load_plan(path: str | os.PathLike[str] | None = None) -> RuntimePlan:
    """Read and validate the plan file (see the module's docstring for the format)."""
    resolved = resolve_plan_path(path)
    try:
        text = resolved.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlanFileError(
            f"plan file {str(resolved)!r} does not exist (from {PLAN_FILE_ENV}, working directory {os.getcwd()!r})"
        ) from None
    except OSError as err:
        raise PlanFileError(f"plan file {str(resolved)!r} cannot be read: {err}") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        raise PlanFileError(f"plan file {str(resolved)!r} is not JSON: {err}") from None
    override = os.environ.get(PRECISION_ENV)
    if override and isinstance(document, dict):
        if override not in PRECISIONS:
            raise PlanFileError(f"{PRECISION_ENV}={override!r} is not one of {', '.join(PRECISIONS)}")
        document = {**document, "precision": override}
    return parse_plan(document, source=str(resolved))
