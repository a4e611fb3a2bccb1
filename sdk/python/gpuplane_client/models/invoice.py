from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.invoice_line import InvoiceLine


T = TypeVar("T", bound="Invoice")


@_attrs_define
class Invoice:
    """
    Attributes:
        created_at (datetime.datetime):
        credits_minor (int): Credits posted for the month.
        currency (str):
        id (UUID):
        lines (list[InvoiceLine]):
        month (str): The invoiced month, `YYYY-MM` (UTC). Example: 2026-11.
        month_closed (bool): Whether the month is closed: it has ended and every second that began in it is metered, so
            the figures
            are final. A draft can be issued only then; until then it is refreshed by each generation.
        state (str): `draft`, `issued` or `paid`.
        tenant_id (UUID):
        total_minor (int): usage - credits.
        usage_minor (int): Usage charged in the month (equals the month's export total and ledger usage charges).
        issued_at (datetime.datetime | None | Unset):
        paid_at (datetime.datetime | None | Unset):
    """

    created_at: datetime.datetime
    credits_minor: int
    currency: str
    id: UUID
    lines: list[InvoiceLine]
    month: str
    month_closed: bool
    state: str
    tenant_id: UUID
    total_minor: int
    usage_minor: int
    issued_at: datetime.datetime | None | Unset = UNSET
    paid_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at = self.created_at.isoformat()

        credits_minor = self.credits_minor

        currency = self.currency

        id = str(self.id)

        lines = []
        for lines_item_data in self.lines:
            lines_item = lines_item_data.to_dict()
            lines.append(lines_item)

        month = self.month

        month_closed = self.month_closed

        state = self.state

        tenant_id = str(self.tenant_id)

        total_minor = self.total_minor

        usage_minor = self.usage_minor

        issued_at: None | str | Unset
        if isinstance(self.issued_at, Unset):
            issued_at = UNSET
        elif isinstance(self.issued_at, datetime.datetime):
            issued_at = self.issued_at.isoformat()
        else:
            issued_at = self.issued_at

        paid_at: None | str | Unset
        if isinstance(self.paid_at, Unset):
            paid_at = UNSET
        elif isinstance(self.paid_at, datetime.datetime):
            paid_at = self.paid_at.isoformat()
        else:
            paid_at = self.paid_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at": created_at,
                "credits_minor": credits_minor,
                "currency": currency,
                "id": id,
                "lines": lines,
                "month": month,
                "month_closed": month_closed,
                "state": state,
                "tenant_id": tenant_id,
                "total_minor": total_minor,
                "usage_minor": usage_minor,
            }
        )
        if issued_at is not UNSET:
            field_dict["issued_at"] = issued_at
        if paid_at is not UNSET:
            field_dict["paid_at"] = paid_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.invoice_line import InvoiceLine

        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        credits_minor = d.pop("credits_minor")

        currency = d.pop("currency")

        id = UUID(d.pop("id"))

        lines = []
        _lines = d.pop("lines")
        for lines_item_data in _lines:
            lines_item = InvoiceLine.from_dict(lines_item_data)

            lines.append(lines_item)

        month = d.pop("month")

        month_closed = d.pop("month_closed")

        state = d.pop("state")

        tenant_id = UUID(d.pop("tenant_id"))

        total_minor = d.pop("total_minor")

        usage_minor = d.pop("usage_minor")

        def _parse_issued_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                issued_at_type_0 = datetime.datetime.fromisoformat(data)

                return issued_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        issued_at = _parse_issued_at(d.pop("issued_at", UNSET))

        def _parse_paid_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                paid_at_type_0 = datetime.datetime.fromisoformat(data)

                return paid_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        paid_at = _parse_paid_at(d.pop("paid_at", UNSET))

        invoice = cls(
            created_at=created_at,
            credits_minor=credits_minor,
            currency=currency,
            id=id,
            lines=lines,
            month=month,
            month_closed=month_closed,
            state=state,
            tenant_id=tenant_id,
            total_minor=total_minor,
            usage_minor=usage_minor,
            issued_at=issued_at,
            paid_at=paid_at,
        )

        invoice.additional_properties = d
        return invoice

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
