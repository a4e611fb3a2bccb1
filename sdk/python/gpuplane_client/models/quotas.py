from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.pool_quota import PoolQuota


T = TypeVar("T", bound="Quotas")


@_attrs_define
class Quotas:
    """Limits on what a tenant may hold at once. Absent (null) means unlimited.

    Attributes:
        max_concurrent_leases (int | None | Unset):
        max_gpus_per_pool (int | None | Unset): Default GPU limit for every pool.
        pools (list[PoolQuota] | Unset): Per-pool limits overriding `max_gpus_per_pool`.
    """

    max_concurrent_leases: int | None | Unset = UNSET
    max_gpus_per_pool: int | None | Unset = UNSET
    pools: list[PoolQuota] | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        max_concurrent_leases: int | None | Unset
        if isinstance(self.max_concurrent_leases, Unset):
            max_concurrent_leases = UNSET
        else:
            max_concurrent_leases = self.max_concurrent_leases

        max_gpus_per_pool: int | None | Unset
        if isinstance(self.max_gpus_per_pool, Unset):
            max_gpus_per_pool = UNSET
        else:
            max_gpus_per_pool = self.max_gpus_per_pool

        pools: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.pools, Unset):
            pools = []
            for pools_item_data in self.pools:
                pools_item = pools_item_data.to_dict()
                pools.append(pools_item)

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if max_concurrent_leases is not UNSET:
            field_dict["max_concurrent_leases"] = max_concurrent_leases
        if max_gpus_per_pool is not UNSET:
            field_dict["max_gpus_per_pool"] = max_gpus_per_pool
        if pools is not UNSET:
            field_dict["pools"] = pools

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.pool_quota import PoolQuota

        d = dict(src_dict)

        def _parse_max_concurrent_leases(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_concurrent_leases = _parse_max_concurrent_leases(
            d.pop("max_concurrent_leases", UNSET)
        )

        def _parse_max_gpus_per_pool(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_gpus_per_pool = _parse_max_gpus_per_pool(d.pop("max_gpus_per_pool", UNSET))

        _pools = d.pop("pools", UNSET)
        pools: list[PoolQuota] | Unset = UNSET
        if _pools is not UNSET:
            pools = []
            for pools_item_data in _pools:
                pools_item = PoolQuota.from_dict(pools_item_data)

                pools.append(pools_item)

        quotas = cls(
            max_concurrent_leases=max_concurrent_leases,
            max_gpus_per_pool=max_gpus_per_pool,
            pools=pools,
        )

        return quotas
