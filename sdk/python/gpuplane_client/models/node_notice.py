from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="NodeNotice")


@_attrs_define
class NodeNotice:
    """A stop notice as a job's part received it.

    Attributes:
        at (datetime.datetime):
        grace_s (int): Seconds the process had to checkpoint and exit before it was stopped.
        reason (str):
    """

    at: datetime.datetime
    grace_s: int
    reason: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        at = self.at.isoformat()

        grace_s = self.grace_s

        reason = self.reason

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "at": at,
                "grace_s": grace_s,
                "reason": reason,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        at = datetime.datetime.fromisoformat(d.pop("at"))

        grace_s = d.pop("grace_s")

        reason = d.pop("reason")

        node_notice = cls(
            at=at,
            grace_s=grace_s,
            reason=reason,
        )

        node_notice.additional_properties = d
        return node_notice

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
