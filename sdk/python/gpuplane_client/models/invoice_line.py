from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="InvoiceLine")


@_attrs_define
class InvoiceLine:
    """
    Attributes:
        amount_minor (int):
        gpu_hours (str): GPU-hours, for people (gpu_seconds / 3600, to the thousandth).
        gpu_seconds (int):
        lease_id (UUID):
        pool_id (UUID):
        pool_name (str):
        term (str): `hourly` or `monthly`.
        unit_price_minor (int):
    """

    amount_minor: int
    gpu_hours: str
    gpu_seconds: int
    lease_id: UUID
    pool_id: UUID
    pool_name: str
    term: str
    unit_price_minor: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        amount_minor = self.amount_minor

        gpu_hours = self.gpu_hours

        gpu_seconds = self.gpu_seconds

        lease_id = str(self.lease_id)

        pool_id = str(self.pool_id)

        pool_name = self.pool_name

        term = self.term

        unit_price_minor = self.unit_price_minor

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "amount_minor": amount_minor,
                "gpu_hours": gpu_hours,
                "gpu_seconds": gpu_seconds,
                "lease_id": lease_id,
                "pool_id": pool_id,
                "pool_name": pool_name,
                "term": term,
                "unit_price_minor": unit_price_minor,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        amount_minor = d.pop("amount_minor")

        gpu_hours = d.pop("gpu_hours")

        gpu_seconds = d.pop("gpu_seconds")

        lease_id = UUID(d.pop("lease_id"))

        pool_id = UUID(d.pop("pool_id"))

        pool_name = d.pop("pool_name")

        term = d.pop("term")

        unit_price_minor = d.pop("unit_price_minor")

        invoice_line = cls(
            amount_minor=amount_minor,
            gpu_hours=gpu_hours,
            gpu_seconds=gpu_seconds,
            lease_id=lease_id,
            pool_id=pool_id,
            pool_name=pool_name,
            term=term,
            unit_price_minor=unit_price_minor,
        )

        invoice_line.additional_properties = d
        return invoice_line

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
