from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.intra_link import IntraLink
from ..models.node_state import NodeState
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.gpu import Gpu
    from ..models.node_launchers_type_0 import NodeLaunchersType0


T = TypeVar("T", bound="Node")


@_attrs_define
class Node:
    """
    Attributes:
        address (str): Address other nodes and tenants reach it at (IP or DNS name).
        created_at (datetime.datetime):
        external (bool): Created as external by an operator: no agent runs on it, so the platform runs no jobs there and
            cannot
            prove its liveness; its leases say so (`Lease.external`) and are billed from start to end.
        gpus (list[Gpu]):
        hostname (str):
        id (UUID):
        intra_link (IntraLink): Link between the GPUs inside a node.
        intra_link_gbps (int): GPU-to-GPU bandwidth inside the node, GB/s.
        network_gbps (int): Inter-node network bandwidth, Gbit/s.
        pool_id (UUID):
        rdma (bool): Whether the inter-node network supports RDMA (InfiniBand/RoCE).
        state (NodeState): What the API shows: derived from the operator's `admin_state` and the agent's `liveness`.
        updated_at (datetime.datetime):
        cuda_version (None | str | Unset): CUDA version the agent reports, e.g. `12.4`.
        driver_version (None | str | Unset): NVIDIA driver version the agent reports, e.g. `550.54.15`.
        echo_port (int | None | Unset): UDP port of the agent's echo listener at `address` (round-trip probes between a
            lease's nodes).
        last_heartbeat_at (datetime.datetime | None | Unset):
        launchers (NodeLaunchersType0 | None | Unset): What its agent found on the host to launch jobs with (name ->
            version, null when the launcher tells no
            version); null when no agent reported them (no agent, or one older than this field).
        not_ready_reason (None | str | Unset): Why the node is (or, once back, will be) `not_ready`, e.g. `driver
            470.57.02 < 525.60.13`.
    """

    address: str
    created_at: datetime.datetime
    external: bool
    gpus: list[Gpu]
    hostname: str
    id: UUID
    intra_link: IntraLink
    intra_link_gbps: int
    network_gbps: int
    pool_id: UUID
    rdma: bool
    state: NodeState
    updated_at: datetime.datetime
    cuda_version: None | str | Unset = UNSET
    driver_version: None | str | Unset = UNSET
    echo_port: int | None | Unset = UNSET
    last_heartbeat_at: datetime.datetime | None | Unset = UNSET
    launchers: NodeLaunchersType0 | None | Unset = UNSET
    not_ready_reason: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.node_launchers_type_0 import NodeLaunchersType0

        address = self.address

        created_at = self.created_at.isoformat()

        external = self.external

        gpus = []
        for gpus_item_data in self.gpus:
            gpus_item = gpus_item_data.to_dict()
            gpus.append(gpus_item)

        hostname = self.hostname

        id = str(self.id)

        intra_link = self.intra_link.value

        intra_link_gbps = self.intra_link_gbps

        network_gbps = self.network_gbps

        pool_id = str(self.pool_id)

        rdma = self.rdma

        state = self.state.value

        updated_at = self.updated_at.isoformat()

        cuda_version: None | str | Unset
        if isinstance(self.cuda_version, Unset):
            cuda_version = UNSET
        else:
            cuda_version = self.cuda_version

        driver_version: None | str | Unset
        if isinstance(self.driver_version, Unset):
            driver_version = UNSET
        else:
            driver_version = self.driver_version

        echo_port: int | None | Unset
        if isinstance(self.echo_port, Unset):
            echo_port = UNSET
        else:
            echo_port = self.echo_port

        last_heartbeat_at: None | str | Unset
        if isinstance(self.last_heartbeat_at, Unset):
            last_heartbeat_at = UNSET
        elif isinstance(self.last_heartbeat_at, datetime.datetime):
            last_heartbeat_at = self.last_heartbeat_at.isoformat()
        else:
            last_heartbeat_at = self.last_heartbeat_at

        launchers: dict[str, Any] | None | Unset
        if isinstance(self.launchers, Unset):
            launchers = UNSET
        elif isinstance(self.launchers, NodeLaunchersType0):
            launchers = self.launchers.to_dict()
        else:
            launchers = self.launchers

        not_ready_reason: None | str | Unset
        if isinstance(self.not_ready_reason, Unset):
            not_ready_reason = UNSET
        else:
            not_ready_reason = self.not_ready_reason

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "address": address,
                "created_at": created_at,
                "external": external,
                "gpus": gpus,
                "hostname": hostname,
                "id": id,
                "intra_link": intra_link,
                "intra_link_gbps": intra_link_gbps,
                "network_gbps": network_gbps,
                "pool_id": pool_id,
                "rdma": rdma,
                "state": state,
                "updated_at": updated_at,
            }
        )
        if cuda_version is not UNSET:
            field_dict["cuda_version"] = cuda_version
        if driver_version is not UNSET:
            field_dict["driver_version"] = driver_version
        if echo_port is not UNSET:
            field_dict["echo_port"] = echo_port
        if last_heartbeat_at is not UNSET:
            field_dict["last_heartbeat_at"] = last_heartbeat_at
        if launchers is not UNSET:
            field_dict["launchers"] = launchers
        if not_ready_reason is not UNSET:
            field_dict["not_ready_reason"] = not_ready_reason

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.gpu import Gpu
        from ..models.node_launchers_type_0 import NodeLaunchersType0

        d = dict(src_dict)
        address = d.pop("address")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        external = d.pop("external")

        gpus = []
        _gpus = d.pop("gpus")
        for gpus_item_data in _gpus:
            gpus_item = Gpu.from_dict(gpus_item_data)

            gpus.append(gpus_item)

        hostname = d.pop("hostname")

        id = UUID(d.pop("id"))

        intra_link = IntraLink(d.pop("intra_link"))

        intra_link_gbps = d.pop("intra_link_gbps")

        network_gbps = d.pop("network_gbps")

        pool_id = UUID(d.pop("pool_id"))

        rdma = d.pop("rdma")

        state = NodeState(d.pop("state"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        def _parse_cuda_version(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        cuda_version = _parse_cuda_version(d.pop("cuda_version", UNSET))

        def _parse_driver_version(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        driver_version = _parse_driver_version(d.pop("driver_version", UNSET))

        def _parse_echo_port(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        echo_port = _parse_echo_port(d.pop("echo_port", UNSET))

        def _parse_last_heartbeat_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                last_heartbeat_at_type_0 = datetime.datetime.fromisoformat(data)

                return last_heartbeat_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        last_heartbeat_at = _parse_last_heartbeat_at(d.pop("last_heartbeat_at", UNSET))

        def _parse_launchers(data: object) -> NodeLaunchersType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                launchers_type_0 = NodeLaunchersType0.from_dict(data)

                return launchers_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(NodeLaunchersType0 | None | Unset, data)

        launchers = _parse_launchers(d.pop("launchers", UNSET))

        def _parse_not_ready_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        not_ready_reason = _parse_not_ready_reason(d.pop("not_ready_reason", UNSET))

        node = cls(
            address=address,
            created_at=created_at,
            external=external,
            gpus=gpus,
            hostname=hostname,
            id=id,
            intra_link=intra_link,
            intra_link_gbps=intra_link_gbps,
            network_gbps=network_gbps,
            pool_id=pool_id,
            rdma=rdma,
            state=state,
            updated_at=updated_at,
            cuda_version=cuda_version,
            driver_version=driver_version,
            echo_port=echo_port,
            last_heartbeat_at=last_heartbeat_at,
            launchers=launchers,
            not_ready_reason=not_ready_reason,
        )

        node.additional_properties = d
        return node

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
