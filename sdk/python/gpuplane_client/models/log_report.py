from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.log_line import LogLine


T = TypeVar("T", bound="LogReport")


@_attrs_define
class LogReport:
    """A batch of a part's output. Sending the same lines again is harmless: the service keeps each `seq` once. A gap
    in `seq` is lines the agent dropped (its buffer is bounded: the oldest go when the service stays away too
    long); the service counts them as lost.

        Attributes:
            lines (list[LogLine]): Oldest first, `seq` increasing.
            last (bool | Unset): The process has ended and this report holds the last of its output.
    """

    lines: list[LogLine]
    last: bool | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        lines = []
        for lines_item_data in self.lines:
            lines_item = lines_item_data.to_dict()
            lines.append(lines_item)

        last = self.last

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "lines": lines,
            }
        )
        if last is not UNSET:
            field_dict["last"] = last

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.log_line import LogLine

        d = dict(src_dict)
        lines = []
        _lines = d.pop("lines")
        for lines_item_data in _lines:
            lines_item = LogLine.from_dict(lines_item_data)

            lines.append(lines_item)

        last = d.pop("last", UNSET)

        log_report = cls(
            lines=lines,
            last=last,
        )

        return log_report
