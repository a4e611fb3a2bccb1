from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..models.volume_outcome import VolumeOutcome
from ..types import UNSET, Unset

T = TypeVar("T", bound="VolumeReport")


@_attrs_define
class VolumeReport:
    """One volume's state on this host, reported with the heartbeat after it changed and then with every heartbeat
    while it is held (its use changes).

        Attributes:
            outcome (VolumeOutcome): What the agent did with one volume the service asked it to hold or destroy.
            volume_id (UUID):
            message (None | str | Unset): Why it failed.
            size_bytes (int | None | Unset): The filesystem's size, bytes (ready volumes).
            used_bytes (int | None | Unset): What is written in it, bytes (ready volumes).
    """

    outcome: VolumeOutcome
    volume_id: UUID
    message: None | str | Unset = UNSET
    size_bytes: int | None | Unset = UNSET
    used_bytes: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        outcome = self.outcome.value

        volume_id = str(self.volume_id)

        message: None | str | Unset
        if isinstance(self.message, Unset):
            message = UNSET
        else:
            message = self.message

        size_bytes: int | None | Unset
        if isinstance(self.size_bytes, Unset):
            size_bytes = UNSET
        else:
            size_bytes = self.size_bytes

        used_bytes: int | None | Unset
        if isinstance(self.used_bytes, Unset):
            used_bytes = UNSET
        else:
            used_bytes = self.used_bytes

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "outcome": outcome,
                "volume_id": volume_id,
            }
        )
        if message is not UNSET:
            field_dict["message"] = message
        if size_bytes is not UNSET:
            field_dict["size_bytes"] = size_bytes
        if used_bytes is not UNSET:
            field_dict["used_bytes"] = used_bytes

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        outcome = VolumeOutcome(d.pop("outcome"))

        volume_id = UUID(d.pop("volume_id"))

        def _parse_message(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        message = _parse_message(d.pop("message", UNSET))

        def _parse_size_bytes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        size_bytes = _parse_size_bytes(d.pop("size_bytes", UNSET))

        def _parse_used_bytes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        used_bytes = _parse_used_bytes(d.pop("used_bytes", UNSET))

        volume_report = cls(
            outcome=outcome,
            volume_id=volume_id,
            message=message,
            size_bytes=size_bytes,
            used_bytes=used_bytes,
        )

        return volume_report
