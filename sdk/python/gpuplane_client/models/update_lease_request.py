from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

T = TypeVar("T", bound="UpdateLeaseRequest")


@_attrs_define
class UpdateLeaseRequest:
    """
    Example:
        {'idle_release_after_minutes': 60}

    Attributes:
        idle_release_after_minutes (int | None): Release the lease once it has been idle this many minutes (10-10080),
            after its running jobs got their
            stop notice; `null` turns the idle release off.
    """

    idle_release_after_minutes: int | None

    def to_dict(self) -> dict[str, Any]:
        idle_release_after_minutes: int | None
        idle_release_after_minutes = self.idle_release_after_minutes

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "idle_release_after_minutes": idle_release_after_minutes,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_idle_release_after_minutes(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        idle_release_after_minutes = _parse_idle_release_after_minutes(
            d.pop("idle_release_after_minutes")
        )

        update_lease_request = cls(
            idle_release_after_minutes=idle_release_after_minutes,
        )

        return update_lease_request
