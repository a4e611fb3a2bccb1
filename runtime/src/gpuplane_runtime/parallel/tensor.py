"""Tensor and sequence parallelism on a decoder stage (DTensor).

Per decoder layer: q/k/v and gate/up column-wise, o and down row-wise (each part of a fused Phi-3 projection on
its own); the embedding row-wise over the vocabulary and the LM head column-wise with replicated logits; a head
tied to the embedding shares the embedding's shards (both split the vocabulary rows). With sequence parallelism
every norm of the residual stream runs on a slice of the sequence (all-gathered before attention and the MLP,
reduce-scattered after), and the stream between modules stays a plain tensor.

LoRA adapters follow their base: a column-wise base splits B by rows, a row-wise base splits A by columns.

Some parameters see only this rank's share of the activations although every rank holds them whole: per-head
q/k norms (Qwen3, Gemma 3) see the local heads, and a row-wise adapter's B sees a slice of the sequence under
sequence parallelism. Their gradients are partial sums; :func:`apply` returns them, and the train step sums
them over the tensor-parallel group before the optimizer runs.
"""

from __future__ import annotations

import copy
from typing import Any

from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

from ..models.stage import ATTENTION, MLP, DecoderStage

COLUMN = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")
ROW = ("o_proj", "down_proj")


def _projection_names(layer: nn.Module) -> list[tuple[str, bool]]:
    """(path, column-wise) for every projection of a decoder layer, fused parts included."""
    found = []
    for owner in (ATTENTION, MLP):
        block = getattr(layer, owner)
        for name, module in block.named_modules():
            leaf = name.rsplit(".", 1)[-1]
            if not name or ".lora_" in f".{name}" or name.endswith("base_layer"):
                continue
            if leaf in COLUMN or leaf in ROW:
                if isinstance(module, nn.Linear) or hasattr(module, "base_layer"):
                    found.append((f"{owner}.{name}", leaf in COLUMN))
    return found


def _norm_children(layer: nn.Module) -> list[str]:
    """The layer's own norms of the residual stream (input, post-attention, pre/post feed-forward)."""
    return [name for name, module in layer.named_children() if "norm" in name and not list(module.children())]


def apply(stage: DecoderStage, tp_mesh: DeviceMesh, sequence_parallel: bool) -> list[nn.Module]:
    """Shard ``stage`` over ``tp_mesh``; returns the modules whose parameters' gradients are partial over it
    (modules, not parameters: FSDP and materializing replace the parameter objects later)."""
    tp = tp_mesh.size()
    seq = Shard(1)
    out_layout = seq if sequence_parallel else Replicate()
    partial: list[nn.Module] = []
    top: dict[str, ParallelStyle] = {}
    if stage.embed_tokens is not None:
        top["embed_tokens"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=out_layout)
    if stage.lm_head is not None:
        if sequence_parallel:
            top["norm"] = SequenceParallel(use_local_output=True)
        top["lm_head"] = ColwiseParallel(input_layouts=out_layout, output_layouts=Replicate())
    if top:
        parallelize_module(stage, tp_mesh, top)
    if (
        stage.embed_tokens is not None
        and stage.lm_head is not None
        and getattr(stage.config, "tie_word_embeddings", False)
    ):
        # Both split the vocabulary rows, so one DTensor serves both (parallelize_module gave each its own).
        stage.lm_head.weight = stage.embed_tokens.weight
    for layer in stage.layers:
        plan: dict[str, ParallelStyle] = {}
        for path, column in _projection_names(layer):
            module = layer.get_submodule(path)
            if hasattr(module, "base_layer"):  # a PEFT LoRA layer around the projection
                base = f"{path}.base_layer"
                lora_a, lora_b = module.get_submodule("lora_A"), module.get_submodule("lora_B")
                if column:
                    plan[base] = ColwiseParallel()
                    for name, _ in lora_b.named_children():
                        plan[f"{path}.lora_B.{name}"] = ColwiseParallel()
                else:
                    plan[base] = RowwiseParallel(output_layouts=out_layout)
                    for name, _ in lora_a.named_children():
                        plan[f"{path}.lora_A.{name}"] = RowwiseParallel(output_layouts=out_layout)
                    if sequence_parallel:
                        partial.extend(lora_b.children())
            else:
                plan[path] = ColwiseParallel() if column else RowwiseParallel(output_layouts=out_layout)
        if sequence_parallel:
            for name in _norm_children(layer):
                plan[name] = SequenceParallel(use_local_output=True)
            plan[ATTENTION] = PrepareModuleInput(
                input_kwarg_layouts={"hidden_states": seq},
                desired_input_kwarg_layouts={"hidden_states": Replicate()},
                use_local_output=True,
            )
            plan[MLP] = PrepareModuleInput(
                input_layouts=(seq,), desired_input_layouts=(Replicate(),), use_local_output=True
            )
        parallelize_module(layer, tp_mesh, plan)
        for path in stage.family.head_norms:
            partial.append(layer.get_submodule(path))
        if stage.family.fused:
            _localize_attention(layer.get_submodule(ATTENTION), tp)
    return partial


def _localize_attention(attention: nn.Module, tp: int) -> None:
    """Phi-3's attention slices its fused q/k/v output by the config's head counts: give it this rank's."""
    original: Any = attention.config
    config: Any = copy.copy(original)
    config.num_attention_heads = original.num_attention_heads // tp
    config.num_key_value_heads = (original.num_key_value_heads or original.num_attention_heads) // tp
    attention.config = config
    attention.num_key_value_heads = config.num_key_value_heads
