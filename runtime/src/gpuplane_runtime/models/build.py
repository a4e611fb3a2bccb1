"""Building a model without its weights: the parameters on the meta device (no memory), the buffers (rotary
frequencies, Gemma 3's embedding scale) computed for real since they are small and the family's constructor knows
them. The runtime then splits the model per the plan and fills only this rank's parameters."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..errors import CheckpointError, UnsupportedModelError


@dataclass(frozen=True)
class Pretrained:
    """A Hugging Face checkpoint: a directory with ``config.json`` and safetensors weights (sharded with their
    index, or one file), or a hub id found in the local cache. Made by :func:`gpuplane_runtime.pretrained`."""

    model: str
    attn_implementation: str | None = None
    tokenizer_files: bool = True


@dataclass(frozen=True)
class FromConfig:
    """A model of the given transformers config with random weights that do not depend on the plan. Made by
    :func:`gpuplane_runtime.from_config`."""

    config: Any
    seed: int = 0


ModelSource = Pretrained | FromConfig


def pretrained(model: str | os.PathLike[str], *, attn_implementation: str | None = None) -> Pretrained:
    """A pretrained model to load sharded: each rank reads only the tensors and bytes its part of the plan
    holds. ``model`` is a directory or a hub id in the local cache (``$HF_HOME``); nothing is downloaded."""
    return Pretrained(str(model), attn_implementation)


def from_config(config: Any, *, seed: int = 0) -> FromConfig:
    """A model of ``config`` (a transformers ``PretrainedConfig``) with random weights, built sharded like a
    pretrained one: the weights are the same under every plan."""
    return FromConfig(config, seed)


@contextlib.contextmanager
def parameters_on_meta() -> Iterator[None]:
    """Every parameter registered inside is moved to the meta device; buffers stay where they were made."""
    original = nn.Module.register_parameter

    def register(module: nn.Module, name: str, param: nn.Parameter | None) -> None:
        original(module, name, param)
        if param is not None and param.device.type != "meta":
            kwargs = dict(vars(param))
            kwargs["requires_grad"] = param.requires_grad
            module._parameters[name] = type(param)(param.to("meta"), **kwargs)

    nn.Module.register_parameter = register  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        nn.Module.register_parameter = original  # type: ignore[method-assign]


def load_config(source: Pretrained) -> tuple[Any, Path]:
    from transformers import AutoConfig

    from ..weights.sources import resolve_model_dir

    directory = resolve_model_dir(source.model)
    if not (directory / "config.json").is_file():
        raise CheckpointError(f"{directory} has no config.json (a Hugging Face model directory has one)")
    try:
        config = AutoConfig.from_pretrained(directory)
    except Exception as err:
        raise CheckpointError(f"{directory}/config.json cannot be read by transformers: {err}") from None
    return config, directory


def build_meta(config: Any, attn_implementation: str | None = None) -> nn.Module:
    """The causal LM of ``config`` with its parameters on the meta device (fp32: the master weights' dtype)."""
    from transformers import AutoModelForCausalLM

    kwargs: dict[str, Any] = {"dtype": torch.float32}
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    try:
        with parameters_on_meta():
            model: nn.Module = AutoModelForCausalLM.from_config(config, **kwargs)  # type: ignore[no-untyped-call]
    except ValueError as err:
        raise UnsupportedModelError(f"transformers has no causal LM for this config: {err}") from None
    return model


def stash_buffers(module: nn.Module) -> dict[str, torch.Tensor]:
    """Copies of the module's buffers, which ``to_empty`` would leave uninitialized."""
    return {name: buf.detach().clone() for name, buf in module.named_buffers() if buf.device.type != "meta"}


def materialize(module: nn.Module, device: torch.device, buffers: dict[str, torch.Tensor]) -> None:
    """Allocate the module's meta parameters (this rank's shards only) on ``device`` and put the buffers back."""
    module.to_empty(device=device)
    with torch.no_grad():
        for name, buf in module.named_buffers():
            if name in buffers:
                buf.copy_(buffers[name])
