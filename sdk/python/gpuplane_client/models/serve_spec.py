from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="ServeSpec")


@_attrs_define
class ServeSpec:
    """A replica's server as the agent sees it: where it listens in the lease's namespace, how it is probed, and the
    token the gateway presents to reach it.

        Attributes:
            health_path (str): Probed with `GET` every second; a 2xx answer makes the replica ready.
            port (int): The port the job's server listens on (on every address of the lease's namespace, e.g. `0.0.0.0`).
            token (str | Unset): What the gateway sends first on each connection to the agent's forwarder (`GPUPLANE-REPLICA
                <token>\\n`).
                Given with each assignment fetch, never stored; empty in a stored spec.
    """

    health_path: str
    port: int
    token: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        health_path = self.health_path

        port = self.port

        token = self.token

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "health_path": health_path,
                "port": port,
            }
        )
        if token is not UNSET:
            field_dict["token"] = token

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        health_path = d.pop("health_path")

        port = d.pop("port")

        token = d.pop("token", UNSET)

        serve_spec = cls(
            health_path=health_path,
            port=port,
            token=token,
        )

        serve_spec.additional_properties = d
        return serve_spec

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
