"""Where a rank's parameters get their values: a Hugging Face checkpoint (safetensors, read a box at a time), or
random weights that do not depend on the plan (each tensor generated in fixed row blocks from its name, so any
rank makes any box of it alike, and the same model trains the same under every plan)."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import torch
from torch import nn

from ..errors import CheckpointError
from .safetensors_io import TensorEntry, read_box, read_header

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
ADAPTER_FILE = "adapter_model.safetensors"


class Checkpoint:
    """The tensors of a Hugging Face checkpoint directory: ``model.safetensors.index.json`` and the files it
    names, or the directory's ``*.safetensors`` files. Only the headers are read here."""

    def __init__(self, directory: Path, files: Sequence[Path] | None = None) -> None:
        self.directory = directory
        if files is None:
            files = _checkpoint_files(directory)
        self.entries: dict[str, TensorEntry] = {}
        for path in files:
            entries, _ = read_header(path)
            for name, entry in entries.items():
                if name in self.entries:
                    raise CheckpointError(
                        f"{directory}: tensor `{name}` is in two files ({self.entries[name].file.name}, {path.name})"
                    )
                self.entries[name] = entry
        self._open: dict[Path, BinaryIO] = {}

    def describe(self) -> str:
        return str(self.directory)

    def fingerprint(self) -> str:
        """The tensors' names, shapes and dtypes: equal on every node that holds the same checkpoint."""
        digest = hashlib.sha256()
        for name in sorted(self.entries):
            e = self.entries[name]
            digest.update(f"{name}:{list(e.shape)}:{e.dtype}:{e.nbytes};".encode())
        return digest.hexdigest()[:16]

    def read(self, name: str, shape: Sequence[int], offsets: Sequence[int], out: torch.Tensor) -> None:
        entry = self.entries[name]
        f = self._open.get(entry.file)
        if f is None:
            f = self._open[entry.file] = entry.file.open("rb")
        read_box(entry, offsets, out, f)

    def close(self) -> None:
        for f in self._open.values():
            f.close()
        self._open.clear()


def _checkpoint_files(directory: Path) -> list[Path]:
    index = directory / INDEX_FILE
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise CheckpointError(f"{index} is not a safetensors index ({err})") from None
        names = sorted({str(f) for f in weight_map.values()})
        files = []
        for name in names:
            path = (directory / name).resolve()
            if path.parent != directory.resolve():
                raise CheckpointError(f"{index} names {name!r}, outside the checkpoint directory")
            if not path.is_file():
                raise CheckpointError(f"{index} names {name}, which is not in {directory}")
            files.append(path)
        return files
    files = sorted(directory.glob("*.safetensors"))
    files = [f for f in files if f.name != ADAPTER_FILE]
    if not files:
        raise CheckpointError(
            f"{directory} holds no safetensors weights ({INDEX_FILE} or *.safetensors); the runtime loads Hugging "
            "Face checkpoints in safetensors (convert .bin checkpoints first)"
        )
    return files


def resolve_model_dir(model: str | os.PathLike[str]) -> Path:
    """A local directory, or a hub id (``org/name``) resolved in the local Hugging Face cache (``$HF_HOME``);
    nothing is downloaded."""
    path = Path(model)
    if path.is_dir():
        return path
    text = str(model)
    if path.is_absolute() or text.startswith((".", "~")) or text.count("/") != 1:
        raise CheckpointError(f"model {text!r}: no such directory (and not a hub id such as org/name)")
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(text, local_files_only=True))
    except Exception as err:  # not in the cache, or no huggingface_hub
        home = os.environ.get("HF_HOME", "~/.cache/huggingface")
        raise CheckpointError(
            f"model {text!r} is not a directory and not in the local Hugging Face cache (HF_HOME={home}): "
            f"{type(err).__name__}; jobs do not download models, put the checkpoint on the hosts or in the model cache"
        ) from None


# --- random weights ---------------------------------------------------------------------------------------------
_BLOCK_ELEMENTS = 1 << 20


def _seed(seed: int, name: str, block: int) -> int:
    digest = hashlib.blake2b(f"{seed}:{name}:{block}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


class RandomWeights:
    """Random weights a box at a time, the same for every plan: Linear and Embedding weights ~ N(0, std) (the
    config's ``initializer_range``), biases zero, LoRA's A uniform (+-1/sqrt(fan_in), PEFT's default) and B zero,
    and any other parameter (norms) as the family's own ``_init_weights`` sets it."""

    def __init__(self, model: nn.Module, seed: int, std: float, names: dict[str, str]) -> None:
        """``names`` maps each parameter's name in ``model`` (still whole, on the meta device) to the name the
        runtime reads it by."""
        self.seed = seed
        self.std = std
        self.rules: dict[str, tuple[str, Any]] = {}
        init = getattr(model, "_init_weights", None)
        for module_name, module in model.named_modules():
            for pname, param in module.named_parameters(recurse=False):
                full = f"{module_name}.{pname}" if module_name else pname
                key = names.get(full, full)
                if ".lora_A." in key:
                    self.rules[key] = ("uniform", 1.0 / math.sqrt(param.shape[1]))
                elif ".lora_B." in key or (pname == "bias" and isinstance(module, nn.Linear)):
                    self.rules[key] = ("zeros", None)
                elif isinstance(module, (nn.Linear, nn.Embedding)):
                    self.rules[key] = ("normal", std)
                else:
                    self.rules[key] = ("module", (copy.deepcopy(module), pname, init))

    def describe(self) -> str:
        return f"random weights (seed {self.seed})"

    def read(self, name: str, shape: Sequence[int], offsets: Sequence[int], out: torch.Tensor) -> None:
        kind, arg = self.rules.get(name, ("normal", self.std))
        if kind == "zeros":
            out.zero_()
            return
        if kind == "module":
            twin, pname, init = arg
            value = _module_init(twin, pname, init)
            box = tuple(slice(o, o + n) for o, n in zip(offsets, out.shape, strict=True))
            out.copy_(value[box])
            return
        scale = float(arg)
        if not shape:
            gen = torch.Generator().manual_seed(_seed(self.seed, name, 0))
            value = torch.empty((), dtype=torch.float32)
            _draw(value, kind, scale, gen)
            out.copy_(value)
            return
        if out.numel() == 0:
            return
        inner = tuple(shape[1:])
        row = 1
        for n in inner:
            row *= n
        # Generated in blocks of whole rows of the global tensor: a block is the same whichever box asks for it.
        per_block = max(1, _BLOCK_ELEMENTS // max(row, 1))
        first = offsets[0]
        last = first + out.shape[0]
        rest = tuple(slice(o, o + n) for o, n in zip(offsets[1:], out.shape[1:], strict=True))
        for block in range(first // per_block, (last - 1) // per_block + 1):
            b0 = block * per_block
            rows = min(per_block, shape[0] - b0)
            gen = torch.Generator().manual_seed(_seed(self.seed, name, block))
            values = torch.empty((rows, *inner), dtype=torch.float32)
            _draw(values, kind, scale, gen)
            lo, hi = max(first, b0), min(last, b0 + rows)
            out[lo - first : hi - first].copy_(values[(slice(lo - b0, hi - b0), *rest)])

    def close(self) -> None:
        pass


def _draw(t: torch.Tensor, kind: str, scale: float, gen: torch.Generator) -> None:
    if kind == "normal":
        t.normal_(0.0, scale, generator=gen)
    elif kind == "uniform":
        t.uniform_(-scale, scale, generator=gen)
    else:  # pragma: no cover - rules are made above
        raise ValueError(kind)


def _module_init(twin: nn.Module, pname: str, init: Any) -> torch.Tensor:
    materialized = copy.deepcopy(twin).to_empty(device="cpu")
    with torch.no_grad():
        reset = getattr(materialized, "reset_parameters", None)
        if init is not None:
            init(materialized)
        elif callable(reset):
            reset()
    value: torch.Tensor = getattr(materialized, pname).detach().float()
    return value


@contextlib.contextmanager
def opened(source: Checkpoint | RandomWeights) -> Iterator[Checkpoint | RandomWeights]:
    try:
        yield source
    finally:
        source.close()
