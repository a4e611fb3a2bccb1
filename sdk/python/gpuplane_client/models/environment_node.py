from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.environment_state import EnvironmentState
from ..types import UNSET, Unset

T = TypeVar("T", bound="EnvironmentNode")


@_attrs_define
class EnvironmentNode:
    """
    Attributes:
        host (str): The address to connect to.
        host_key_fingerprints (list[str]): The SSH server's host keys, `SHA256:...`: compare with what `ssh` shows on
            first connection.
        hostname (str):
        node_id (UUID):
        state (EnvironmentState): An environment's state on one node.
        port (int | None | Unset):
        reason (None | str | Unset):
        ssh (None | str | Unset): Ready to paste, e.g. `ssh -p 20000 tenant@10.0.0.7`.
        updated_at (datetime.datetime | None | Unset):
    """

    host: str
    host_key_fingerprints: list[str]
    hostname: str
    node_id: UUID
    state: EnvironmentState
    port: int | None | Unset = UNSET
    reason: None | str | Unset = UNSET
    ssh: None | str | Unset = UNSET
    updated_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        host = self.host

        host_key_fingerprints = self.host_key_fingerprints

        hostname = self.hostname

        node_id = str(self.node_id)

        state = self.state.value

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

        ssh: None | str | Unset
        if isinstance(self.ssh, Unset):
            ssh = UNSET
        else:
            ssh = self.ssh

        updated_at: None | str | Unset
        if isinstance(self.updated_at, Unset):
            updated_at = UNSET
        elif isinstance(self.updated_at, datetime.datetime):
            updated_at = self.updated_at.isoformat()
        else:
            updated_at = self.updated_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "host": host,
                "host_key_fingerprints": host_key_fingerprints,
                "hostname": hostname,
                "node_id": node_id,
                "state": state,
            }
        )
        if port is not UNSET:
            field_dict["port"] = port
        if reason is not UNSET:
            field_dict["reason"] = reason
        if ssh is not UNSET:
            field_dict["ssh"] = ssh
        if updated_at is not UNSET:
            field_dict["updated_at"] = updated_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        host = d.pop("host")

        host_key_fingerprints = cast(list[str], d.pop("host_key_fingerprints"))

        hostname = d.pop("hostname")

        node_id = UUID(d.pop("node_id"))

        state = EnvironmentState(d.pop("state"))

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

        def _parse_ssh(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        ssh = _parse_ssh(d.pop("ssh", UNSET))

        def _parse_updated_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                updated_at_type_0 = datetime.datetime.fromisoformat(data)

                return updated_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        updated_at = _parse_updated_at(d.pop("updated_at", UNSET))

        environment_node = cls(
            host=host,
            host_key_fingerprints=host_key_fingerprints,
            hostname=hostname,
            node_id=node_id,
            state=state,
            port=port,
            reason=reason,
            ssh=ssh,
            updated_at=updated_at,
        )

        environment_node.additional_properties = d
        return environment_node

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
