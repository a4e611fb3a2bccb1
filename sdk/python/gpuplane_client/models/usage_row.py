from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="UsageRow")


@_attrs_define
class UsageRow:
    """One exported usage record. Column order of the CSV is the field order here.

    Attributes:
        amount_minor (int): What this record charged, minor units. The sum over a period equals the ledger's usage
            charges.
        currency (str):
        gpu_count (int):
        gpu_model (str):
        gpu_seconds (int):
        lease_id (UUID):
        period_end (datetime.datetime):
        period_start (datetime.datetime):
        pool_id (UUID):
        pool_name (str):
        record_id (UUID):
        tenant_id (UUID):
        term (str): `hourly` or `monthly`.
        unit_price_minor (int): Price per GPU-hour (hourly) or per GPU and 30-day month (monthly), minor units.
    """

    amount_minor: int
    currency: str
    gpu_count: int
    gpu_model: str
    gpu_seconds: int
    lease_id: UUID
    period_end: datetime.datetime
    period_start: datetime.datetime
    pool_id: UUID
    pool_name: str
    record_id: UUID
    tenant_id: UUID
    term: str
    unit_price_minor: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        amount_minor = self.amount_minor

        currency = self.currency

        gpu_count = self.gpu_count

        gpu_model = self.gpu_model

        gpu_seconds = self.gpu_seconds

        lease_id = str(self.lease_id)

        period_end = self.period_end.isoformat()

        period_start = self.period_start.isoformat()

        pool_id = str(self.pool_id)

        pool_name = self.pool_name

        record_id = str(self.record_id)

        tenant_id = str(self.tenant_id)

        term = self.term

        unit_price_minor = self.unit_price_minor

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "amount_minor": amount_minor,
                "currency": currency,
                "gpu_count": gpu_count,
                "gpu_model": gpu_model,
                "gpu_seconds": gpu_seconds,
                "lease_id": lease_id,
                "period_end": period_end,
                "period_start": period_start,
                "pool_id": pool_id,
                "pool_name": pool_name,
                "record_id": record_id,
                "tenant_id": tenant_id,
                "term": term,
                "unit_price_minor": unit_price_minor,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        amount_minor = d.pop("amount_minor")

        currency = d.pop("currency")

        gpu_count = d.pop("gpu_count")

        gpu_model = d.pop("gpu_model")

        gpu_seconds = d.pop("gpu_seconds")

        lease_id = UUID(d.pop("lease_id"))

        period_end = datetime.datetime.fromisoformat(d.pop("period_end"))

        period_start = datetime.datetime.fromisoformat(d.pop("period_start"))

        pool_id = UUID(d.pop("pool_id"))

        pool_name = d.pop("pool_name")

        record_id = UUID(d.pop("record_id"))

        tenant_id = UUID(d.pop("tenant_id"))

        term = d.pop("term")

        unit_price_minor = d.pop("unit_price_minor")

        usage_row = cls(
            amount_minor=amount_minor,
            currency=currency,
            gpu_count=gpu_count,
            gpu_model=gpu_model,
            gpu_seconds=gpu_seconds,
            lease_id=lease_id,
            period_end=period_end,
            period_start=period_start,
            pool_id=pool_id,
            pool_name=pool_name,
            record_id=record_id,
            tenant_id=tenant_id,
            term=term,
            unit_price_minor=unit_price_minor,
        )

        usage_row.additional_properties = d
        return usage_row

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
