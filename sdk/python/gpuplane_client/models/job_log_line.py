from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.log_stream import LogStream
from ..types import UNSET, Unset

T = TypeVar("T", bound="JobLogLine")


@_attrs_define
class JobLogLine:
    """One line of a job's output.

    Attributes:
        at (datetime.datetime): When its agent read it.
        line (int): The line's number in the job's log, from 1: lines are numbered in the order they were stored, across
            every node.
        node (int): The node's rank in the job that printed it.
        stream (LogStream): Which of the process's streams a line came from.
        text (str): The line, with the job's secret values replaced by `***`.
        rank (int | None | Unset): The global rank that printed it, where the launcher said (torchrun's ranks); absent
            otherwise.
    """

    at: datetime.datetime
    line: int
    node: int
    stream: LogStream
    text: str
    rank: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        at = self.at.isoformat()

        line = self.line

        node = self.node

        stream = self.stream.value

        text = self.text

        rank: int | None | Unset
        if isinstance(self.rank, Unset):
            rank = UNSET
        else:
            rank = self.rank

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "at": at,
                "line": line,
                "node": node,
                "stream": stream,
                "text": text,
            }
        )
        if rank is not UNSET:
            field_dict["rank"] = rank

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        at = datetime.datetime.fromisoformat(d.pop("at"))

        line = d.pop("line")

        node = d.pop("node")

        stream = LogStream(d.pop("stream"))

        text = d.pop("text")

        def _parse_rank(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        rank = _parse_rank(d.pop("rank", UNSET))

        job_log_line = cls(
            at=at,
            line=line,
            node=node,
            stream=stream,
            text=text,
            rank=rank,
        )

        job_log_line.additional_properties = d
        return job_log_line

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
