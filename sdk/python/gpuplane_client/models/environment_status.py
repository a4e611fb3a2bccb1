from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.environment_state import EnvironmentState
from ..types import UNSET, Unset

T = TypeVar("T", bound="EnvironmentStatus")


@_attrs_define
class EnvironmentStatus:
    """What an agent reports of an environment on its node.

    Example:
        {'host_key_fingerprints': ['SHA256:82jjlmpsuD4ByBlpbx1XhrAzJUtpby279N3S6E19g50'], 'port': 20000, 'state':
            'ready'}

    Attributes:
        state (EnvironmentState): An environment's state on one node.
        host_key_fingerprints (list[str] | Unset): The server's host keys as `SHA256:...` (at most 8).
        port (int | None | Unset): The port the SSH server listens on (`ready`).
        reason (None | str | Unset): Why, for `failed` (at most 500 characters are kept).
    """

    state: EnvironmentState
    host_key_fingerprints: list[str] | Unset = UNSET
    port: int | None | Unset = UNSET
    reason: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        state = self.state.value

        host_key_fingerprints: list[str] | Unset = UNSET
        if not isinstance(self.host_key_fingerprints, Unset):
            host_key_fingerprints = self.host_key_fingerprints

        port: int | None | Unset
        if isinstance(self.port, Unset):
            port = UNSET
        else:
            port = self.port

        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        else:
            reason = self.reason

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "state": state,
            }
        )
        if host_key_fingerprints is not UNSET:
            field_dict["host_key_fingerprints"] = host_key_fingerprints
        if port is not UNSET:
            field_dict["port"] = port
        if reason is not UNSET:
            field_dict["reason"] = reason

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        state = EnvironmentState(d.pop("state"))

        host_key_fingerprints = cast(list[str], d.pop("host_key_fingerprints", UNSET))

        def _parse_port(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        port = _parse_port(d.pop("port", UNSET))

        def _parse_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))

        environment_status = cls(
            state=state,
            host_key_fingerprints=host_key_fingerprints,
            port=port,
            reason=reason,
        )

        return environment_status
