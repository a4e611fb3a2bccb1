from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="LeasePeer")


@_attrs_define
class LeasePeer:
    """Another node of the same lease, and where its agent answers echo probes.

    Attributes:
        address (str):
        node_id (UUID):
        echo_port (int | None | Unset): UDP echo port; absent when that node's agent runs no echo listener.
        lease_address (None | str | Unset): The lease's own address on that node (its network namespace there), routed
            through `address`; absent
            when that node runs jobs on its own network.
    """

    address: str
    node_id: UUID
    echo_port: int | None | Unset = UNSET
    lease_address: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        address = self.address

        node_id = str(self.node_id)

        echo_port: int | None | Unset
        if isinstance(self.echo_port, Unset):
            echo_port = UNSET
        else:
            echo_port = self.echo_port

        lease_address: None | str | Unset
        if isinstance(self.lease_address, Unset):
            lease_address = UNSET
        else:
            lease_address = self.lease_address

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "address": address,
                "node_id": node_id,
            }
        )
        if echo_port is not UNSET:
            field_dict["echo_port"] = echo_port
        if lease_address is not UNSET:
            field_dict["lease_address"] = lease_address

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        address = d.pop("address")

        node_id = UUID(d.pop("node_id"))

        def _parse_echo_port(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        echo_port = _parse_echo_port(d.pop("echo_port", UNSET))

        def _parse_lease_address(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        lease_address = _parse_lease_address(d.pop("lease_address", UNSET))

        lease_peer = cls(
            address=address,
            node_id=node_id,
            echo_port=echo_port,
            lease_address=lease_address,
        )

        lease_peer.additional_properties = d
        return lease_peer

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
