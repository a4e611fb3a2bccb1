"""Names: a parameter of this rank's stage, its name in the original model, and the tensor of a Hugging Face
checkpoint it is read from.

- The *original* name is the parameter's name in the unsplit model, whatever the plan: a stage's ``layers.0`` is
  ``model.layers.<first layer of the stage>``, and wrappers' prefixes (activation checkpointing, DDP) are dropped.
  Resumable checkpoints (DCP) are keyed by it, so they load under any plan.
- The *checkpoint* name is the tensor of a Hugging Face checkpoint that holds it: PEFT's ``base_layer`` is the
  base model's module, a part of a fused projection (Phi-3) is rows of the fused tensor, and a head tied to the
  embedding reads the embedding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_WRAPPERS = ("_checkpoint_wrapped_module.", "_fsdp_wrapped_module.", "_orig_mod.")
_INNER = ("embed_tokens.", "norm.", "rotary_emb.", "rotary_emb_local.")


def original_name(fqn: str, first_layer: int | None, *, ddp: bool = False) -> str:
    """A stage's parameter name as the full model names it (``first_layer`` None: the model is not split)."""
    for wrapper in _WRAPPERS:
        fqn = fqn.replace(wrapper, "")
    if ddp and fqn.startswith("module."):
        fqn = fqn[len("module.") :]
    if first_layer is None:
        return fqn
    if fqn.startswith("layers."):
        index, rest = fqn[len("layers.") :].split(".", 1)
        return f"model.layers.{int(index) + first_layer}.{rest}"
    if fqn.startswith(_INNER):
        return "model." + fqn
    return fqn


def is_adapter(name: str) -> bool:
    """A LoRA adapter weight (PEFT's ``lora_A``/``lora_B``), not part of the base model."""
    return ".lora_A." in name or ".lora_B." in name


@dataclass(frozen=True)
class Source:
    """Where a parameter's values live in a checkpoint: a tensor, from row ``row_offset`` on."""

    name: str
    row_offset: int = 0


def checkpoint_source(original: str, config: Any, fused: dict[str, tuple[tuple[str, int], ...]]) -> Source:
    """The Hugging Face tensor an original parameter name reads. ``fused`` maps a fused module's name (e.g.
    ``self_attn.qkv_proj``) to its parts and their row counts."""
    name = original.replace(".base_layer.", ".")
    if name == "lm_head.weight" and getattr(config, "tie_word_embeddings", False):
        return Source("model.embed_tokens.weight")
    for module, parts in fused.items():
        marker = f".{module}."
        if marker not in name:
            continue
        head, _, tail = name.partition(marker)
        part, _, leaf = tail.partition(".")
        offset = 0
        for part_name, rows in parts:
            if part_name == part:
                return Source(f"{head}.{module}.{leaf}", offset)
            offset += rows
    return Source(name)


def adapter_name(original: str) -> str:
    """The name PEFT's ``save_pretrained`` gives an adapter weight (``base_model.model.`` prefix, the adapter's
    own name dropped): ``base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight``."""
    return "base_model.model." + original.replace(".default.", ".")
