from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="PoolPrice")


@_attrs_define
class PoolPrice:
    """
    Attributes:
        effective_from (datetime.datetime):
        id (UUID):
        pool_id (UUID):
        price_per_gpu_hour_minor (int):
        price_per_gpu_month_minor (int | None | Unset): Monthly terms: price per GPU per 30-day month (absent: monthly
            terms use the hourly price).
    """

    effective_from: datetime.datetime
    id: UUID
    pool_id: UUID
    price_per_gpu_hour_minor: int
    price_per_gpu_month_minor: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        effective_from = self.effective_from.isoformat()

        id = str(self.id)

        pool_id = str(self.pool_id)

        price_per_gpu_hour_minor = self.price_per_gpu_hour_minor

        price_per_gpu_month_minor: int | None | Unset
        if isinstance(self.price_per_gpu_month_minor, Unset):
            price_per_gpu_month_minor = UNSET
        else:
            price_per_gpu_month_minor = self.price_per_gpu_month_minor

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "effective_from": effective_from,
                "id": id,
                "pool_id": pool_id,
                "price_per_gpu_hour_minor": price_per_gpu_hour_minor,
            }
        )
        if price_per_gpu_month_minor is not UNSET:
            field_dict["price_per_gpu_month_minor"] = price_per_gpu_month_minor

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        effective_from = datetime.datetime.fromisoformat(d.pop("effective_from"))

        id = UUID(d.pop("id"))

        pool_id = UUID(d.pop("pool_id"))

        price_per_gpu_hour_minor = d.pop("price_per_gpu_hour_minor")

        def _parse_price_per_gpu_month_minor(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        price_per_gpu_month_minor = _parse_price_per_gpu_month_minor(
            d.pop("price_per_gpu_month_minor", UNSET)
        )

        pool_price = cls(
            effective_from=effective_from,
            id=id,
            pool_id=pool_id,
            price_per_gpu_hour_minor=price_per_gpu_hour_minor,
            price_per_gpu_month_minor=price_per_gpu_month_minor,
        )

        pool_price.additional_properties = d
        return pool_price

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
