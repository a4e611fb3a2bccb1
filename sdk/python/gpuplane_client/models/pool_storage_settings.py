from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.volume_kind import VolumeKind
from ..types import UNSET, Unset

T = TypeVar("T", bound="PoolStorageSettings")


@_attrs_define
class PoolStorageSettings:
    """
    Example:
        {'capacity_gib': 10000, 'volume_kinds': ['pool']}

    Attributes:
        volume_kinds (list[VolumeKind]): The kinds of volume the pool sells: `host` (agents started with a host volume
            store) and/or `pool`
            (agents started with the pool's shared filesystem as their pool store). Empty: none.
        capacity_gib (int | None | Unset): GiB of volumes the pool sells in all, up to 10^12 (null: as much as its hosts
            report room for).
    """

    volume_kinds: list[VolumeKind]
    capacity_gib: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        volume_kinds = []
        for volume_kinds_item_data in self.volume_kinds:
            volume_kinds_item = volume_kinds_item_data.value
            volume_kinds.append(volume_kinds_item)

        capacity_gib: int | None | Unset
        if isinstance(self.capacity_gib, Unset):
            capacity_gib = UNSET
        else:
            capacity_gib = self.capacity_gib

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "volume_kinds": volume_kinds,
            }
        )
        if capacity_gib is not UNSET:
            field_dict["capacity_gib"] = capacity_gib

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        volume_kinds = []
        _volume_kinds = d.pop("volume_kinds")
        for volume_kinds_item_data in _volume_kinds:
            volume_kinds_item = VolumeKind(volume_kinds_item_data)

            volume_kinds.append(volume_kinds_item)

        def _parse_capacity_gib(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        capacity_gib = _parse_capacity_gib(d.pop("capacity_gib", UNSET))

        pool_storage_settings = cls(
            volume_kinds=volume_kinds,
            capacity_gib=capacity_gib,
        )

        return pool_storage_settings
