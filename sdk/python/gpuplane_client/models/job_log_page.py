from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.job_log_line import JobLogLine


T = TypeVar("T", bound="JobLogPage")


@_attrs_define
class JobLogPage:
    """A page of a job's output.

    Attributes:
        complete (bool): The job has ended and every line of it is here: nothing more will come.
        first_line (int): The oldest line still stored: the ones before it were deleted to keep the job's logs within
            the cap.
        lines (list[JobLogLine]):
        lost_lines (int): Lines the nodes could not ship (their agents buffer a bounded amount while the service is
            away).
        next_after (int): Pass as `after` for the lines that follow (the last line returned; `after` itself when none
            was).
    """

    complete: bool
    first_line: int
    lines: list[JobLogLine]
    lost_lines: int
    next_after: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        complete = self.complete

        first_line = self.first_line

        lines = []
        for lines_item_data in self.lines:
            lines_item = lines_item_data.to_dict()
            lines.append(lines_item)

        lost_lines = self.lost_lines

        next_after = self.next_after

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "complete": complete,
                "first_line": first_line,
                "lines": lines,
                "lost_lines": lost_lines,
                "next_after": next_after,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.job_log_line import JobLogLine

        d = dict(src_dict)
        complete = d.pop("complete")

        first_line = d.pop("first_line")

        lines = []
        _lines = d.pop("lines")
        for lines_item_data in _lines:
            lines_item = JobLogLine.from_dict(lines_item_data)

            lines.append(lines_item)

        lost_lines = d.pop("lost_lines")

        next_after = d.pop("next_after")

        job_log_page = cls(
            complete=complete,
            first_line=first_line,
            lines=lines,
            lost_lines=lost_lines,
            next_after=next_after,
        )

        job_log_page.additional_properties = d
        return job_log_page

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
