from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.placement import Placement

T = TypeVar("T", bound="LeasePart")


@_attrs_define
class LeasePart:
    """One part of a lease across pools (`parts`).

    Attributes:
        gpu_count (int): GPUs it asked for.
        gpu_ids (list[UUID]): Its GPUs (ids of `Lease.gpus`); empty while the lease is queued.
        gpu_model (str): The pool's GPU model.
        placement (Placement): How a lease's GPUs are laid over nodes.
        pool_id (UUID): The pool its GPUs come from.
    """

    gpu_count: int
    gpu_ids: list[UUID]
    gpu_model: str
    placement: Placement
    pool_id: UUID
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        gpu_count = self.gpu_count

        gpu_ids = []
        for gpu_ids_item_data in self.gpu_ids:
            gpu_ids_item = str(gpu_ids_item_data)
            gpu_ids.append(gpu_ids_item)

        gpu_model = self.gpu_model

        placement = self.placement.value

        pool_id = str(self.pool_id)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "gpu_count": gpu_count,
                "gpu_ids": gpu_ids,
                "gpu_model": gpu_model,
                "placement": placement,
                "pool_id": pool_id,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        gpu_count = d.pop("gpu_count")

        gpu_ids = []
        _gpu_ids = d.pop("gpu_ids")
        for gpu_ids_item_data in _gpu_ids:
            gpu_ids_item = UUID(gpu_ids_item_data)

            gpu_ids.append(gpu_ids_item)

        gpu_model = d.pop("gpu_model")

        placement = Placement(d.pop("placement"))

        pool_id = UUID(d.pop("pool_id"))

        lease_part = cls(
            gpu_count=gpu_count,
            gpu_ids=gpu_ids,
            gpu_model=gpu_model,
            placement=placement,
            pool_id=pool_id,
        )

        lease_part.additional_properties = d
        return lease_part

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
