"""The decoder families the runtime splits, and what each adds to the Llama forward.

A model the runtime splits (tensor or pipeline parallelism) runs as :class:`~.stage.DecoderStage`: the family's own
modules (embedding, decoder layers, norms, head), composed in the order and with the extras of the family's own
``forward``. Each extra is named here, once, and the stage applies it:

- the embedding normalizer (Gemma 1 and 2: ``hidden * sqrt(hidden_size)`` in the hidden dtype; Gemma 3 keeps the
  scale inside its embedding module) and Granite's ``embedding_multiplier``;
- the attention masks: one causal mask, one that is sliding when the config has a window (Mistral, Phi-3), or a
  mask per layer type (Qwen2/3, Gemma 2/3: full and sliding layers);
- Gemma 3's second rotary embedding for its local layers;
- the head's logit soft-cap (Gemma 2/3) and Granite's ``logits_scaling``;
- per-head q/k norms (Qwen3, Gemma 3), whose gradients are partial sums over tensor-parallel ranks;
- Phi-3's fused ``qkv_proj`` and ``gate_up_proj``, split into one projection per part so that tensor parallelism
  shards each part, and fused again on export.

A family not listed is refused when the plan splits it; with data parallelism alone the model's own ``forward``
runs, so it computes exactly what it computes on one process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import PlanMismatchError, UnsupportedModelError


@dataclass(frozen=True)
class Fused:
    """A fused projection: the module name inside a decoder layer, and its parts with their output sizes as a
    function of the config (rows of the fused weight, in order)."""

    module: str
    parts: tuple[str, ...]

    def sizes(self, config: Any) -> tuple[int, ...]:
        if self.module.endswith("qkv_proj"):
            head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)
            q = int(config.num_attention_heads) * head_dim
            kv = int(config.num_key_value_heads or config.num_attention_heads) * head_dim
            return (q, kv, kv)
        ffn = int(config.intermediate_size)
        return (ffn, ffn)


@dataclass(frozen=True)
class Family:
    name: str
    model_types: tuple[str, ...]
    #: "causal": one causal mask; "causal_or_sliding": a sliding-window mask when ``config.sliding_window`` is
    #: set; "per_layer": full and sliding masks, each layer takes the one of its ``attention_type``.
    masks: str = "causal"
    embed_normalizer: bool = False
    embedding_multiplier: bool = False
    logit_softcap: bool = False
    logits_scaling: bool = False
    local_rotary: bool = False
    head_norms: tuple[str, ...] = ()
    fused: tuple[Fused, ...] = ()
    lora: bool = True


FAMILIES: tuple[Family, ...] = (
    Family("llama", ("llama",)),
    Family("mistral", ("mistral",), masks="causal_or_sliding"),
    Family("qwen2", ("qwen2",), masks="per_layer"),
    Family("qwen3", ("qwen3",), masks="per_layer", head_norms=("self_attn.q_norm", "self_attn.k_norm")),
    Family("gemma", ("gemma",), embed_normalizer=True),
    Family("gemma2", ("gemma2",), masks="per_layer", embed_normalizer=True, logit_softcap=True),
    Family(
        "gemma3",
        ("gemma3_text",),
        masks="per_layer",
        logit_softcap=True,
        local_rotary=True,
        head_norms=("self_attn.q_norm", "self_attn.k_norm"),
    ),
    Family("granite", ("granite",), embedding_multiplier=True, logits_scaling=True),
    Family(
        "phi3",
        ("phi3",),
        masks="causal_or_sliding",
        fused=(
            Fused("self_attn.qkv_proj", ("q_proj", "k_proj", "v_proj")),
            Fused("mlp.gate_up_proj", ("gate_proj", "up_proj")),
        ),
        lora=False,
    ),
)
_BY_TYPE = {t: f for f in FAMILIES for t in f.model_types}
SUPPORTED = ", ".join(sorted(_BY_TYPE))
#: Config fields that make a model a mixture of experts (Mixtral, Qwen-MoE, DeepSeek, Phi-MoE, ...).
_MOE_FIELDS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")


def family_of(config: Any) -> Family | None:
    return _BY_TYPE.get(str(getattr(config, "model_type", "")))


def is_moe(config: Any) -> bool:
    return any(int(getattr(config, field, 0) or 0) > 1 for field in _MOE_FIELDS)


def check_supported(config: Any, *, tp: int, pp: int, lora: bool) -> Family | None:
    """The family the plan needs, or None when the model's own forward runs (data parallelism alone, a family
    not listed). Refuses, naming the reason, what the runtime cannot apply exactly: mixtures of experts, a split
    of a family it does not know, Gemma 3's bidirectional attention, LoRA on fused projections."""
    model_type = str(getattr(config, "model_type", "") or "unknown")
    if is_moe(config):
        raise UnsupportedModelError(
            f"{model_type} is a mixture-of-experts model; the runtime applies data, tensor and pipeline parallelism "
            "to dense decoders only (run MoE models with the megatron template)"
        )
    family = family_of(config)
    if family is None:
        if tp > 1 or pp > 1:
            raise UnsupportedModelError(
                f"cannot split a {model_type!r} model (tp {tp}, pp {pp}): the runtime splits {SUPPORTED}; other "
                "models run with data parallelism alone (tp 1, pp 1), with their own forward"
            )
        return None
    if getattr(config, "use_bidirectional_attention", False):
        raise UnsupportedModelError(f"{model_type}: bidirectional attention is not a causal LM the runtime trains")
    if lora and not family.lora:
        fused = ", ".join(f.module for f in family.fused)
        raise UnsupportedModelError(
            f"LoRA on {model_type}: its attention and MLP projections are fused ({fused}); the runtime does not "
            "place adapters on fused projections"
        )
    return family


def check_tensor_parallel(config: Any, vocab: int, tp: int) -> None:
    """Every dimension tensor parallelism splits must divide by ``tp``; the error names the module."""
    if tp == 1:
        return
    heads = int(getattr(config, "num_attention_heads", 0))
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    ffn = int(getattr(config, "intermediate_size", 0))
    checks = [
        ("model.layers.0.self_attn.q_proj", heads, "attention heads"),
        ("model.layers.0.self_attn.k_proj", kv_heads, "key/value heads"),
        ("model.layers.0.mlp.gate_proj", ffn, "intermediate (FFN) features"),
        ("model.embed_tokens", vocab, "vocabulary rows"),
    ]
    for module, count, what in checks:
        if count <= 0 or count % tp:
            raise PlanMismatchError(f"cannot split `{module}` over tp {tp}: its {count} {what} do not divide by {tp}")


#: The plan file's ``arch`` fields and the config fields that must agree with them.
ARCH_FIELDS = {
    "layers": "num_hidden_layers",
    "hidden": "hidden_size",
    "heads": "num_attention_heads",
    "kv_heads": "num_key_value_heads",
    "ffn": "intermediate_size",
    "vocab": "vocab_size",
}


def check_arch(config: Any, arch: dict[str, int] | None, model_name: str | None) -> None:
    """The plan was made for the model being loaded: each architecture field the plan file states must equal the
    config's (the planner sized memory and time for it)."""
    if not arch:
        return
    for field, attr in ARCH_FIELDS.items():
        planned = arch.get(field)
        if planned is None:
            continue
        actual = getattr(config, attr, None)
        if attr == "num_key_value_heads" and actual is None:
            actual = getattr(config, "num_attention_heads", None)
        if actual is not None and int(actual) != int(planned):
            what = f" ({model_name})" if model_name else ""
            raise PlanMismatchError(
                f"the plan was made for another model{what}: its `{field}` is {planned}, but the model loaded has "
                f"{attr} = {actual}; plan for this model (POST /v1/plans with its config.json as the model)"
            )
