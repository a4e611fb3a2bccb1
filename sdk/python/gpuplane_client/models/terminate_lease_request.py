from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="TerminateLeaseRequest")


@_attrs_define
class TerminateLeaseRequest:
    """
    Example:
        {'reason': 'abuse report #4411'}

    Attributes:
        reason (str): Why, recorded in the lease's events (1-500 characters).
    """

    reason: str

    def to_dict(self) -> dict[str, Any]:
        reason = self.reason

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "reason": reason,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        reason = d.pop("reason")

        terminate_lease_request = cls(
            reason=reason,
        )

        return terminate_lease_request
