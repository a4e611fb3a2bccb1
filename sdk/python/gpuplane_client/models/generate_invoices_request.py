from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="GenerateInvoicesRequest")


@_attrs_define
class GenerateInvoicesRequest:
    """
    Example:
        {'month': '2026-11'}

    Attributes:
        month (str): The month, `YYYY-MM`.
    """

    month: str

    def to_dict(self) -> dict[str, Any]:
        month = self.month

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "month": month,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        month = d.pop("month")

        generate_invoices_request = cls(
            month=month,
        )

        return generate_invoices_request
