"""Filling this rank's parameters from a checkpoint, a shard at a time, after the plan has split the model.

Each parameter (a DTensor shard under tensor parallelism or FSDP, or a whole tensor) covers a box of its global
tensor; the box is read from the checkpoint tensor that holds it (see :mod:`.names`) and nothing else is. Before
any rank reads, every rank checks the checkpoint against the model (every tensor the model needs, with its shape,
and no tensor it does not know) and the ranks compare what they found, so a checkpoint that does not fit fails
every rank alike with the tensor's name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import DTensor
from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

from ..errors import CheckpointError
from ..models.families import Family
from .names import Source, adapter_name, checkpoint_source, is_adapter, original_name
from .sources import Checkpoint

#: Tensors a checkpoint may hold that are not parameters (older Llama checkpoints saved the rotary frequencies).
IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


class WeightSource(Protocol):
    def read(self, name: str, shape: Sequence[int], offsets: Sequence[int], out: torch.Tensor) -> None: ...

    def describe(self) -> str: ...

    def close(self) -> None: ...


def fused_rows(family: Family | None, config: Any) -> dict[str, tuple[tuple[str, int], ...]]:
    if family is None:
        return {}
    return {f.module: tuple(zip(f.parts, f.sizes(config), strict=True)) for f in family.fused}


def expected_tensors(model: nn.Module, config: Any, family: Family | None) -> dict[str, tuple[int, ...]]:
    """The checkpoint tensors the (whole, meta) model reads, with their shapes."""
    fused = fused_rows(family, config)
    shapes: dict[str, tuple[int, ...]] = {}
    for name, param in model.named_parameters():
        if is_adapter(name):
            continue
        src = checkpoint_source(name, config, fused)
        rows = src.row_offset + (param.shape[0] if param.dim() else 0)
        shape = (rows, *param.shape[1:]) if param.dim() else ()
        prev = shapes.get(src.name)
        if prev is not None and prev[:1] > shape[:1]:
            shape = prev
        shapes[src.name] = tuple(int(n) for n in shape)
    return shapes


def check_checkpoint(expected: dict[str, tuple[int, ...]], ckpt: Checkpoint, buffers: set[str]) -> list[str]:
    """What keeps ``ckpt`` from filling the model: missing tensors, other shapes, tensors the model lacks."""
    problems = []
    where = ckpt.describe()
    for name, shape in expected.items():
        entry = ckpt.entries.get(name)
        if entry is None:
            problems.append(f"the checkpoint in {where} has no tensor `{name}` (the model needs {list(shape)})")
        elif tuple(entry.shape) != shape:
            problems.append(
                f"tensor `{name}` is {list(entry.shape)} in the checkpoint in {where} but {list(shape)} in the model"
            )
    for name in sorted(ckpt.entries):
        if name in expected or name in buffers or name.endswith(IGNORED_SUFFIXES):
            continue
        if name == "lm_head.weight" and "model.embed_tokens.weight" in expected:
            continue  # a tied head saved anyway; the embedding is read
        problems.append(
            f"the checkpoint in {where} has tensor `{name}`, which the model does not have (another architecture?)"
        )
    return problems


def agree(problems: list[str], fingerprint: str | None, world: int) -> None:
    """Every rank learns every rank's problems (and whether all see the same checkpoint) before any reads."""
    views: list[tuple[list[str], str | None] | None] = [None] * world
    dist.all_gather_object(views, (problems, fingerprint))
    for rank, view in enumerate(views):
        assert view is not None
        if view[0]:
            more = f" (and {len(view[0]) - 1} more)" if len(view[0]) > 1 else ""
            raise CheckpointError(f"cannot load the model (rank {rank}): {view[0][0]}{more}")
    first = views[0]
    assert first is not None
    for rank, view in enumerate(views):
        assert view is not None
        if view[1] != first[1]:
            raise CheckpointError(
                f"rank {rank} sees another checkpoint than rank 0 (tensors, shapes or dtypes differ): every node must "
                "hold the same model files"
            )


@dataclass
class Slot:
    """One parameter of this rank and where its values come from."""

    param: torch.Tensor
    original: str
    source: Source
    source_shape: tuple[int, ...]
    adapter: bool


def slots(
    chunks: Sequence[tuple[nn.Module, int | None]],
    config: Any,
    family: Family | None,
    expected: dict[str, tuple[int, ...]],
) -> list[Slot]:
    """Every distinct parameter of this rank's chunks (``(module, first decoder layer or None)``)."""
    fused = fused_rows(family, config)
    seen: set[int] = set()
    out = []
    for module, first in chunks:
        for fqn, param in module.named_parameters():
            if id(param) in seen:
                continue
            seen.add(id(param))
            original = original_name(fqn, first)
            if is_adapter(original):
                out.append(Slot(param, original, Source(original), tuple(param.shape), True))
                continue
            src = checkpoint_source(original, config, fused)
            out.append(Slot(param, original, src, expected.get(src.name, tuple(param.shape)), False))
    return out


def local_box(param: torch.Tensor) -> tuple[torch.Tensor, tuple[int, ...]]:
    """This rank's piece of ``param`` and where it starts in the global tensor."""
    if isinstance(param, DTensor):
        shape, offsets = compute_local_shape_and_global_offset(param.shape, param.device_mesh, param.placements)
        local = param.to_local()
        if tuple(local.shape) != tuple(shape):  # FSDP's padded tail shard
            local = local[tuple(slice(0, n) for n in shape)]
        return local, tuple(int(o) for o in offsets)
    return param.data, (0,) * param.dim()


def fill(targets: Sequence[Slot], base: WeightSource, adapters: WeightSource | None, adapter_keys: bool) -> None:
    """Read every slot's box from its source (``adapter_keys``: the adapter source is a PEFT file)."""
    with torch.no_grad():
        for slot in targets:
            local, offsets = local_box(slot.param)
            if local.numel() == 0:
                continue
            if slot.adapter:
                assert adapters is not None, f"internal: no source for the adapter {slot.original}"
                key = adapter_name(slot.original) if adapter_keys else slot.original
                adapters.read(key, slot.source_shape, offsets, local)
                continue
            shifted = list(offsets)
            if shifted:
                shifted[0] += slot.source.row_offset
            base.read(slot.source.name, slot.source_shape, shifted, local)
