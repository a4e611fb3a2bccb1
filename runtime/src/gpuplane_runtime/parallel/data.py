"""Data parallelism by ZeRO stage: FSDP2 ``fully_shard`` per decoder layer and per stage (1 and 2 keep the
gathered parameters between forward and backward, 3 reshards them), DDP for ZeRO 0 without a split, and one
flat gradient all-reduce for ZeRO 0 with tensor or pipeline parallelism."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor

from ..distributed import Topology
from ..plan import RuntimePlan


def grad_sync_kind(plan: RuntimePlan) -> str:
    """How gradients meet over the data-parallel group: none, fsdp, ddp or allreduce."""
    if plan.dp == 1:
        return "none"
    if plan.zero_stage >= 1:
        return "fsdp"
    if plan.tp == 1 and plan.pp == 1:
        return "ddp"
    return "allreduce"


def fully_shard_stage(module: nn.Module, plan: RuntimePlan, topo: Topology, compute: torch.dtype) -> list[str]:
    """FSDP2 over the data-parallel mesh: each decoder layer its own unit, then the stage's root. Returns notes
    for the start-up log."""
    notes = []
    kwargs: dict[str, Any] = {"mesh": topo.mesh["dp"], "reshard_after_forward": plan.zero_stage >= 3}
    if compute != torch.float32:
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=compute, reduce_dtype=torch.float32)
    if plan.offload != "none":
        if topo.device.type == "cuda":
            kwargs["offload_policy"] = CPUOffloadPolicy()
        else:
            notes.append(f"offload {plan.offload} has nothing to do on the CPU; states stay where they are")
    layers = getattr(module, "layers", None)
    if layers is None:
        inner = getattr(module, "model", None)
        layers = getattr(inner, "layers", None)
    if isinstance(layers, nn.ModuleList):
        for layer in layers:
            fully_shard(layer, **kwargs)
    fully_shard(module, **kwargs)
    return notes


def allreduce_grads(params: list[nn.Parameter], group: dist.ProcessGroup, size: int, *, average: bool) -> None:
    """Sum (or average) the gradients of ``params`` over ``group`` in one flat all-reduce; DTensor gradients
    reduce their local shards (peers hold the same shard)."""
    if size == 1:
        return
    with torch.no_grad():
        grads: list[torch.Tensor] = []
        for p in params:
            if p.grad is None:
                continue
            g = p.grad
            if isinstance(g, DTensor):
                if isinstance(p, DTensor) and g.placements != p.placements:
                    # A gradient may come out in another layout than its parameter (the vocabulary-parallel
                    # embedding's is replicated): put it in the parameter's, so peers reduce the same shard.
                    g = p.grad = g.redistribute(p.device_mesh, p.placements)
                g = g.to_local()
            grads.append(g)
        if not grads:
            return
        flat = torch.cat([g.reshape(-1).to(torch.float32) for g in grads])
        dist.all_reduce(flat, group=group)
        if average:
            flat /= size
        offset = 0
        for g in grads:
            n = g.numel()
            g.copy_(flat[offset : offset + n].view_as(g))
            offset += n
