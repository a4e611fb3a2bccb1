from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="TenantRevenue")


@_attrs_define
class TenantRevenue:
    """
    Attributes:
        amount_minor (int):
        currency (str):
        gpu_seconds (int):
        tenant_id (UUID):
        tenant_name (str):
    """

    amount_minor: int
    currency: str
    gpu_seconds: int
    tenant_id: UUID
    tenant_name: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        amount_minor = self.amount_minor

        currency = self.currency

        gpu_seconds = self.gpu_seconds

        tenant_id = str(self.tenant_id)

        tenant_name = self.tenant_name

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "amount_minor": amount_minor,
                "currency": currency,
                "gpu_seconds": gpu_seconds,
                "tenant_id": tenant_id,
                "tenant_name": tenant_name,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        amount_minor = d.pop("amount_minor")

        currency = d.pop("currency")

        gpu_seconds = d.pop("gpu_seconds")

        tenant_id = UUID(d.pop("tenant_id"))

        tenant_name = d.pop("tenant_name")

        tenant_revenue = cls(
            amount_minor=amount_minor,
            currency=currency,
            gpu_seconds=gpu_seconds,
            tenant_id=tenant_id,
            tenant_name=tenant_name,
        )

        tenant_revenue.additional_properties = d
        return tenant_revenue

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
