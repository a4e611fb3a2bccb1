from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="UpdateVolumeRequest")


@_attrs_define
class UpdateVolumeRequest:
    """
    Example:
        {'size_gib': 200}

    Attributes:
        delete_after_idle_days (int | None | Unset): Delete it once detached this many days (1-365); `null` turns the
            idle deletion off.
        size_gib (int | None | Unset): A larger size, GiB (up to 65536): volumes grow, never shrink. Its agent grows the
            filesystem in place at
            its next heartbeat, mounted or not.
    """

    delete_after_idle_days: int | None | Unset = UNSET
    size_gib: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        delete_after_idle_days: int | None | Unset
        if isinstance(self.delete_after_idle_days, Unset):
            delete_after_idle_days = UNSET
        else:
            delete_after_idle_days = self.delete_after_idle_days

        size_gib: int | None | Unset
        if isinstance(self.size_gib, Unset):
            size_gib = UNSET
        else:
            size_gib = self.size_gib

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if delete_after_idle_days is not UNSET:
            field_dict["delete_after_idle_days"] = delete_after_idle_days
        if size_gib is not UNSET:
            field_dict["size_gib"] = size_gib

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_delete_after_idle_days(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        delete_after_idle_days = _parse_delete_after_idle_days(
            d.pop("delete_after_idle_days", UNSET)
        )

        def _parse_size_gib(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        size_gib = _parse_size_gib(d.pop("size_gib", UNSET))

        update_volume_request = cls(
            delete_after_idle_days=delete_after_idle_days,
            size_gib=size_gib,
        )

        return update_volume_request
