from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.log_stream import LogStream
from ..types import UNSET, Unset

T = TypeVar("T", bound="LogLine")


@_attrs_define
class LogLine:
    """One line a part's process printed.

    Attributes:
        at (datetime.datetime): When the agent read it.
        seq (int): The line's number in its part's output, from 1.
        stream (LogStream): Which of the process's streams a line came from.
        text (str): The line without its end of line, at most [`LOG_LINE_BYTES`] bytes.
        rank (int | None | Unset): The global rank that printed it (from torchrun's `[rankN]:` prefix, which is taken
            off the text); absent
            for a launcher's own output or a process that is not torchrun.
    """

    at: datetime.datetime
    seq: int
    stream: LogStream
    text: str
    rank: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        at = self.at.isoformat()

        seq = self.seq

        stream = self.stream.value

        text = self.text

        rank: int | None | Unset
        if isinstance(self.rank, Unset):
            rank = UNSET
        else:
            rank = self.rank

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "at": at,
                "seq": seq,
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

        seq = d.pop("seq")

        stream = LogStream(d.pop("stream"))

        text = d.pop("text")

        def _parse_rank(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        rank = _parse_rank(d.pop("rank", UNSET))

        log_line = cls(
            at=at,
            seq=seq,
            stream=stream,
            text=text,
            rank=rank,
        )

        return log_line
