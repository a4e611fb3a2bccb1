from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="PoolQuota")


@_attrs_define
class PoolQuota:
    """
    Attributes:
        max_gpus (int): GPUs the tenant may hold at once in this pool.
        pool_id (UUID):
    """

    max_gpus: int
    pool_id: UUID
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        max_gpus = self.max_gpus

        pool_id = str(self.pool_id)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "max_gpus": max_gpus,
                "pool_id": pool_id,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        max_gpus = d.pop("max_gpus")

        pool_id = UUID(d.pop("pool_id"))

        pool_quota = cls(
            max_gpus=max_gpus,
            pool_id=pool_id,
        )

        pool_quota.additional_properties = d
        return pool_quota

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
