from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="PoolRevenue")


@_attrs_define
class PoolRevenue:
    """
    Attributes:
        amount_minor (int):
        currency (str):
        gpu_seconds (int):
        pool_id (UUID):
        pool_name (str):
        avg_gpu_util (float | None | Unset): Mean measured GPU utilization in the period (telemetry).
        sold_fraction (float | None | Unset): GPU-seconds sold / GPU-seconds the pool's GPUs existed in the period.
    """

    amount_minor: int
    currency: str
    gpu_seconds: int
    pool_id: UUID
    pool_name: str
    avg_gpu_util: float | None | Unset = UNSET
    sold_fraction: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        amount_minor = self.amount_minor

        currency = self.currency

        gpu_seconds = self.gpu_seconds

        pool_id = str(self.pool_id)

        pool_name = self.pool_name

        avg_gpu_util: float | None | Unset
        if isinstance(self.avg_gpu_util, Unset):
            avg_gpu_util = UNSET
        else:
            avg_gpu_util = self.avg_gpu_util

        sold_fraction: float | None | Unset
        if isinstance(self.sold_fraction, Unset):
            sold_fraction = UNSET
        else:
            sold_fraction = self.sold_fraction

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "amount_minor": amount_minor,
                "currency": currency,
                "gpu_seconds": gpu_seconds,
                "pool_id": pool_id,
                "pool_name": pool_name,
            }
        )
        if avg_gpu_util is not UNSET:
            field_dict["avg_gpu_util"] = avg_gpu_util
        if sold_fraction is not UNSET:
            field_dict["sold_fraction"] = sold_fraction

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        amount_minor = d.pop("amount_minor")

        currency = d.pop("currency")

        gpu_seconds = d.pop("gpu_seconds")

        pool_id = UUID(d.pop("pool_id"))

        pool_name = d.pop("pool_name")

        def _parse_avg_gpu_util(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        avg_gpu_util = _parse_avg_gpu_util(d.pop("avg_gpu_util", UNSET))

        def _parse_sold_fraction(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        sold_fraction = _parse_sold_fraction(d.pop("sold_fraction", UNSET))

        pool_revenue = cls(
            amount_minor=amount_minor,
            currency=currency,
            gpu_seconds=gpu_seconds,
            pool_id=pool_id,
            pool_name=pool_name,
            avg_gpu_util=avg_gpu_util,
            sold_fraction=sold_fraction,
        )

        pool_revenue.additional_properties = d
        return pool_revenue

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
