from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="PoolSla")


@_attrs_define
class PoolSla:
    """
    Example:
        {'credit_percent': 10, 'target_percent': 99.5}

    Attributes:
        credit_percent (int | None | Unset): Credit, in percent of the month's charge, when availability falls below the
            target.
        target_percent (float | None | Unset): Monthly availability promised for monthly leases, percent (e.g. 99.5).
            Null removes the SLA.
    """

    credit_percent: int | None | Unset = UNSET
    target_percent: float | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        credit_percent: int | None | Unset
        if isinstance(self.credit_percent, Unset):
            credit_percent = UNSET
        else:
            credit_percent = self.credit_percent

        target_percent: float | None | Unset
        if isinstance(self.target_percent, Unset):
            target_percent = UNSET
        else:
            target_percent = self.target_percent

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if credit_percent is not UNSET:
            field_dict["credit_percent"] = credit_percent
        if target_percent is not UNSET:
            field_dict["target_percent"] = target_percent

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_credit_percent(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        credit_percent = _parse_credit_percent(d.pop("credit_percent", UNSET))

        def _parse_target_percent(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        target_percent = _parse_target_percent(d.pop("target_percent", UNSET))

        pool_sla = cls(
            credit_percent=credit_percent,
            target_percent=target_percent,
        )

        return pool_sla
