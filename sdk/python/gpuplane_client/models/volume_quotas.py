from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="VolumeQuotas")


@_attrs_define
class VolumeQuotas:
    """
    Example:
        {'max_volume_gib': 5000, 'max_volumes': 20}

    Attributes:
        max_volume_gib (int | None | Unset): GiB of volumes the tenant may hold at once, up to 10^12 (null: unlimited).
        max_volumes (int | None | Unset): Volumes the tenant may hold at once, up to 1,000,000 (null: unlimited).
    """

    max_volume_gib: int | None | Unset = UNSET
    max_volumes: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        max_volume_gib: int | None | Unset
        if isinstance(self.max_volume_gib, Unset):
            max_volume_gib = UNSET
        else:
            max_volume_gib = self.max_volume_gib

        max_volumes: int | None | Unset
        if isinstance(self.max_volumes, Unset):
            max_volumes = UNSET
        else:
            max_volumes = self.max_volumes

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if max_volume_gib is not UNSET:
            field_dict["max_volume_gib"] = max_volume_gib
        if max_volumes is not UNSET:
            field_dict["max_volumes"] = max_volumes

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_max_volume_gib(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_volume_gib = _parse_max_volume_gib(d.pop("max_volume_gib", UNSET))

        def _parse_max_volumes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_volumes = _parse_max_volumes(d.pop("max_volumes", UNSET))

        volume_quotas = cls(
            max_volume_gib=max_volume_gib,
            max_volumes=max_volumes,
        )

        return volume_quotas
