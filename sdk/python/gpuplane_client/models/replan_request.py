from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.pins import Pins


T = TypeVar("T", bound="ReplanRequest")


@_attrs_define
class ReplanRequest:
    """A replan of a running job: the plan to move to.

    Example:
        {'pins': {'dp': 4, 'pp': 1, 'tp': 1, 'zero_stage': 3}, 'reason': 'more data parallel'}

    Attributes:
        pins (Pins | Unset): Optional pins: a `Some` fixes that knob, `None` lets the search choose.
        reason (None | str | Unset): Why, kept in the job's history (at most 200 characters).
    """

    pins: Pins | Unset = UNSET
    reason: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        pins: dict[str, Any] | Unset = UNSET
        if not isinstance(self.pins, Unset):
            pins = self.pins.to_dict()

        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        else:
            reason = self.reason

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if pins is not UNSET:
            field_dict["pins"] = pins
        if reason is not UNSET:
            field_dict["reason"] = reason

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.pins import Pins

        d = dict(src_dict)
        _pins = d.pop("pins", UNSET)
        pins: Pins | Unset
        if isinstance(_pins, Unset):
            pins = UNSET
        else:
            pins = Pins.from_dict(_pins)

        def _parse_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))

        replan_request = cls(
            pins=pins,
            reason=reason,
        )

        return replan_request
