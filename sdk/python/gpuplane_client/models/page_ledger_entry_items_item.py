from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.entry_kind import EntryKind
from ..types import UNSET, Unset

T = TypeVar("T", bound="PageLedgerEntryItemsItem")


@_attrs_define
class PageLedgerEntryItemsItem:
    """
    Attributes:
        amount_minor (int): Signed amount in minor units: positive adds to the balance.
        created_at (datetime.datetime):
        created_by (str):
        currency (str):
        id (UUID):
        kind (EntryKind):
        period_at (datetime.datetime):
        tenant_id (UUID):
        lease_id (None | Unset | UUID):
        reason (None | str | Unset):
        usage_record_id (None | Unset | UUID):
    """

    amount_minor: int
    created_at: datetime.datetime
    created_by: str
    currency: str
    id: UUID
    kind: EntryKind
    period_at: datetime.datetime
    tenant_id: UUID
    lease_id: None | Unset | UUID = UNSET
    reason: None | str | Unset = UNSET
    usage_record_id: None | Unset | UUID = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        amount_minor = self.amount_minor

        created_at = self.created_at.isoformat()

        created_by = self.created_by

        currency = self.currency

        id = str(self.id)

        kind = self.kind.value

        period_at = self.period_at.isoformat()

        tenant_id = str(self.tenant_id)

        lease_id: None | str | Unset
        if isinstance(self.lease_id, Unset):
            lease_id = UNSET
        elif isinstance(self.lease_id, UUID):
            lease_id = str(self.lease_id)
        else:
            lease_id = self.lease_id

        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        else:
            reason = self.reason

        usage_record_id: None | str | Unset
        if isinstance(self.usage_record_id, Unset):
            usage_record_id = UNSET
        elif isinstance(self.usage_record_id, UUID):
            usage_record_id = str(self.usage_record_id)
        else:
            usage_record_id = self.usage_record_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "amount_minor": amount_minor,
                "created_at": created_at,
                "created_by": created_by,
                "currency": currency,
                "id": id,
                "kind": kind,
                "period_at": period_at,
                "tenant_id": tenant_id,
            }
        )
        if lease_id is not UNSET:
            field_dict["lease_id"] = lease_id
        if reason is not UNSET:
            field_dict["reason"] = reason
        if usage_record_id is not UNSET:
            field_dict["usage_record_id"] = usage_record_id

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        amount_minor = d.pop("amount_minor")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        created_by = d.pop("created_by")

        currency = d.pop("currency")

        id = UUID(d.pop("id"))

        kind = EntryKind(d.pop("kind"))

        period_at = datetime.datetime.fromisoformat(d.pop("period_at"))

        tenant_id = UUID(d.pop("tenant_id"))

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

        def _parse_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))

        def _parse_usage_record_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                usage_record_id_type_0 = UUID(data)

                return usage_record_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        usage_record_id = _parse_usage_record_id(d.pop("usage_record_id", UNSET))

        page_ledger_entry_items_item = cls(
            amount_minor=amount_minor,
            created_at=created_at,
            created_by=created_by,
            currency=currency,
            id=id,
            kind=kind,
            period_at=period_at,
            tenant_id=tenant_id,
            lease_id=lease_id,
            reason=reason,
            usage_record_id=usage_record_id,
        )

        page_ledger_entry_items_item.additional_properties = d
        return page_ledger_entry_items_item

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
