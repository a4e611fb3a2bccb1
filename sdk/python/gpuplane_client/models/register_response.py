from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="RegisterResponse")


@_attrs_define
class RegisterResponse:
    """
    Attributes:
        agent_token (str): Credential for `/v1/agent/*` (Bearer). Re-registering the same host rotates it.
        heartbeat_interval_s (int): Seconds between heartbeats.
        node_id (UUID):
        pool_id (UUID):
    """

    agent_token: str
    heartbeat_interval_s: int
    node_id: UUID
    pool_id: UUID
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        agent_token = self.agent_token

        heartbeat_interval_s = self.heartbeat_interval_s

        node_id = str(self.node_id)

        pool_id = str(self.pool_id)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "agent_token": agent_token,
                "heartbeat_interval_s": heartbeat_interval_s,
                "node_id": node_id,
                "pool_id": pool_id,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        agent_token = d.pop("agent_token")

        heartbeat_interval_s = d.pop("heartbeat_interval_s")

        node_id = UUID(d.pop("node_id"))

        pool_id = UUID(d.pop("pool_id"))

        register_response = cls(
            agent_token=agent_token,
            heartbeat_interval_s=heartbeat_interval_s,
            node_id=node_id,
            pool_id=pool_id,
        )

        register_response.additional_properties = d
        return register_response

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
