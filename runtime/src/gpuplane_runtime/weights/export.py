"""Exporting a trained model as Hugging Face files, a tensor at a time.

A full fine-tune exports the model: ``model-0000k-of-0000n.safetensors`` (sharded at ``max_shard_bytes``), their
index, ``config.json`` and, when the model was loaded from a directory that has them, the tokenizer and generation
files; ``from_pretrained`` and serving engines (vLLM) load it. A LoRA fine-tune exports the PEFT adapter
(``adapter_model.safetensors`` and ``adapter_config.json``, which ``PeftModel.from_pretrained`` loads) and, on
request, the merged model (each target's weight plus ``alpha / r * B @ A``).

Each tensor is gathered by the ranks of the stage that holds it (its tensor- and data-parallel shards) and sent to
global rank 0, which writes it into a file whose header was written first: no rank ever holds more than one whole
tensor (a fused projection's parts, or a LoRA target's weight and adapters, together). Rank 0 writes the files,
on its node's filesystem or the volume it is given.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from .loading import fused_rows
from .names import adapter_name, checkpoint_source, is_adapter, original_name
from .safetensors_io import SafetensorsWriter

if TYPE_CHECKING:
    from ..core import ParallelModel

EXPORT_DIR_ENV = "GPUPLANE_EXPORT_DIR"
DEFAULT_SHARD_BYTES = 2 << 30
#: Files copied from the model's own directory next to an exported model.
MODEL_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "generation_config.json",
    "chat_template.jinja",
)


@dataclass(frozen=True)
class Item:
    """One exported tensor: its name in the file, the stage that holds it, its parameters' original names (the
    parts of a fused projection, or a LoRA target's base, A and B), its shape and dtype."""

    name: str
    stage: int
    parts: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: torch.dtype
    merge: bool = False


def _gather(param: torch.Tensor) -> torch.Tensor:
    return param.full_tensor() if isinstance(param, DTensor) else param.detach()


def _stage_params(model: ParallelModel) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for chunk, first in model.named_chunks():
        for fqn, param in chunk.named_parameters():
            out.setdefault(original_name(fqn, first), param)
    return out


def _items(model: ParallelModel, mode: str, dtype: torch.dtype) -> list[Item]:
    """This stage's exported tensors, then every stage's, in one order all ranks share."""
    params = _stage_params(model)
    config = model.config
    fused = fused_rows(model.family, config)
    mine: list[Item] = []
    groups: dict[str, list[tuple[int, str, torch.Tensor]]] = {}
    tied = bool(getattr(config, "tie_word_embeddings", False))
    for original, param in params.items():
        if mode == "adapter":
            if is_adapter(original):
                mine.append(Item(adapter_name(original), model.topo.pp_rank, (original,), tuple(param.shape), dtype))
            continue
        if is_adapter(original) or (tied and original == "lm_head.weight"):
            continue
        src = checkpoint_source(original, config, fused)
        groups.setdefault(src.name, []).append((src.row_offset, original, param))
    for name, members in groups.items():
        members.sort(key=lambda m: m[0])
        rows = sum(int(p.shape[0]) for _, _, p in members) if members[0][2].dim() else 0
        shape = (rows, *members[0][2].shape[1:]) if members[0][2].dim() else ()
        parts = tuple(o for _, o, _ in members)
        merge = False
        if mode == "merged" and len(members) == 1 and ".base_layer." in parts[0]:
            stem = parts[0].rsplit(".base_layer.", 1)[0]
            lora_a, lora_b = f"{stem}.lora_A.default.weight", f"{stem}.lora_B.default.weight"
            if lora_a in params and lora_b in params:
                parts, merge = (parts[0], lora_a, lora_b), True
        mine.append(Item(name, model.topo.pp_rank, parts, tuple(int(n) for n in shape), dtype, merge))
    everyone: list[list[Item] | None] = [None] * model.topo.world_size
    dist.all_gather_object(everyone, mine if model.topo.dp_rank == 0 and model.topo.tp_rank == 0 else [])
    merged: dict[str, Item] = {}
    for items in everyone:
        for item in items or []:
            merged.setdefault(item.name, item)
    return sorted(merged.values(), key=lambda i: (i.stage, i.name))


def _value(model: ParallelModel, item: Item, params: dict[str, torch.Tensor]) -> torch.Tensor:
    """The whole tensor, gathered by this stage's ranks (every one of them calls this, in the same order)."""
    gathered = [_gather(params[name]) for name in item.parts]
    if item.merge:
        weight, a, b = gathered
        return weight.float() + model.lora_scaling * (b.float() @ a.float())
    if len(gathered) == 1:
        return gathered[0]
    return torch.cat(gathered, dim=0)


def export(
    model: ParallelModel,
    directory: str | os.PathLike[str],
    *,
    merged: bool = False,
    dtype: torch.dtype | None = None,
    max_shard_bytes: int = DEFAULT_SHARD_BYTES,
) -> Path:
    """Write the model (a full fine-tune) or its LoRA adapter (and the merged model with ``merged``) under
    ``directory`` (the adapter in ``directory``, the merged model in ``directory/merged``). Every rank calls it.
    Returns the directory."""
    root = Path(directory)
    topo = model.topo
    if topo.rank == 0:
        root.mkdir(parents=True, exist_ok=True)
    modes = ["adapter", "merged"] if model.lora is not None and merged else ["adapter" if model.lora else "model"]
    for mode in modes:
        target = root / "merged" if mode == "merged" and model.lora is not None else root
        out_dtype = dtype or (torch.float32 if mode == "adapter" else model.export_dtype)
        _write(model, mode, target, out_dtype, max_shard_bytes)
    dist.barrier()
    return root


def _write(model: ParallelModel, mode: str, target: Path, dtype: torch.dtype, max_shard_bytes: int) -> None:
    topo = model.topo
    items = _items(model, mode, dtype)
    params = _stage_params(model)
    files = _split(items, max_shard_bytes, single="adapter_model.safetensors" if mode == "adapter" else None)
    leader = topo.global_rank_at(topo.pp_rank, 0, 0)
    if topo.rank == 0:
        target.mkdir(parents=True, exist_ok=True)
    for file_name, members in files:
        writer = None
        if topo.rank == 0:
            metadata = {"format": "pt"}
            writer = SafetensorsWriter(
                target / (file_name + ".partial"), [(i.name, i.dtype, i.shape) for i in members], metadata
            )
        for item in members:
            in_stage = item.stage == topo.pp_rank
            value: torch.Tensor | None = None
            if in_stage:
                value = _value(model, item, params).to(dtype)
            source = topo.global_rank_at(item.stage, 0, 0)
            if source != 0:
                if topo.rank == source and in_stage and leader == topo.rank:
                    assert value is not None
                    dist.send(value.contiguous(), dst=0)
                elif topo.rank == 0:
                    value = torch.empty(item.shape, dtype=dtype, device=topo.device)
                    dist.recv(value, src=source)
            if writer is not None:
                assert value is not None
                writer.write(item.name, value.cpu())
            del value
        if writer is not None:
            writer.close()
            os.replace(target / (file_name + ".partial"), target / file_name)
    if topo.rank == 0:
        if len(files) > 1:
            weight_map = {i.name: f for f, members in files for i in members}
            total = sum(_nbytes(i) for i in items)
            index = {"metadata": {"total_size": total}, "weight_map": weight_map}
            (target / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
        _write_config(model, mode, target, dtype)


def _nbytes(item: Item) -> int:
    n = torch.empty((), dtype=item.dtype).element_size()
    for d in item.shape:
        n *= d
    return n


def _split(items: Sequence[Item], max_bytes: int, single: str | None) -> list[tuple[str, list[Item]]]:
    if single is not None:
        return [(single, list(items))]
    shards: list[list[Item]] = [[]]
    size = 0
    for item in items:
        n = _nbytes(item)
        if shards[-1] and size + n > max_bytes:
            shards.append([])
            size = 0
        shards[-1].append(item)
        size += n
    if len(shards) == 1:
        return [("model.safetensors", shards[0])]
    count = len(shards)
    return [(f"model-{i + 1:05d}-of-{count:05d}.safetensors", s) for i, s in enumerate(shards)]


def _write_config(model: ParallelModel, mode: str, target: Path, dtype: torch.dtype) -> None:
    if mode == "adapter":
        assert model.lora is not None
        config: Any = model.lora.peft_config()
        config.base_model_name_or_path = (model.source_dir and str(model.source_dir)) or None
        config.save_pretrained(str(target))
        return
    hf = model.config
    saved = getattr(hf, "dtype", None)
    try:
        hf.dtype = dtype
        hf.save_pretrained(str(target))
    finally:
        hf.dtype = saved
    if model.source_dir is not None:
        for name in MODEL_FILES:
            src = model.source_dir / name
            if src.is_file():
                shutil.copyfile(src, target / name)
