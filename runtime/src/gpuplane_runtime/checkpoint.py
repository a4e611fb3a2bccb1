"""Checkpoints that load under another plan: ``torch.distributed.checkpoint`` (DCP) with the state keyed by the
original model's parameter names, so a checkpoint written under one (tp, pp, dp, ZeRO) loads under any other.

A checkpoint is a directory ``<root>/step-<step>`` holding DCP's files (the model and optimizer tensors, each rank
writing its shards; DCP reshards on load to whatever mesh and placements the loading model has) and
``gpuplane.json`` (the step, the LR scheduler's and fp16 loss scaler's state, every rank's RNG state, the
script's own ``extra``).
``<root>/latest`` names the newest complete checkpoint; it is replaced only after every rank finished writing,
so a job killed during a save resumes from the previous one.
"""

from __future__ import annotations

import base64
import json
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.filesystem import FileSystemReader
from torch.distributed.checkpoint.metadata import TensorStorageMetadata
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load
from torch.distributed.checkpoint.state_dict_saver import save as dcp_save

from .errors import CheckpointError

if TYPE_CHECKING:
    from .core import ParallelModel

CHECKPOINT_DIR_ENV = "GPUPLANE_CHECKPOINT_DIR"
JOB_ID_ENV = "GPUPLANE_JOB_ID"
FORMAT_VERSION = 1
META_FILE = "gpuplane.json"
LATEST_FILE = "latest"
_OPTIONS = StateDictOptions(flatten_optimizer_state_dict=True)


def checkpoint_root(explicit: str | os.PathLike[str] | None) -> Path | None:
    """The checkpoint directory: ``explicit``, else ``$GPUPLANE_CHECKPOINT_DIR``, else, in a gpuplane job
    (``$GPUPLANE_JOB_ID``), ``~/checkpoints/<job id>`` (the lease's home: every generation of the job, whatever
    its plan, saves and resumes there), else none."""
    if explicit is not None:
        return Path(explicit)
    env = os.environ.get(CHECKPOINT_DIR_ENV)
    if env:
        return Path(env)
    job = os.environ.get(JOB_ID_ENV)
    return Path.home() / "checkpoints" / job if job else None


def find_checkpoint(path: Path) -> Path | None:
    """``path`` itself when it is a checkpoint, else the one its ``latest`` names, else None."""
    if (path / META_FILE).is_file():
        return path
    latest = path / LATEST_FILE
    if latest.is_file():
        target = path / latest.read_text(encoding="utf-8").strip()
        if (target / META_FILE).is_file():
            return target
        raise CheckpointError(f"{latest} names {target}, which is not a complete checkpoint (no {META_FILE})")
    return None


def should_resume(root: Path, world_size: int) -> bool:
    """Whether ``root`` holds a checkpoint, agreed by every rank (a collective): ranks that see different things
    (a directory that is not shared between nodes) fail alike instead of some loading while others train."""
    try:
        view = "found" if find_checkpoint(root) is not None else "none"
    except CheckpointError as err:
        view = str(err)
    views: list[str | None] = [None] * world_size
    dist.all_gather_object(views, view)
    if all(v == "none" for v in views):
        return False
    if all(v == "found" for v in views):
        return True
    rank, odd = next((r, v) for r, v in enumerate(views) if v != views[0])
    raise CheckpointError(
        f"the ranks do not see the same checkpoint in {root}: rank 0 sees {_describe(views[0])}, rank {rank} sees "
        f"{_describe(odd)} (the checkpoint directory must be one filesystem every node shares)"
    )


def _describe(view: str | None) -> str:
    return {"found": "a checkpoint", "none": "none"}.get(view or "none", view or "none")


# --- names: this rank's chunks <-> the original full model ----------------------------------------------------
def _original(model: ParallelModel, key: str) -> str:
    """``<chunk>.<fqn>[.<state name>]`` as the unsplit model names it (the chunk's prefix mapped, the rest kept)."""
    name = model.original_name(key)
    return name


def _to_checkpoint_keys(
    model: ParallelModel, msd: dict[str, Any], osd: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """One flat dict keyed ``model.<original fqn>`` / ``optim.state.<original fqn>.<name>``, and the way back
    (a tied head and embedding are one tensor: one key, both ways back)."""
    flat: dict[str, Any] = {}
    back: dict[str, list[str]] = {}
    for key, value in msd.items():
        name = "model." + _original(model, key)
        flat.setdefault(name, value)
        back.setdefault(name, []).append("model:" + key)
    for key, value in osd.items():
        kind, _, rest = key.partition(".")  # "state" or "param_groups", then "<chunk>.<fqn>.<name>"
        name = f"optim.{kind}." + _original(model, rest)
        flat.setdefault(name, value)
        back.setdefault(name, []).append("optim:" + key)
    return flat, back


def _state(model: ParallelModel) -> tuple[dict[str, Any], dict[str, list[str]]]:
    assert model.optimizer is not None
    msd, osd = get_state_dict(model.stage, model.optimizer, options=_OPTIONS)
    return _to_checkpoint_keys(model, msd, osd)


# --- RNG ------------------------------------------------------------------------------------------------------
def _rng_state(device: torch.device) -> dict[str, str]:
    state = {"cpu": base64.b64encode(torch.get_rng_state().numpy().tobytes()).decode()}
    if device.type == "cuda":
        state["cuda"] = base64.b64encode(torch.cuda.get_rng_state(device).numpy().tobytes()).decode()
    return state


def _set_rng_state(state: dict[str, str], device: torch.device) -> None:
    def tensor(text: str) -> torch.Tensor:
        return torch.frombuffer(bytearray(base64.b64decode(text)), dtype=torch.uint8)

    torch.set_rng_state(tensor(state["cpu"]))
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(tensor(state["cuda"]), device)


# --- save and load -------------------------------------------------------------------------------------------
def save(model: ParallelModel, root: Path, extra: dict[str, Any] | None) -> Path:
    """Write ``<root>/step-<step>`` from every rank (a collective: every rank calls it), then point ``latest``
    at it. Returns the checkpoint's directory."""
    topo = model.topo
    path = root / f"step-{model.step:08d}"
    scheduler = model.scheduler.state_dict() if model.scheduler is not None else None
    meta: dict[str, Any] = {
        "version": FORMAT_VERSION,
        "step": model.step,
        "plan": {k: getattr(model.plan, k) for k in ("tp", "pp", "dp", "zero_stage", "global_batch")},
        "world_size": topo.world_size,
        "scheduler": scheduler,
        "grad_scaler": model.scaler.state_dict() if model.scaler is not None else None,
        "extra": extra or {},
    }
    try:
        json.dumps(meta)
    except (TypeError, ValueError) as err:
        raise CheckpointError(
            f"save_checkpoint: the scheduler state or `extra` is not JSON-serialisable ({err}); pass plain numbers, "
            "strings, lists and dicts"
        ) from None
    flat, _ = _state(model)
    rngs: list[dict[str, str] | None] = [None] * topo.world_size
    dist.all_gather_object(rngs, _rng_state(topo.device))
    meta["rng"] = rngs
    with warnings.catch_warnings():
        # DCP's file writer calls the deprecated Tensor.storage() (torch 2.9); nothing for the script to do.
        warnings.filterwarnings("ignore", message="TypedStorage is deprecated")
        dcp_save(flat, checkpoint_id=path)
    dist.barrier()
    if topo.rank == 0:
        tmp = path / (META_FILE + ".tmp")
        tmp.write_text(json.dumps(meta), encoding="utf-8")
        os.replace(tmp, path / META_FILE)
        latest_tmp = root / (LATEST_FILE + ".tmp")
        latest_tmp.write_text(path.name + "\n", encoding="utf-8")
        os.replace(latest_tmp, root / LATEST_FILE)
    dist.barrier()
    return path


def _problems(flat: dict[str, Any], path: Path) -> list[str]:
    """What in this rank's state the checkpoint lacks or holds with another shape."""
    try:
        metadata = FileSystemReader(str(path)).read_metadata()
    except Exception as err:  # any unreadable metadata is the same problem
        return [f"cannot read the checkpoint's metadata in {path}: {err}"]
    stored = metadata.state_dict_metadata
    missing = [k for k in flat if k not in stored]
    problems = []
    if missing:
        models = [k[len("model.") :] for k in missing if k.startswith("model.")]
        if models:
            problems.append(
                f"the checkpoint in {path} has no parameter {', '.join(models[:3])}"
                + (f" (and {len(models) - 3} more)" if len(models) > 3 else "")
                + "; it was saved from another model"
            )
        else:
            problems.append(
                f"the checkpoint in {path} has no optimizer state {missing[0][len('optim.') :]}; it was saved with "
                "another optimizer"
            )
    for key, value in flat.items():
        entry = stored.get(key)
        if isinstance(value, torch.Tensor) and isinstance(entry, TensorStorageMetadata):
            if tuple(value.shape) != tuple(entry.size):
                what = key[len("model.") :] if key.startswith("model.") else key
                problems.append(
                    f"`{what}` has shape {list(entry.size)} in the checkpoint in {path} but {list(value.shape)} in "
                    "this model; it was saved from another model"
                )
                break
    return problems


def _first_failure(err: BaseException) -> str:
    """The first rank's error of a DCP failure (or the error itself): its first sentence, at most 200 characters
    (torch's own advice after it, such as loading with ``weights_only=False``, is not for a damaged file)."""
    cause: BaseException = err
    where = ""
    if isinstance(err, CheckpointException) and err.failures:
        rank = min(err.failures)
        where, cause = f"rank {rank}: ", err.failures[rank][0]
    lines = str(cause).strip().splitlines()
    first = lines[0].split(". ")[0].rstrip(".") if lines else ""
    text = f"{where}{type(cause).__name__}: {first}"
    return text if len(text) <= 200 else text[:197] + "..."


def load(model: ParallelModel, path: Path) -> dict[str, Any]:
    """Load the checkpoint at ``path`` (a checkpoint, or a directory whose ``latest`` names one) into this
    rank's stage and optimizer, resharded to this plan; restore the step, the scheduler and the RNG. A
    collective: every rank calls it. Returns the ``extra`` the script saved."""
    topo = model.topo
    found = find_checkpoint(path)
    problems: list[str] = []
    meta: dict[str, Any] = {}
    if found is None:
        problems.append(f"no checkpoint in {path} (neither {META_FILE} nor {LATEST_FILE})")
    else:
        try:
            meta = json.loads((found / META_FILE).read_text(encoding="utf-8"))
            if meta.get("version") != FORMAT_VERSION:
                problems.append(f"{found / META_FILE} has version {meta.get('version')!r}; expected {FORMAT_VERSION}")
        except (OSError, ValueError) as err:
            problems.append(f"cannot read {found / META_FILE}: {err}")
    flat, back = _state(model)
    if not problems and found is not None:
        problems = _problems(flat, found)
    # Every rank learns every rank's problem before any rank enters DCP's collectives: a model that does not
    # match fails everywhere alike, never leaves a peer waiting.
    everyone: list[list[str] | None] = [None] * topo.world_size
    dist.all_gather_object(everyone, problems)
    for rank, found_problems in enumerate(everyone):
        if found_problems:
            raise CheckpointError(f"cannot load the checkpoint (rank {rank}): {found_problems[0]}")
    assert found is not None and model.optimizer is not None
    try:
        dcp_load(flat, checkpoint_id=found)
    except (Exception, CheckpointException) as err:  # DCP's CheckpointException is a BaseException
        # A shard that cannot be read (a corrupt or truncated file): DCP gathers every rank's read errors, so
        # every rank gets here alike. Loading writes nothing: the checkpoint stays as it was, for another try.
        raise CheckpointError(
            f"cannot load the checkpoint in {found}: its data does not read back ({_first_failure(err)}); "
            "it is left as it was"
        ) from err
    msd: dict[str, Any] = {}
    osd: dict[str, Any] = {}
    for key, value in flat.items():
        for target in back[key]:
            kind, _, original = target.partition(":")
            (msd if kind == "model" else osd)[original] = value
    set_state_dict(model.stage, model.optimizer, model_state_dict=msd, optim_state_dict=osd, options=_OPTIONS)
    model.step = int(meta["step"])
    scheduler = meta.get("scheduler")
    if model.scheduler is not None:
        if scheduler is None:
            raise CheckpointError(f"the checkpoint in {found} has no LR scheduler state, but this job has a scheduler")
        model.scheduler.load_state_dict(scheduler)
    if model.scaler is not None and meta.get("grad_scaler"):
        model.scaler.load_state_dict(meta["grad_scaler"])
    rngs = meta.get("rng") or []
    if rngs:
        # The same rank's RNG when the world size is the same; rank 0's otherwise (every rank seeded alike).
        _set_rng_state(rngs[topo.rank] if len(rngs) == topo.world_size else rngs[0], topo.device)
    extra = meta.get("extra") or {}
    assert isinstance(extra, dict)
    return extra
