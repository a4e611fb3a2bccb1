from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

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
        expired_at (datetime.datetime | None | Unset): When the job's lines were deleted, the service's log retention
            after it ended (`first_line` is then past
            the last line).
    """

    complete: bool
    first_line: int
    lines: list[JobLogLine]
    lost_lines: int
    next_after: int
    expired_at: datetime.datetime | None | Unset = UNSET
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

        expired_at: None | str | Unset
        if isinstance(self.expired_at, Unset):
            expired_at = UNSET
        elif isinstance(self.expired_at, datetime.datetime):
            expired_at = self.expired_at.isoformat()
        else:
            expired_at = self.expired_at

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
        if expired_at is not UNSET:
            field_dict["expired_at"] = expired_at

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

        def _parse_expired_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                expired_at_type_0 = datetime.datetime.fromisoformat(data)

                return expired_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        expired_at = _parse_expired_at(d.pop("expired_at", UNSET))

        job_log_page = cls(
            complete=complete,
            first_line=first_line,
            lines=lines,
            lost_lines=lost_lines,
            next_after=next_after,
            expired_at=expired_at,
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
