"""A pipeline stage of a decoder family: the embedding on the first stage, a run of decoder layers, the final norm
and LM head on the last; with one stage, the whole model. Its ``forward`` is the family's own forward (see
:mod:`.families`), split where the pipeline cuts it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..errors import UnsupportedModelError
from .families import Family

ATTENTION = "self_attn"
MLP = "mlp"


@dataclass
class DecoderParts:
    """The modules of a Hugging Face causal LM the runtime composes (``model.model.*`` and ``model.lm_head``)."""

    model: nn.Module
    family: Family
    config: Any
    embed_tokens: nn.Embedding
    layers: nn.ModuleList
    norm: nn.Module
    rotary_emb: nn.Module
    rotary_emb_local: nn.Module | None
    lm_head: nn.Linear

    @property
    def tied(self) -> bool:
        return bool(getattr(self.config, "tie_word_embeddings", False))


class FusedParts(nn.Module):
    """A fused projection (Phi-3's ``qkv_proj``, ``gate_up_proj``) as one ``nn.Linear`` per part, concatenated:
    the same output, and each part shards over tensor parallelism on its own, so every rank's slice holds its own
    share of each part."""

    def __init__(self, parts: dict[str, nn.Linear]) -> None:
        super().__init__()
        self.names = tuple(parts)
        for name, linear in parts.items():
            self.add_module(name, linear)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([getattr(self, name)(x) for name in self.names], dim=-1)


def unfuse(model: nn.Module, family: Family) -> None:
    """Replace the family's fused projections by :class:`FusedParts` (on the meta device nothing is copied; on
    real weights each part takes its rows)."""
    if not family.fused:
        return
    config: Any = model.config
    layers = model.get_submodule("model.layers")
    assert isinstance(layers, nn.ModuleList)
    for layer in layers:
        for fused in family.fused:
            owner_name, _, name = fused.module.rpartition(".")
            owner = layer.get_submodule(owner_name)
            linear = getattr(owner, name)
            if not isinstance(linear, nn.Linear):
                raise UnsupportedModelError(f"`{fused.module}` of {type(layer).__name__} is not nn.Linear")
            sizes = fused.sizes(config)
            if sum(sizes) != linear.out_features:
                raise UnsupportedModelError(
                    f"`{fused.module}` has {linear.out_features} outputs; its parts {fused.parts} need {sum(sizes)}"
                )
            parts: dict[str, nn.Linear] = {}
            start = 0
            for part, size in zip(fused.parts, sizes, strict=True):
                piece = nn.Linear(
                    linear.in_features,
                    size,
                    bias=linear.bias is not None,
                    device=linear.weight.device,
                    dtype=linear.weight.dtype,
                )
                if linear.weight.device.type != "meta":
                    with torch.no_grad():
                        piece.weight.copy_(linear.weight[start : start + size])
                        if linear.bias is not None:
                            piece.bias.copy_(linear.bias[start : start + size])
                piece.weight.requires_grad_(linear.weight.requires_grad)
                parts[part] = piece
                start += size
            setattr(owner, name, FusedParts(parts))


def _child(parent: nn.Module, name: str, path: str, model: nn.Module) -> nn.Module:
    child = getattr(parent, name, None)
    if not isinstance(child, nn.Module):
        raise UnsupportedModelError(f"cannot split {type(model).__name__}: it has no module `{path}`")
    return child


def _projections(family: Family) -> tuple[tuple[str, ...], tuple[str, ...]]:
    attention = ["q_proj", "k_proj", "v_proj", "o_proj"]
    mlp = ["gate_proj", "up_proj", "down_proj"]
    for fused in family.fused:
        owner, _, name = fused.module.rpartition(".")
        target = attention if owner == ATTENTION else mlp
        for part in fused.parts:
            target.remove(part)
            target.append(f"{name}.{part}")
    return tuple(attention), tuple(mlp)


def find_parts(model: nn.Module, family: Family) -> DecoderParts:
    """The model's decoder structure, or :class:`UnsupportedModelError` naming the first missing module."""
    inner = _child(model, "model", "model", model)
    lm_head = _child(model, "lm_head", "lm_head", model)
    embed = _child(inner, "embed_tokens", "model.embed_tokens", model)
    layers = _child(inner, "layers", "model.layers", model)
    norm = _child(inner, "norm", "model.norm", model)
    rotary = _child(inner, "rotary_emb", "model.rotary_emb", model)
    local = _child(inner, "rotary_emb_local", "model.rotary_emb_local", model) if family.local_rotary else None
    if not isinstance(embed, nn.Embedding):
        raise UnsupportedModelError(f"cannot split `model.embed_tokens`: {type(embed).__name__} is not nn.Embedding")
    if not isinstance(lm_head, nn.Linear):
        raise UnsupportedModelError(f"cannot split `lm_head`: {type(lm_head).__name__} is not nn.Linear")
    if not isinstance(layers, nn.ModuleList) or len(layers) == 0:
        raise UnsupportedModelError("cannot split `model.layers`: not a non-empty nn.ModuleList of decoder layers")
    attention, mlp = _projections(family)
    for i, layer in enumerate(layers):
        for owner, names in ((ATTENTION, attention), (MLP, mlp)):
            block = _child(layer, owner, f"model.layers.{i}.{owner}", model)
            for name in names:
                proj = (
                    block.get_submodule(name)
                    if "." in name
                    else _child(block, name, f"model.layers.{i}.{owner}.{name}", model)
                )
                if not isinstance(proj, nn.Linear) and not hasattr(proj, "base_layer"):
                    raise UnsupportedModelError(
                        f"cannot split `model.layers.{i}.{owner}.{name}`: {type(proj).__name__} is not nn.Linear"
                    )
    return DecoderParts(model, family, model.config, embed, layers, norm, rotary, local, lm_head)


def split_layers(n_layers: int, stages: int, layers_per_stage: tuple[int, ...]) -> list[range]:
    """The decoder layers of each stage: the plan's ``layers_per_stage``, or an even split."""
    from ..errors import PlanMismatchError

    if layers_per_stage:
        if sum(layers_per_stage) != n_layers:
            raise PlanMismatchError(
                f"the plan's layers_per_stage {list(layers_per_stage)} add up to {sum(layers_per_stage)} layers, "
                f"but `model.layers` has {n_layers}"
            )
        counts = list(layers_per_stage)
    else:
        if n_layers % stages:
            raise PlanMismatchError(
                f"`model.layers` has {n_layers} layers, which do not split evenly over {stages} pipeline stages"
            )
        counts = [n_layers // stages] * stages
    ranges, start = [], 0
    for count in counts:
        ranges.append(range(start, start + count))
        start += count
    return ranges


class DecoderStage(nn.Module):
    """One pipeline stage (or the whole model) of a decoder family: ``forward(inputs, position_ids)`` takes token
    ids on the first stage and hidden states elsewhere, and returns hidden states, or the logits on the last."""

    def __init__(self, parts: DecoderParts, layer_range: range, first: bool, last: bool) -> None:
        super().__init__()
        self.family = parts.family
        self.config = parts.config
        self.embed_tokens: nn.Module | None = parts.embed_tokens if first else None
        self.layers = nn.ModuleList([parts.layers[i] for i in layer_range])
        self.norm: nn.Module | None = parts.norm if last else None
        self.lm_head: nn.Module | None = parts.lm_head if last else None
        self.rotary_emb = parts.rotary_emb
        self.rotary_emb_local = parts.rotary_emb_local
        self.first_layer = layer_range.start
        self.attention_types = [str(getattr(layer, "attention_type", "full_attention")) for layer in self.layers]

    # --- the family's extras --------------------------------------------------------------------------------------
    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        assert self.embed_tokens is not None
        hidden: torch.Tensor = self.embed_tokens(ids)
        if self.family.embed_normalizer:
            hidden = hidden * torch.tensor(self.config.hidden_size**0.5, dtype=hidden.dtype)
        if self.family.embedding_multiplier:
            hidden = hidden * self.config.embedding_multiplier
        return hidden

    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        assert self.norm is not None and self.lm_head is not None
        logits: torch.Tensor = self.lm_head(self.norm(hidden))
        if self.family.logits_scaling:
            logits = logits / self.config.logits_scaling
        cap = getattr(self.config, "final_logit_softcapping", None) if self.family.logit_softcap else None
        if cap is not None:
            logits = torch.tanh(logits / cap) * cap
        return logits

    def _masks(self, like: torch.Tensor, position_ids: torch.Tensor) -> dict[str, Any]:
        """The attention masks the family's forward builds for an unpadded batch (None where the kernel's own
        causal path is exact), from the full sequence even when the hidden states are split over it."""
        from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask

        batch, seq = position_ids.shape
        cache_position = torch.arange(seq, device=position_ids.device)
        shape_of = like.new_empty((batch, seq, 1))
        kwargs = {
            "config": self.config,
            "input_embeds": shape_of,
            "attention_mask": None,
            "cache_position": cache_position,
            "past_key_values": None,
            "position_ids": position_ids,
        }
        masks: dict[str, Any] = {}
        if self.family.masks == "causal_or_sliding":
            sliding = getattr(self.config, "sliding_window", None) is not None
            mask = (create_sliding_window_causal_mask if sliding else create_causal_mask)(**kwargs)
            masks = {t: mask for t in set(self.attention_types)}
        else:
            if "full_attention" in self.attention_types or self.family.masks == "causal":
                masks["full_attention"] = create_causal_mask(**kwargs)
            if "sliding_attention" in self.attention_types:
                masks["sliding_attention"] = create_sliding_window_causal_mask(**kwargs)
            if self.family.masks == "causal":
                masks = {t: masks["full_attention"] for t in set(self.attention_types)}
        return masks

    def forward(self, inputs: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        hidden = self._embed(inputs) if self.embed_tokens is not None else inputs
        masks = self._masks(hidden, position_ids)
        cache_position = position_ids[0]
        rotary: dict[str, Any]
        if self.rotary_emb_local is not None:
            rotary = {
                "position_embeddings_global": self.rotary_emb(hidden, position_ids),
                "position_embeddings_local": self.rotary_emb_local(hidden, position_ids),
            }
        else:
            rotary = {"position_embeddings": self.rotary_emb(hidden, position_ids)}
        for layer, kind in zip(self.layers, self.attention_types, strict=True):
            out = layer(
                hidden,
                attention_mask=masks[kind],
                position_ids=position_ids,
                cache_position=cache_position,
                **rotary,
            )
            hidden = out[0] if isinstance(out, tuple) else out
        if self.lm_head is not None:
            return self._head(hidden)
        return hidden
