from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="WebhookAttempt")


@_attrs_define
class WebhookAttempt:
    """One attempt to deliver.

    Attributes:
        attempted_at (datetime.datetime):
        latency_ms (int):
        succeeded (bool):
        error (None | str | Unset): What went wrong (transport error, or the status and the first bytes of the body).
        response_code (int | None | Unset): The receiver's HTTP status, when it answered.
    """

    attempted_at: datetime.datetime
    latency_ms: int
    succeeded: bool
    error: None | str | Unset = UNSET
    response_code: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        attempted_at = self.attempted_at.isoformat()

        latency_ms = self.latency_ms

        succeeded = self.succeeded

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error

        response_code: int | None | Unset
        if isinstance(self.response_code, Unset):
            response_code = UNSET
        else:
            response_code = self.response_code

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "attempted_at": attempted_at,
                "latency_ms": latency_ms,
                "succeeded": succeeded,
            }
        )
        if error is not UNSET:
            field_dict["error"] = error
        if response_code is not UNSET:
            field_dict["response_code"] = response_code

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        attempted_at = datetime.datetime.fromisoformat(d.pop("attempted_at"))

        latency_ms = d.pop("latency_ms")

        succeeded = d.pop("succeeded")

        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        def _parse_response_code(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        response_code = _parse_response_code(d.pop("response_code", UNSET))

        webhook_attempt = cls(
            attempted_at=attempted_at,
            latency_ms=latency_ms,
            succeeded=succeeded,
            error=error,
            response_code=response_code,
        )

        webhook_attempt.additional_properties = d
        return webhook_attempt

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
