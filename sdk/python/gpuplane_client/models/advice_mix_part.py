from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="AdviceMixPart")


@_attrs_define
class AdviceMixPart:
    """One pool's share of an [`AdviceMix`]: the whole nodes rented there and what they cost.

    Attributes:
        cost_minor (int): `ceil(gpu_count * hours * price_per_gpu_hour_minor)`, the single-pool options' rule, per
            part: each pool bills its own GPUs.
        gpu_count (int): GPUs rented in this pool: the plan's `gpus_used` of this part (a part's idle GPUs are not
            rented, nor priced).
        gpu_key (str):
        gpus_per_node (int):
        nodes (int): Whole nodes of `gpus_per_node` offered to the plan (the pool's free GPUs, rounded down).
        pool_id (str):
        price_per_gpu_hour_minor (int):
    """

    cost_minor: int
    gpu_count: int
    gpu_key: str
    gpus_per_node: int
    nodes: int
    pool_id: str
    price_per_gpu_hour_minor: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        cost_minor = self.cost_minor

        gpu_count = self.gpu_count

        gpu_key = self.gpu_key

        gpus_per_node = self.gpus_per_node

        nodes = self.nodes

        pool_id = self.pool_id

        price_per_gpu_hour_minor = self.price_per_gpu_hour_minor

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "cost_minor": cost_minor,
                "gpu_count": gpu_count,
                "gpu_key": gpu_key,
                "gpus_per_node": gpus_per_node,
                "nodes": nodes,
                "pool_id": pool_id,
                "price_per_gpu_hour_minor": price_per_gpu_hour_minor,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        cost_minor = d.pop("cost_minor")

        gpu_count = d.pop("gpu_count")

        gpu_key = d.pop("gpu_key")

        gpus_per_node = d.pop("gpus_per_node")

        nodes = d.pop("nodes")

        pool_id = d.pop("pool_id")

        price_per_gpu_hour_minor = d.pop("price_per_gpu_hour_minor")

        advice_mix_part = cls(
            cost_minor=cost_minor,
            gpu_count=gpu_count,
            gpu_key=gpu_key,
            gpus_per_node=gpus_per_node,
            nodes=nodes,
            pool_id=pool_id,
            price_per_gpu_hour_minor=price_per_gpu_hour_minor,
        )

        advice_mix_part.additional_properties = d
        return advice_mix_part

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
