from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.intra_link import IntraLink
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.gpu_facts import GpuFacts
    from ..models.node_facts_launchers_type_0 import NodeFactsLaunchersType0


T = TypeVar("T", bound="NodeFacts")


@_attrs_define
class NodeFacts:
    """What a node agent tells the service about its host.

    Attributes:
        address (str): Address other nodes and tenants reach this host at.
        gpus (list[GpuFacts]):
        hostname (str):
        intra_link (IntraLink): Link between the GPUs inside a node.
        network_gbps (int): Inter-node network bandwidth, Gbit/s.
        cuda_version (None | str | Unset): CUDA version, e.g. `12.4`.
        driver_version (None | str | Unset): NVIDIA driver version, e.g. `550.54.15` (judged against the minimum: see
            `GET /v1/admin/nodes/{id}`).
        echo_port (int | None | Unset): UDP port of the agent's echo listener at `address`: the lease's other nodes
            probe round trips to it.
        intra_link_gbps (int | None | Unset): GPU-to-GPU bandwidth, GB/s, when known.
        launchers (NodeFactsLaunchersType0 | None | Unset): What this host can launch jobs with ([`LAUNCHERS`]): each
            one found, with its version when it tells one.
            Absent: not looked for (an older agent); the service then does not know what the host can run.
        lease_subnet (None | str | Unset): The IPv4 subnet this node gives its leases' network namespaces
            (`100.64.7.0/24`, a /16 to /24), routed
            to this node's `address` by the lease's other nodes. Absent: the node runs jobs on its own network
            (an agent with `--insecure-unsandboxed-jobs`, or an older agent). Example: 100.64.7.0/24.
        rdma (bool | Unset): Whether the inter-node network supports RDMA (InfiniBand/RoCE).
        topology (list[list[str]] | None | Unset): GPU-to-GPU topology matrix as `nvidia-smi topo -m` prints it (`X`,
            `NV18`, `PIX`, `PXB`, `NODE`, `SYS`),
            row and column i being GPU index i.
    """

    address: str
    gpus: list[GpuFacts]
    hostname: str
    intra_link: IntraLink
    network_gbps: int
    cuda_version: None | str | Unset = UNSET
    driver_version: None | str | Unset = UNSET
    echo_port: int | None | Unset = UNSET
    intra_link_gbps: int | None | Unset = UNSET
    launchers: NodeFactsLaunchersType0 | None | Unset = UNSET
    lease_subnet: None | str | Unset = UNSET
    rdma: bool | Unset = UNSET
    topology: list[list[str]] | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.node_facts_launchers_type_0 import NodeFactsLaunchersType0

        address = self.address

        gpus = []
        for gpus_item_data in self.gpus:
            gpus_item = gpus_item_data.to_dict()
            gpus.append(gpus_item)

        hostname = self.hostname

        intra_link = self.intra_link.value

        network_gbps = self.network_gbps

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

        intra_link_gbps: int | None | Unset
        if isinstance(self.intra_link_gbps, Unset):
            intra_link_gbps = UNSET
        else:
            intra_link_gbps = self.intra_link_gbps

        launchers: dict[str, Any] | None | Unset
        if isinstance(self.launchers, Unset):
            launchers = UNSET
        elif isinstance(self.launchers, NodeFactsLaunchersType0):
            launchers = self.launchers.to_dict()
        else:
            launchers = self.launchers

        lease_subnet: None | str | Unset
        if isinstance(self.lease_subnet, Unset):
            lease_subnet = UNSET
        else:
            lease_subnet = self.lease_subnet

        rdma = self.rdma

        topology: list[list[str]] | None | Unset
        if isinstance(self.topology, Unset):
            topology = UNSET
        elif isinstance(self.topology, list):
            topology = []
            for topology_type_0_item_data in self.topology:
                topology_type_0_item = topology_type_0_item_data

                topology.append(topology_type_0_item)

        else:
            topology = self.topology

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "address": address,
                "gpus": gpus,
                "hostname": hostname,
                "intra_link": intra_link,
                "network_gbps": network_gbps,
            }
        )
        if cuda_version is not UNSET:
            field_dict["cuda_version"] = cuda_version
        if driver_version is not UNSET:
            field_dict["driver_version"] = driver_version
        if echo_port is not UNSET:
            field_dict["echo_port"] = echo_port
        if intra_link_gbps is not UNSET:
            field_dict["intra_link_gbps"] = intra_link_gbps
        if launchers is not UNSET:
            field_dict["launchers"] = launchers
        if lease_subnet is not UNSET:
            field_dict["lease_subnet"] = lease_subnet
        if rdma is not UNSET:
            field_dict["rdma"] = rdma
        if topology is not UNSET:
            field_dict["topology"] = topology

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.gpu_facts import GpuFacts
        from ..models.node_facts_launchers_type_0 import NodeFactsLaunchersType0

        d = dict(src_dict)
        address = d.pop("address")

        gpus = []
        _gpus = d.pop("gpus")
        for gpus_item_data in _gpus:
            gpus_item = GpuFacts.from_dict(gpus_item_data)

            gpus.append(gpus_item)

        hostname = d.pop("hostname")

        intra_link = IntraLink(d.pop("intra_link"))

        network_gbps = d.pop("network_gbps")

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

        def _parse_intra_link_gbps(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        intra_link_gbps = _parse_intra_link_gbps(d.pop("intra_link_gbps", UNSET))

        def _parse_launchers(data: object) -> NodeFactsLaunchersType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                launchers_type_0 = NodeFactsLaunchersType0.from_dict(data)

                return launchers_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(NodeFactsLaunchersType0 | None | Unset, data)

        launchers = _parse_launchers(d.pop("launchers", UNSET))

        def _parse_lease_subnet(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        lease_subnet = _parse_lease_subnet(d.pop("lease_subnet", UNSET))

        rdma = d.pop("rdma", UNSET)

        def _parse_topology(data: object) -> list[list[str]] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                topology_type_0 = []
                _topology_type_0 = data
                for topology_type_0_item_data in _topology_type_0:
                    topology_type_0_item = cast(list[str], topology_type_0_item_data)

                    topology_type_0.append(topology_type_0_item)

                return topology_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[list[str]] | None | Unset, data)

        topology = _parse_topology(d.pop("topology", UNSET))

        node_facts = cls(
            address=address,
            gpus=gpus,
            hostname=hostname,
            intra_link=intra_link,
            network_gbps=network_gbps,
            cuda_version=cuda_version,
            driver_version=driver_version,
            echo_port=echo_port,
            intra_link_gbps=intra_link_gbps,
            launchers=launchers,
            lease_subnet=lease_subnet,
            rdma=rdma,
            topology=topology,
        )

        return node_facts
