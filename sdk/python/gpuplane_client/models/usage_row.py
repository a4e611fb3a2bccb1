from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

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
        period_end (datetime.datetime):
        period_start (datetime.datetime):
        pool_id (UUID):
        pool_name (str):
        record_id (UUID):
        tenant_id (UUID):
        term (str): `hourly` or `monthly` (a lease's GPU time), or `storage` (a volume's).
        unit_price_minor (int): Price per GPU-hour (hourly) or per GPU and 30-day month (monthly), minor units.
        gib (int | None | Unset): The volume's size, GiB (storage records).
        gib_seconds (int | None | Unset): GiB-seconds metered (storage records); their unit price is per GiB and 30-day
            month.
        lease_id (None | Unset | UUID): The lease metered (GPU time), or null for a volume's storage.
        volume_id (None | Unset | UUID): The volume metered (storage), or null for a lease's GPU time.
    """

    amount_minor: int
    currency: str
    gpu_count: int
    gpu_model: str
    gpu_seconds: int
    period_end: datetime.datetime
    period_start: datetime.datetime
    pool_id: UUID
    pool_name: str
    record_id: UUID
    tenant_id: UUID
    term: str
    unit_price_minor: int
    gib: int | None | Unset = UNSET
    gib_seconds: int | None | Unset = UNSET
    lease_id: None | Unset | UUID = UNSET
    volume_id: None | Unset | UUID = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        amount_minor = self.amount_minor

        currency = self.currency

        gpu_count = self.gpu_count

        gpu_model = self.gpu_model

        gpu_seconds = self.gpu_seconds

        period_end = self.period_end.isoformat()

        period_start = self.period_start.isoformat()

        pool_id = str(self.pool_id)

        pool_name = self.pool_name

        record_id = str(self.record_id)

        tenant_id = str(self.tenant_id)

        term = self.term

        unit_price_minor = self.unit_price_minor

        gib: int | None | Unset
        if isinstance(self.gib, Unset):
            gib = UNSET
        else:
            gib = self.gib

        gib_seconds: int | None | Unset
        if isinstance(self.gib_seconds, Unset):
            gib_seconds = UNSET
        else:
            gib_seconds = self.gib_seconds

        lease_id: None | str | Unset
        if isinstance(self.lease_id, Unset):
            lease_id = UNSET
        elif isinstance(self.lease_id, UUID):
            lease_id = str(self.lease_id)
        else:
            lease_id = self.lease_id

        volume_id: None | str | Unset
        if isinstance(self.volume_id, Unset):
            volume_id = UNSET
        elif isinstance(self.volume_id, UUID):
            volume_id = str(self.volume_id)
        else:
            volume_id = self.volume_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "amount_minor": amount_minor,
                "currency": currency,
                "gpu_count": gpu_count,
                "gpu_model": gpu_model,
                "gpu_seconds": gpu_seconds,
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
        if gib is not UNSET:
            field_dict["gib"] = gib
        if gib_seconds is not UNSET:
            field_dict["gib_seconds"] = gib_seconds
        if lease_id is not UNSET:
            field_dict["lease_id"] = lease_id
        if volume_id is not UNSET:
            field_dict["volume_id"] = volume_id

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        amount_minor = d.pop("amount_minor")

        currency = d.pop("currency")

        gpu_count = d.pop("gpu_count")

        gpu_model = d.pop("gpu_model")

        gpu_seconds = d.pop("gpu_seconds")

        period_end = datetime.datetime.fromisoformat(d.pop("period_end"))

        period_start = datetime.datetime.fromisoformat(d.pop("period_start"))

        pool_id = UUID(d.pop("pool_id"))

        pool_name = d.pop("pool_name")

        record_id = UUID(d.pop("record_id"))

        tenant_id = UUID(d.pop("tenant_id"))

        term = d.pop("term")

        unit_price_minor = d.pop("unit_price_minor")

        def _parse_gib(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        gib = _parse_gib(d.pop("gib", UNSET))

        def _parse_gib_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        gib_seconds = _parse_gib_seconds(d.pop("gib_seconds", UNSET))

        def _parse_lease_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                lease_id_type_0 = UUID(data)

                return lease_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        lease_id = _parse_lease_id(d.pop("lease_id", UNSET))

        def _parse_volume_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                volume_id_type_0 = UUID(data)

                return volume_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        volume_id = _parse_volume_id(d.pop("volume_id", UNSET))

        usage_row = cls(
            amount_minor=amount_minor,
            currency=currency,
            gpu_count=gpu_count,
            gpu_model=gpu_model,
            gpu_seconds=gpu_seconds,
            period_end=period_end,
            period_start=period_start,
            pool_id=pool_id,
            pool_name=pool_name,
            record_id=record_id,
            tenant_id=tenant_id,
            term=term,
            unit_price_minor=unit_price_minor,
            gib=gib,
            gib_seconds=gib_seconds,
            lease_id=lease_id,
            volume_id=volume_id,
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
