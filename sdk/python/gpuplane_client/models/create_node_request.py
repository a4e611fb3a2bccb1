from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..models.intra_link import IntraLink
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.new_gpu import NewGpu


T = TypeVar("T", bound="CreateNodeRequest")


@_attrs_define
class CreateNodeRequest:
    """
    Example:
        {'address': '10.0.0.11', 'gpus': [{'index': 0, 'uuid': 'GPU-0a1b2c3d-0000-0000-0000-000000000000'}, {'index': 1,
            'uuid': 'GPU-0a1b2c3d-0000-0000-0000-000000000001'}], 'hostname': 'gpu-node-01', 'intra_link': 'nvlink',
            'intra_link_gbps': 900, 'network_gbps': 400, 'pool_id': '0192f5a0-0000-7000-8000-000000000001', 'rdma': True}

    Attributes:
        address (str):
        gpus (list[NewGpu]):
        hostname (str):
        intra_link (IntraLink): Link between the GPUs inside a node.
        network_gbps (int): Gbit/s between nodes.
        pool_id (UUID):
        external (bool | Unset): A host no gpuplane agent will run on, leased as it is: it is `ready` at once, the
            platform runs no jobs
            there and cannot prove its liveness, its leases say so (`Lease.external`) and are billed from start to
            end. Without it (the default) the node is `awaiting_agent` and takes no leases until an agent registers
            its host name.
        intra_link_gbps (int | None | Unset): GB/s; defaults to the GPU model's link (NVLink) or PCIe 4.0 x16 (32 GB/s).
        rdma (bool | Unset):
    """

    address: str
    gpus: list[NewGpu]
    hostname: str
    intra_link: IntraLink
    network_gbps: int
    pool_id: UUID
    external: bool | Unset = UNSET
    intra_link_gbps: int | None | Unset = UNSET
    rdma: bool | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        address = self.address

        gpus = []
        for gpus_item_data in self.gpus:
            gpus_item = gpus_item_data.to_dict()
            gpus.append(gpus_item)

        hostname = self.hostname

        intra_link = self.intra_link.value

        network_gbps = self.network_gbps

        pool_id = str(self.pool_id)

        external = self.external

        intra_link_gbps: int | None | Unset
        if isinstance(self.intra_link_gbps, Unset):
            intra_link_gbps = UNSET
        else:
            intra_link_gbps = self.intra_link_gbps

        rdma = self.rdma

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "address": address,
                "gpus": gpus,
                "hostname": hostname,
                "intra_link": intra_link,
                "network_gbps": network_gbps,
                "pool_id": pool_id,
            }
        )
        if external is not UNSET:
            field_dict["external"] = external
        if intra_link_gbps is not UNSET:
            field_dict["intra_link_gbps"] = intra_link_gbps
        if rdma is not UNSET:
            field_dict["rdma"] = rdma

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.new_gpu import NewGpu

        d = dict(src_dict)
        address = d.pop("address")

        gpus = []
        _gpus = d.pop("gpus")
        for gpus_item_data in _gpus:
            gpus_item = NewGpu.from_dict(gpus_item_data)

            gpus.append(gpus_item)

        hostname = d.pop("hostname")

        intra_link = IntraLink(d.pop("intra_link"))

        network_gbps = d.pop("network_gbps")

        pool_id = UUID(d.pop("pool_id"))

        external = d.pop("external", UNSET)

        def _parse_intra_link_gbps(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        intra_link_gbps = _parse_intra_link_gbps(d.pop("intra_link_gbps", UNSET))

        rdma = d.pop("rdma", UNSET)

        create_node_request = cls(
            address=address,
            gpus=gpus,
            hostname=hostname,
            intra_link=intra_link,
            network_gbps=network_gbps,
            pool_id=pool_id,
            external=external,
            intra_link_gbps=intra_link_gbps,
            rdma=rdma,
        )

        return create_node_request
