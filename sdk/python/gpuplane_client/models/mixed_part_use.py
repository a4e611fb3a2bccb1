from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="MixedPartUse")


@_attrs_define
class MixedPartUse:
    """What a mixed plan does with one part of the request.

    Attributes:
        busy_fraction (float): The busiest of the part's stages, as a fraction of the slowest stage's time per
            micro-batch (1.0: this part sets the pipeline's pace; 0 when unused).
        gpu_key (str):
        gpu_name (str):
        gpus (int): GPUs of the part.
        gpus_used (int): GPUs of the part the plan runs on (over all replicas).
        idle_gpus (int): GPUs of the part the plan leaves idle (all of them when the part is not used).
        layers_per_replica (int): Layers the part holds in each replica.
        memory_per_gpu_bytes (int): Largest memory of any of the part's GPUs, bytes (0 when unused).
        part (int): Index of the part in the request.
        stages_per_replica (int): Pipeline stages the part holds in each replica.
        tp (int): TP degree of the part's stages (0 when the part is not used).
        usable_bytes (int): Usable memory per GPU of the part, bytes.
    """

    busy_fraction: float
    gpu_key: str
    gpu_name: str
    gpus: int
    gpus_used: int
    idle_gpus: int
    layers_per_replica: int
    memory_per_gpu_bytes: int
    part: int
    stages_per_replica: int
    tp: int
    usable_bytes: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        busy_fraction = self.busy_fraction

        gpu_key = self.gpu_key

        gpu_name = self.gpu_name

        gpus = self.gpus

        gpus_used = self.gpus_used

        idle_gpus = self.idle_gpus

        layers_per_replica = self.layers_per_replica

        memory_per_gpu_bytes = self.memory_per_gpu_bytes

        part = self.part

        stages_per_replica = self.stages_per_replica

        tp = self.tp

        usable_bytes = self.usable_bytes

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "busy_fraction": busy_fraction,
                "gpu_key": gpu_key,
                "gpu_name": gpu_name,
                "gpus": gpus,
                "gpus_used": gpus_used,
                "idle_gpus": idle_gpus,
                "layers_per_replica": layers_per_replica,
                "memory_per_gpu_bytes": memory_per_gpu_bytes,
                "part": part,
                "stages_per_replica": stages_per_replica,
                "tp": tp,
                "usable_bytes": usable_bytes,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        busy_fraction = d.pop("busy_fraction")

        gpu_key = d.pop("gpu_key")

        gpu_name = d.pop("gpu_name")

        gpus = d.pop("gpus")

        gpus_used = d.pop("gpus_used")

        idle_gpus = d.pop("idle_gpus")

        layers_per_replica = d.pop("layers_per_replica")

        memory_per_gpu_bytes = d.pop("memory_per_gpu_bytes")

        part = d.pop("part")

        stages_per_replica = d.pop("stages_per_replica")

        tp = d.pop("tp")

        usable_bytes = d.pop("usable_bytes")

        mixed_part_use = cls(
            busy_fraction=busy_fraction,
            gpu_key=gpu_key,
            gpu_name=gpu_name,
            gpus=gpus,
            gpus_used=gpus_used,
            idle_gpus=idle_gpus,
            layers_per_replica=layers_per_replica,
            memory_per_gpu_bytes=memory_per_gpu_bytes,
            part=part,
            stages_per_replica=stages_per_replica,
            tp=tp,
            usable_bytes=usable_bytes,
        )

        mixed_part_use.additional_properties = d
        return mixed_part_use

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
