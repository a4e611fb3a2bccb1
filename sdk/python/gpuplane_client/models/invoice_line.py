from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="InvoiceLine")


@_attrs_define
class InvoiceLine:
    """
    Attributes:
        amount_minor (int):
        gpu_hours (str): GPU-hours, for people (gpu_seconds / 3600, to the thousandth).
        gpu_seconds (int):
        pool_id (UUID):
        pool_name (str):
        term (str): `hourly` or `monthly` (GPU time), or `storage` (a volume: `gib_seconds`, priced per GiB and 30-day
            month).
        unit_price_minor (int):
        gib_seconds (int | None | Unset): GiB-seconds of storage (a volume's line).
        lease_id (None | Unset | UUID): The lease whose GPU time this line charges; null on a volume's line.
        volume_id (None | Unset | UUID): The volume whose storage this line charges (term `storage`).
    """

    amount_minor: int
    gpu_hours: str
    gpu_seconds: int
    pool_id: UUID
    pool_name: str
    term: str
    unit_price_minor: int
    gib_seconds: int | None | Unset = UNSET
    lease_id: None | Unset | UUID = UNSET
    volume_id: None | Unset | UUID = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        amount_minor = self.amount_minor

        gpu_hours = self.gpu_hours

        gpu_seconds = self.gpu_seconds

        pool_id = str(self.pool_id)

        pool_name = self.pool_name

        term = self.term

        unit_price_minor = self.unit_price_minor

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
                "gpu_hours": gpu_hours,
                "gpu_seconds": gpu_seconds,
                "pool_id": pool_id,
                "pool_name": pool_name,
                "term": term,
                "unit_price_minor": unit_price_minor,
            }
        )
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

        gpu_hours = d.pop("gpu_hours")

        gpu_seconds = d.pop("gpu_seconds")

        pool_id = UUID(d.pop("pool_id"))

        pool_name = d.pop("pool_name")

        term = d.pop("term")

        unit_price_minor = d.pop("unit_price_minor")

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

        invoice_line = cls(
            amount_minor=amount_minor,
            gpu_hours=gpu_hours,
            gpu_seconds=gpu_seconds,
            pool_id=pool_id,
            pool_name=pool_name,
            term=term,
            unit_price_minor=unit_price_minor,
            gib_seconds=gib_seconds,
            lease_id=lease_id,
            volume_id=volume_id,
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
