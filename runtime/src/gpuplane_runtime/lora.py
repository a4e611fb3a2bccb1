"""LoRA fine-tuning with PEFT: adapters on the plan's target modules (``q_proj`` and ``v_proj`` unless the plan
file says otherwise), the base model frozen. The adapters are PEFT's own modules, so what is exported loads with
``PeftModel.from_pretrained``; tensor parallelism splits them with their base (see :mod:`.parallel.tensor`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from torch import nn

from .errors import UnsupportedModelError

DEFAULT_TARGETS = ("q_proj", "v_proj")


@dataclass(frozen=True)
class LoraSpec:
    rank: int
    alpha: float
    dropout: float
    target_modules: tuple[str, ...]

    def peft_config(self) -> Any:
        from peft import LoraConfig

        return LoraConfig(
            r=self.rank,
            lora_alpha=self.alpha,  # type: ignore[arg-type]  # PEFT annotates int; any number works
            lora_dropout=self.dropout,
            target_modules=list(self.target_modules),
            bias="none",
            task_type="CAUSAL_LM",
        )


def inject(model: nn.Module, spec: LoraSpec) -> int:
    """Wrap the target ``nn.Linear`` modules of ``model`` with PEFT LoRA layers in place and freeze every other
    parameter. Returns the number of layers wrapped."""
    try:
        from peft import inject_adapter_in_model
    except ImportError:
        raise UnsupportedModelError(
            "the plan is a LoRA fine-tune but PEFT is not installed (pip install 'gpuplane-runtime[lora]')"
        ) from None
    wrapped_before = sum(1 for m in model.modules() if hasattr(m, "lora_A"))
    try:
        inject_adapter_in_model(spec.peft_config(), model, low_cpu_mem_usage=True)
    except ValueError as err:
        raise UnsupportedModelError(f"LoRA target modules {list(spec.target_modules)}: {err}") from None
    wrapped = sum(1 for m in model.modules() if hasattr(m, "lora_A")) - wrapped_before
    for name, param in model.named_parameters():
        param.requires_grad_(".lora_A." in name or ".lora_B." in name)
    return wrapped
