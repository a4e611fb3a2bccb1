from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="LeaseGpu")


@_attrs_define
class LeaseGpu:
    """A GPU held by a lease, with where to reach it.

    Attributes:
        address (str):
        external (bool): On an external node (created so by the operator): no gpuplane agent runs there, so no jobs run
            on this
            GPU and its liveness is not proven.
        gpu_id (UUID):
        hostname (str):
        index (int): Index on the node (CUDA_VISIBLE_DEVICES numbering).
        node_id (UUID):
        uuid (str):
    """

    address: str
    external: bool
    gpu_id: UUID
    hostname: str
    index: int
    node_id: UUID
    uuid: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        address = self.address

        external = self.external

        gpu_id = str(self.gpu_id)

        hostname = self.hostname

        index = self.index

        node_id = str(self.node_id)

        uuid = self.uuid

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "address": address,
                "external": external,
                "gpu_id": gpu_id,
                "hostname": hostname,
                "index": index,
                "node_id": node_id,
                "uuid": uuid,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        address = d.pop("address")

        external = d.pop("external")

        gpu_id = UUID(d.pop("gpu_id"))

        hostname = d.pop("hostname")

        index = d.pop("index")

        node_id = UUID(d.pop("node_id"))

        uuid = d.pop("uuid")

        lease_gpu = cls(
            address=address,
            external=external,
            gpu_id=gpu_id,
            hostname=hostname,
            index=index,
            node_id=node_id,
            uuid=uuid,
        )

        lease_gpu.additional_properties = d
        return lease_gpu

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
