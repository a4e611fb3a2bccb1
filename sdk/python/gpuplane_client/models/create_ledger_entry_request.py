from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.entry_kind import EntryKind
from ..types import UNSET, Unset

T = TypeVar("T", bound="CreateLedgerEntryRequest")


@_attrs_define
class CreateLedgerEntryRequest:
    """
    Example:
        {'amount_minor': 500000, 'currency': 'USD', 'kind': 'topup', 'reason': 'wire 2026-11-29'}

    Attributes:
        amount_minor (int): Minor units: positive for top-ups and credits; adjustments may be negative.
        currency (str):
        kind (EntryKind):
        reason (None | str | Unset): Why, for the tenant's statement (1-500 characters).
    """

    amount_minor: int
    currency: str
    kind: EntryKind
    reason: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        amount_minor = self.amount_minor

        currency = self.currency

        kind = self.kind.value

        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        else:
            reason = self.reason

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "amount_minor": amount_minor,
                "currency": currency,
                "kind": kind,
            }
        )
        if reason is not UNSET:
            field_dict["reason"] = reason

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        amount_minor = d.pop("amount_minor")

        currency = d.pop("currency")

        kind = EntryKind(d.pop("kind"))

        def _parse_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))

        create_ledger_entry_request = cls(
            amount_minor=amount_minor,
            currency=currency,
            kind=kind,
            reason=reason,
        )

        return create_ledger_entry_request
