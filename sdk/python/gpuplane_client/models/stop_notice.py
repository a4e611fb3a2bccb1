from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="StopNotice")


@_attrs_define
class StopNotice:
    """A foreseeable stop of a job's part (a replan, its lease ending, a drain), announced before it happens.

    Attributes:
        grace_s (int): Seconds the process has, from when its agent sees the notice, before it is stopped (SIGTERM, then
            SIGKILL). 0: stop at once.
        reason (str): Why, e.g. `replan to generation 2` or `lease released`.
    """

    grace_s: int
    reason: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        grace_s = self.grace_s

        reason = self.reason

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "grace_s": grace_s,
                "reason": reason,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        grace_s = d.pop("grace_s")

        reason = d.pop("reason")

        stop_notice = cls(
            grace_s=grace_s,
            reason=reason,
        )

        stop_notice.additional_properties = d
        return stop_notice

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
