"""Process group and device mesh: CUDA + NCCL where there are GPUs, CPU + gloo otherwise."""

from __future__ import annotations

import atexit
import datetime
import os
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from .errors import GpuplaneRuntimeError, PlanMismatchError
from .plan import RuntimePlan

TIMEOUT_ENV = "GPUPLANE_COLLECTIVE_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 600.0
MESH_DIMS = ("pp", "dp", "tp")


@dataclass(frozen=True)
class Topology:
    """Where this process sits: its global rank, its device, and its coordinate on each mesh dimension."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str
    timeout_s: float
    mesh: DeviceMesh
    pp_rank: int
    dp_rank: int
    tp_rank: int

    def coordinates(self) -> dict[str, int]:
        return {"pp": self.pp_rank, "dp": self.dp_rank, "cp": 0, "tp": self.tp_rank}

    def global_rank_at(self, pp: int, dp: int, tp: int) -> int:
        return int(self.mesh.mesh[pp, dp, tp].item())


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise GpuplaneRuntimeError(f"environment variable {name}={value!r} is not an integer") from None


def collective_timeout_s() -> float:
    value = os.environ.get(TIMEOUT_ENV)
    if value is None:
        return DEFAULT_TIMEOUT_S
    try:
        seconds = float(value)
    except ValueError:
        raise GpuplaneRuntimeError(f"{TIMEOUT_ENV}={value!r} is not a number of seconds") from None
    if not seconds > 0:
        raise GpuplaneRuntimeError(f"{TIMEOUT_ENV}={value!r} must be positive")
    return seconds


def check_world(plan: RuntimePlan) -> tuple[int, int, int]:
    """(rank, world size, local rank) from torchrun's environment, checked against the plan before any
    collective runs (so a mismatch fails every rank at once instead of hanging)."""
    world = _env_int("WORLD_SIZE")
    rank = _env_int("RANK")
    local_rank = _env_int("LOCAL_RANK")
    if world is None or rank is None:
        if plan.world_size == 1:
            return 0, 1, 0
        raise PlanMismatchError(
            f"the plan needs {plan.world_size} processes (tp {plan.tp} x pp {plan.pp} x dp {plan.dp} x cp "
            f"{plan.cp}) but RANK/WORLD_SIZE are not set: launch with torchrun"
        )
    if world != plan.world_size:
        raise PlanMismatchError(
            f"the plan's mesh tp {plan.tp} x pp {plan.pp} x dp {plan.dp} x cp {plan.cp} = {plan.world_size} "
            f"processes, but this job has WORLD_SIZE={world}"
        )
    if plan.cp > 1:
        raise PlanMismatchError(
            f"the plan has context parallelism cp {plan.cp}; this runtime does not apply context parallelism yet "
            "(pin cp 1 when planning)"
        )
    return rank, world, local_rank if local_rank is not None else rank


def setup(plan: RuntimePlan) -> Topology:
    """Initialise the process group (with the collective timeout) and the (pp, dp, tp) device mesh."""
    rank, world, local_rank = check_world(plan)
    timeout_s = collective_timeout_s()
    if torch.cuda.is_available():
        device_type, backend = "cuda", "nccl"
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device_type, backend = "cpu", "gloo"
        device = torch.device("cpu")
    if not dist.is_initialized():
        # A single process without torchrun still gets a (one-rank) group, so the code path is the same.
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29500")
        os.environ.setdefault("RANK", str(rank))
        os.environ.setdefault("WORLD_SIZE", str(world))
        dist.init_process_group(
            backend=backend,
            timeout=datetime.timedelta(seconds=timeout_s),
            device_id=device if backend == "nccl" else None,
        )
        atexit.register(_shutdown)
    mesh = init_device_mesh(device_type, (plan.pp, plan.dp, plan.tp), mesh_dim_names=MESH_DIMS)
    coordinate = mesh.get_coordinate()
    if coordinate is None:  # pragma: no cover - every rank is in the mesh
        raise GpuplaneRuntimeError(f"rank {rank} is not in the device mesh")
    pp_rank, dp_rank, tp_rank = coordinate
    topo = Topology(rank, world, local_rank, device, backend, timeout_s, mesh, pp_rank, dp_rank, tp_rank)
    print(
        f"gpuplane_runtime: rank {rank}/{world} mesh pp={pp_rank} dp={dp_rank} cp=0 tp={tp_rank} "
        f"(device {device}, backend {backend}, collective timeout {timeout_s:g} s)",
        file=sys.stderr,
        flush=True,
    )
    return topo


def _shutdown() -> None:
    if dist.is_initialized():
        try:
            dist.destroy_process_group()
        except Exception:  # best effort at exit
            pass
