"""Tiny configs of every decoder family the runtime splits (and a few it refuses), each with the family's
extras switched on where a small model would otherwise hide them: sliding windows shorter than the test
sequences, soft-caps that bite, multipliers other than 1, q/k norms, fused projections."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

VOCAB = 96
HIDDEN = 64
HEADS = 4
KV_HEADS = 2
FFN = 128
LAYERS = 4
SLIDING = 6

COMMON: dict[str, Any] = {
    "vocab_size": VOCAB,
    "hidden_size": HIDDEN,
    "intermediate_size": FFN,
    "num_hidden_layers": LAYERS,
    "num_attention_heads": HEADS,
    "num_key_value_heads": KV_HEADS,
    "max_position_embeddings": 256,
}

#: Families the runtime splits, with the attention implementation their reference runs with.
FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "granite", "phi3")


def config(family: str, *, tied: bool = False, attn: str | None = None) -> Any:
    import transformers as tf

    kw = dict(COMMON, tie_word_embeddings=tied)
    if family == "llama":
        cfg = tf.LlamaConfig(**kw)
    elif family == "mistral":
        cfg = tf.MistralConfig(**kw, sliding_window=SLIDING)
    elif family == "qwen2":
        cfg = tf.Qwen2Config(**kw, use_sliding_window=True, sliding_window=SLIDING, max_window_layers=2)
    elif family == "qwen3":
        cfg = tf.Qwen3Config(**kw, head_dim=HIDDEN // HEADS)
    elif family == "gemma":
        cfg = tf.GemmaConfig(**kw, head_dim=HIDDEN // HEADS, hidden_activation="gelu_pytorch_tanh")
    elif family == "gemma2":
        cfg = tf.Gemma2Config(
            **kw,
            head_dim=HIDDEN // HEADS,
            sliding_window=SLIDING,
            final_logit_softcapping=2.0,
            attn_logit_softcapping=3.0,
            query_pre_attn_scalar=HIDDEN // HEADS,
        )
    elif family == "gemma3":
        cfg = tf.Gemma3TextConfig(
            **kw,
            head_dim=HIDDEN // HEADS,
            sliding_window=SLIDING,
            sliding_window_pattern=2,
            final_logit_softcapping=2.0,
            query_pre_attn_scalar=HIDDEN // HEADS,
            rope_local_base_freq=100.0,
        )
    elif family == "granite":
        cfg = tf.GraniteConfig(
            **kw, embedding_multiplier=3.0, residual_multiplier=0.5, attention_multiplier=0.2, logits_scaling=4.0
        )
    elif family == "phi3":
        cfg = tf.Phi3Config(**kw, sliding_window=SLIDING, pad_token_id=0)
    else:
        raise ValueError(family)
    # Gemma 2/3 soft-cap attention only in the eager kernel; the others take SDPA as they load by default.
    cfg._attn_implementation = attn or ("eager" if family in ("gemma2", "gemma3") else "sdpa")
    return cfg


def build(cfg: Any, seed: int = 0) -> nn.Module:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation=cfg._attn_implementation)
    # Norm weights start at 1 (or 0 for Gemma's 1 + w): perturb them, so a norm applied twice or not at all shows.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.1)
    return model


def tokens(batch: int, seq: int, step: int = 0) -> torch.Tensor:
    """Token ids covering the whole vocabulary, padding id 0 included."""
    gen = torch.Generator().manual_seed(1000 + step)
    return torch.randint(0, VOCAB, (batch, seq), generator=gen)
