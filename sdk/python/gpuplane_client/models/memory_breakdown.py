from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="MemoryBreakdown")


@_attrs_define
class MemoryBreakdown:
    """Per-GPU memory, bytes, for the most loaded GPU of a plan.

    Attributes:
        activations (int):
        comm_buffers (int):
        fragmentation (int):
        gradients (int):
        kv_cache (int): Inference only.
        optimizer (int):
        total (int):
        usable (int): Usable memory per GPU (label minus CUDA context).
        weights (int):
    """

    activations: int
    comm_buffers: int
    fragmentation: int
    gradients: int
    kv_cache: int
    optimizer: int
    total: int
    usable: int
    weights: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        activations = self.activations

        comm_buffers = self.comm_buffers

        fragmentation = self.fragmentation

        gradients = self.gradients

        kv_cache = self.kv_cache

        optimizer = self.optimizer

        total = self.total

        usable = self.usable

        weights = self.weights

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "activations": activations,
                "comm_buffers": comm_buffers,
                "fragmentation": fragmentation,
                "gradients": gradients,
                "kv_cache": kv_cache,
                "optimizer": optimizer,
                "total": total,
                "usable": usable,
                "weights": weights,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        activations = d.pop("activations")

        comm_buffers = d.pop("comm_buffers")

        fragmentation = d.pop("fragmentation")

        gradients = d.pop("gradients")

        kv_cache = d.pop("kv_cache")

        optimizer = d.pop("optimizer")

        total = d.pop("total")

        usable = d.pop("usable")

        weights = d.pop("weights")

        memory_breakdown = cls(
            activations=activations,
            comm_buffers=comm_buffers,
            fragmentation=fragmentation,
            gradients=gradients,
            kv_cache=kv_cache,
            optimizer=optimizer,
            total=total,
            usable=usable,
            weights=weights,
        )

        memory_breakdown.additional_properties = d
        return memory_breakdown

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
