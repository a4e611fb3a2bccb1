from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="CreatePoolPriceRequest")


@_attrs_define
class CreatePoolPriceRequest:
    """
    Example:
        {'effective_from': '2026-12-01T00:00:00Z', 'price_per_gpu_hour_minor': 199, 'price_per_gpu_month_minor': 105000}

    Attributes:
        price_per_gpu_hour_minor (int):
        effective_from (datetime.datetime | None | Unset): When it takes effect (default now). Never in the past:
            charges already made are never rewritten.
        price_per_gpu_month_minor (int | None | Unset):
    """

    price_per_gpu_hour_minor: int
    effective_from: datetime.datetime | None | Unset = UNSET
    price_per_gpu_month_minor: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        price_per_gpu_hour_minor = self.price_per_gpu_hour_minor

        effective_from: None | str | Unset
        if isinstance(self.effective_from, Unset):
            effective_from = UNSET
        elif isinstance(self.effective_from, datetime.datetime):
            effective_from = self.effective_from.isoformat()
        else:
            effective_from = self.effective_from

        price_per_gpu_month_minor: int | None | Unset
        if isinstance(self.price_per_gpu_month_minor, Unset):
            price_per_gpu_month_minor = UNSET
        else:
            price_per_gpu_month_minor = self.price_per_gpu_month_minor

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "price_per_gpu_hour_minor": price_per_gpu_hour_minor,
            }
        )
        if effective_from is not UNSET:
            field_dict["effective_from"] = effective_from
        if price_per_gpu_month_minor is not UNSET:
            field_dict["price_per_gpu_month_minor"] = price_per_gpu_month_minor

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        price_per_gpu_hour_minor = d.pop("price_per_gpu_hour_minor")

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

        def _parse_price_per_gpu_month_minor(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        price_per_gpu_month_minor = _parse_price_per_gpu_month_minor(
            d.pop("price_per_gpu_month_minor", UNSET)
        )

        create_pool_price_request = cls(
            price_per_gpu_hour_minor=price_per_gpu_hour_minor,
            effective_from=effective_from,
            price_per_gpu_month_minor=price_per_gpu_month_minor,
        )

        return create_pool_price_request
