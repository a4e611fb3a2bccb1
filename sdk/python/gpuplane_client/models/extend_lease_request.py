from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="ExtendLeaseRequest")


@_attrs_define
class ExtendLeaseRequest:
    """
    Example:
        {'hours': 24}

    Attributes:
        hours (int | None | Unset): Hours to add (hourly leases).
        months (int | None | Unset): Months to add (monthly leases).
    """

    hours: int | None | Unset = UNSET
    months: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        hours: int | None | Unset
        if isinstance(self.hours, Unset):
            hours = UNSET
        else:
            hours = self.hours

        months: int | None | Unset
        if isinstance(self.months, Unset):
            months = UNSET
        else:
            months = self.months

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if hours is not UNSET:
            field_dict["hours"] = hours
        if months is not UNSET:
            field_dict["months"] = months

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_hours(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        hours = _parse_hours(d.pop("hours", UNSET))

        def _parse_months(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        months = _parse_months(d.pop("months", UNSET))

        extend_lease_request = cls(
            hours=hours,
            months=months,
        )

        return extend_lease_request
