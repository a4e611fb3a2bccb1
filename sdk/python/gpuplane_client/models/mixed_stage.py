from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.memory_breakdown import MemoryBreakdown


T = TypeVar("T", bound="MixedStage")


@_attrs_define
class MixedStage:
    """One pipeline stage of a mixed plan (every replica has the same stages).

    Attributes:
        gpu_key (str): Catalog key of the part's GPU.
        layers (int): Transformer layers the stage holds.
        memory (MemoryBreakdown): Per-GPU memory, bytes, for the most loaded GPU of a plan.
        part (int): Index of the part in the request.
        time_per_micro_batch_s (float): Forward and backward of one micro-batch on this stage, seconds (with the LM head
            on the
            last stage).
        tp (int): TP degree of the stage (inside one node of the part).
    """

    gpu_key: str
    layers: int
    memory: MemoryBreakdown
    part: int
    time_per_micro_batch_s: float
    tp: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        gpu_key = self.gpu_key

        layers = self.layers

        memory = self.memory.to_dict()

        part = self.part

        time_per_micro_batch_s = self.time_per_micro_batch_s

        tp = self.tp

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "gpu_key": gpu_key,
                "layers": layers,
                "memory": memory,
                "part": part,
                "time_per_micro_batch_s": time_per_micro_batch_s,
                "tp": tp,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.memory_breakdown import MemoryBreakdown

        d = dict(src_dict)
        gpu_key = d.pop("gpu_key")

        layers = d.pop("layers")

        memory = MemoryBreakdown.from_dict(d.pop("memory"))

        part = d.pop("part")

        time_per_micro_batch_s = d.pop("time_per_micro_batch_s")

        tp = d.pop("tp")

        mixed_stage = cls(
            gpu_key=gpu_key,
            layers=layers,
            memory=memory,
            part=part,
            time_per_micro_batch_s=time_per_micro_batch_s,
            tp=tp,
        )

        mixed_stage.additional_properties = d
        return mixed_stage

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
