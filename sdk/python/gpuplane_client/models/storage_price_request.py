from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="StoragePriceRequest")


@_attrs_define
class StoragePriceRequest:
    """
    Example:
        {'price_per_gib_month_minor': 7}

    Attributes:
        price_per_gib_month_minor (int): Minor units per GiB per 30-day month (0-100000000), metered per GiB-second.
        effective_from (datetime.datetime | None | Unset): When it takes effect (default now). Never in the past:
            charges already made are never rewritten.
    """

    price_per_gib_month_minor: int
    effective_from: datetime.datetime | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        price_per_gib_month_minor = self.price_per_gib_month_minor

        effective_from: None | str | Unset
        if isinstance(self.effective_from, Unset):
            effective_from = UNSET
        elif isinstance(self.effective_from, datetime.datetime):
            effective_from = self.effective_from.isoformat()
        else:
            effective_from = self.effective_from

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "price_per_gib_month_minor": price_per_gib_month_minor,
            }
        )
        if effective_from is not UNSET:
            field_dict["effective_from"] = effective_from

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        price_per_gib_month_minor = d.pop("price_per_gib_month_minor")

        def _parse_effective_from(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                effective_from_type_0 = datetime.datetime.fromisoformat(data)

                return effective_from_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        effective_from = _parse_effective_from(d.pop("effective_from", UNSET))

        storage_price_request = cls(
            price_per_gib_month_minor=price_per_gib_month_minor,
            effective_from=effective_from,
        )

        return storage_price_request
