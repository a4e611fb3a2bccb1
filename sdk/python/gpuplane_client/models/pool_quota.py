from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define

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

    def to_dict(self) -> dict[str, Any]:
        max_gpus = self.max_gpus

        pool_id = str(self.pool_id)

        field_dict: dict[str, Any] = {}

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

        return pool_quota
