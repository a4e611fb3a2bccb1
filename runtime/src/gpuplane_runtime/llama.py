"""Hugging Face Llama-family models (Llama, Mistral, Qwen2): structure, tensor-parallel layout, pipeline stages.

The layout follows the module structure, not the class name: any causal LM with ``model.embed_tokens``,
``model.layers[i].self_attn.{q,k,v,o}_proj``, ``model.layers[i].mlp.{gate,up,down}_proj``, the two norms,
``model.norm``, ``model.rotary_emb`` and ``lm_head`` is split. Whatever is missing or does not divide by the
tensor-parallel degree is named in the error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
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

from .errors import PlanMismatchError, UnsupportedModelError

ATTENTION_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_PROJECTIONS = ("gate_proj", "up_proj", "down_proj")
LAYER_NORMS = ("input_layernorm", "post_attention_layernorm")
CAUSAL_ATTENTION = ("sdpa", "flash_attention_2", "flash_attention_3", "flex_attention")


@dataclass
class LlamaParts:
    """The pieces of a Llama-family causal LM the runtime needs."""

    model: nn.Module
    embed_tokens: nn.Embedding
    layers: nn.ModuleList
    norm: nn.Module
    rotary_emb: nn.Module
    lm_head: nn.Linear
    config: Any


def _child(parent: nn.Module, name: str, path: str, model: nn.Module) -> nn.Module:
    child = getattr(parent, name, None)
    if not isinstance(child, nn.Module):
        raise UnsupportedModelError(
            f"cannot split {type(model).__name__}: it has no module `{path}` (the runtime splits Hugging Face "
            "Llama-family causal LMs: Llama, Mistral, Qwen2)"
        )
    return child


def find_parts(model: nn.Module) -> LlamaParts:
    """The model's Llama-family structure, or :class:`UnsupportedModelError` naming the first missing module."""
    inner = _child(model, "model", "model", model)
    lm_head = _child(model, "lm_head", "lm_head", model)
    embed = _child(inner, "embed_tokens", "model.embed_tokens", model)
    layers = _child(inner, "layers", "model.layers", model)
    norm = _child(inner, "norm", "model.norm", model)
    rotary = _child(inner, "rotary_emb", "model.rotary_emb", model)
    if not isinstance(embed, nn.Embedding):
        raise UnsupportedModelError(f"cannot split `model.embed_tokens`: {type(embed).__name__} is not nn.Embedding")
    if not isinstance(lm_head, nn.Linear):
        raise UnsupportedModelError(f"cannot split `lm_head`: {type(lm_head).__name__} is not nn.Linear")
    if not isinstance(layers, nn.ModuleList) or len(layers) == 0:
        raise UnsupportedModelError("cannot split `model.layers`: not a non-empty nn.ModuleList of decoder layers")
    for i, layer in enumerate(layers):
        attn = _child(layer, "self_attn", f"model.layers.{i}.self_attn", model)
        mlp = _child(layer, "mlp", f"model.layers.{i}.mlp", model)
        for name in ATTENTION_PROJECTIONS:
            proj = _child(attn, name, f"model.layers.{i}.self_attn.{name}", model)
            if not isinstance(proj, nn.Linear):
                raise UnsupportedModelError(
                    f"cannot split `model.layers.{i}.self_attn.{name}`: {type(proj).__name__} is not nn.Linear"
                )
        for name in MLP_PROJECTIONS:
            proj = _child(mlp, name, f"model.layers.{i}.mlp.{name}", model)
            if not isinstance(proj, nn.Linear):
                raise UnsupportedModelError(
                    f"cannot split `model.layers.{i}.mlp.{name}`: {type(proj).__name__} is not nn.Linear"
                )
        for name in LAYER_NORMS:
            _child(layer, name, f"model.layers.{i}.{name}", model)
    config = getattr(model, "config", None)
    if config is None:
        raise UnsupportedModelError(f"cannot split {type(model).__name__}: it has no `config` (a transformers model)")
    return LlamaParts(model, embed, layers, norm, rotary, lm_head, config)


def prepare_attention(parts: LlamaParts) -> str | None:
    """The runtime runs the decoder layers without an attention mask, which is causal only for attention kernels
    that default to causal; eager attention is switched to SDPA (same math). Returns a note when it switched."""
    impl = getattr(parts.config, "_attn_implementation", None)
    if impl in CAUSAL_ATTENTION:
        return None
    parts.config._attn_implementation = "sdpa"
    return f"attention implementation {impl!r} switched to 'sdpa' (causal without a mask)"


def check_tensor_parallel(parts: LlamaParts, tp: int) -> None:
    """Every dimension tensor parallelism splits must divide by ``tp``; the error names the module."""
    if tp == 1:
        return
    cfg = parts.config
    heads = int(getattr(cfg, "num_attention_heads", 0))
    kv_heads = int(getattr(cfg, "num_key_value_heads", None) or heads)
    ffn = int(getattr(cfg, "intermediate_size", 0))
    vocab = parts.embed_tokens.num_embeddings
    checks = [
        ("model.layers.0.self_attn.q_proj", heads, "attention heads"),
        ("model.layers.0.self_attn.k_proj", kv_heads, "key/value heads"),
        ("model.layers.0.mlp.gate_proj", ffn, "intermediate (FFN) features"),
        ("model.embed_tokens", vocab, "vocabulary rows"),
    ]
    for module, count, what in checks:
        if count <= 0 or count % tp:
            raise PlanMismatchError(f"cannot split `{module}` over tp {tp}: its {count} {what} do not divide by {tp}")
    if parts.lm_head.weight is parts.embed_tokens.weight:
        raise UnsupportedModelError(
            "cannot split `lm_head`: its weight is tied to `model.embed_tokens` (tie_word_embeddings); "
            "tensor parallelism needs untied embeddings"
        )


def apply_tensor_parallel(stage: nn.Module, tp_mesh: DeviceMesh, sequence_parallel: bool) -> None:
    """DTensor tensor parallelism on one pipeline stage (the embedding and the head where the stage has them):
    q/k/v and gate/up column-wise, o and down row-wise, the embedding row-wise (vocabulary), the LM head
    column-wise; with sequence parallelism the norms and the residual stream are split over the sequence."""
    seq = Shard(1)
    top: dict[str, ParallelStyle] = {}
    if getattr(stage, "embed_tokens", None) is not None:
        top["embed_tokens"] = RowwiseParallel(
            input_layouts=Replicate(), output_layouts=seq if sequence_parallel else Replicate()
        )
    if getattr(stage, "lm_head", None) is not None:
        if sequence_parallel:
            top["norm"] = SequenceParallel()
        top["lm_head"] = ColwiseParallel(
            input_layouts=seq if sequence_parallel else Replicate(), output_layouts=Replicate()
        )
    if top:
        parallelize_module(stage, tp_mesh, top)
    layers = stage.layers
    assert isinstance(layers, nn.ModuleList)
    for layer in layers:
        plan: dict[str, ParallelStyle] = {
            "self_attn.q_proj": ColwiseParallel(),
            "self_attn.k_proj": ColwiseParallel(),
            "self_attn.v_proj": ColwiseParallel(),
            "self_attn.o_proj": RowwiseParallel(output_layouts=seq if sequence_parallel else Replicate()),
            "mlp.gate_proj": ColwiseParallel(),
            "mlp.up_proj": ColwiseParallel(),
            "mlp.down_proj": RowwiseParallel(output_layouts=seq if sequence_parallel else Replicate()),
        }
        if sequence_parallel:
            plan.update(
                {
                    "input_layernorm": SequenceParallel(),
                    "post_attention_layernorm": SequenceParallel(),
                    "self_attn": PrepareModuleInput(
                        input_kwarg_layouts={"hidden_states": seq},
                        desired_input_kwarg_layouts={"hidden_states": Replicate()},
                        use_local_output=True,
                    ),
                    "mlp": PrepareModuleInput(
                        input_layouts=(seq,), desired_input_layouts=(Replicate(),), use_local_output=True
                    ),
                }
            )
        parallelize_module(layer, tp_mesh, plan)


def split_layers(n_layers: int, pp: int, layers_per_stage: tuple[int, ...]) -> list[range]:
    """The decoder layers of each pipeline stage: the plan's ``layers_per_stage``, or an even split."""
    if layers_per_stage:
        if sum(layers_per_stage) != n_layers:
            raise PlanMismatchError(
                f"the plan's layers_per_stage {list(layers_per_stage)} add up to {sum(layers_per_stage)} layers, "
                f"but `model.layers` has {n_layers}"
            )
        counts = list(layers_per_stage)
    else:
        if n_layers % pp:
            raise PlanMismatchError(f"`model.layers` has {n_layers} layers, which do not split evenly over pp {pp}")
        counts = [n_layers // pp] * pp
    ranges, start = [], 0
    for count in counts:
        ranges.append(range(start, start + count))
        start += count
    return ranges


class LlamaStage(nn.Module):
    """One pipeline stage of a Llama-family model: the embedding on the first stage, a run of decoder layers,
    the final norm and LM head on the last. With one stage it is the whole model."""

    def __init__(self, parts: LlamaParts, layer_range: range, first: bool, last: bool) -> None:
        super().__init__()
        self.embed_tokens: nn.Module | None = parts.embed_tokens if first else None
        self.layers = nn.ModuleList([parts.layers[i] for i in layer_range])
        self.norm: nn.Module | None = parts.norm if last else None
        self.lm_head: nn.Module | None = parts.lm_head if last else None
        self.rotary_emb = parts.rotary_emb
        self.first_layer = layer_range.start

    def forward(self, inputs: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        """``inputs`` are token ids on the first stage and hidden states elsewhere; returns hidden states, or the
        logits on the last stage."""
        hidden = self.embed_tokens(inputs) if self.embed_tokens is not None else inputs
        position_embeddings = self.rotary_emb(hidden, position_ids)
        for layer in self.layers:
            out = layer(hidden, attention_mask=None, position_ids=position_ids, position_embeddings=position_embeddings)
            hidden = out[0] if isinstance(out, tuple) else out
        if self.norm is not None and self.lm_head is not None:
            hidden = self.lm_head(self.norm(hidden))
        return hidden
