from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.lease_peer import LeasePeer
    from ..models.lease_volume import LeaseVolume


T = TypeVar("T", bound="NodeLease")


@_attrs_define
class NodeLease:
    """A lease's part of one node.

    Attributes:
        gpu_indices (list[int]): The node's GPU indices the lease holds, ascending.
        lease_id (UUID):
        peers (list[LeasePeer] | Unset): The lease's other nodes, whose round trips this node measures (empty for a
            single-node lease).
        volumes (list[LeaseVolume] | Unset): The tenant's volumes attached to the lease: every process of the lease on
            this node sees each at
            `/volumes/<mount>`.
    """

    gpu_indices: list[int]
    lease_id: UUID
    peers: list[LeasePeer] | Unset = UNSET
    volumes: list[LeaseVolume] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        gpu_indices = self.gpu_indices

        lease_id = str(self.lease_id)

        peers: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.peers, Unset):
            peers = []
            for peers_item_data in self.peers:
                peers_item = peers_item_data.to_dict()
                peers.append(peers_item)

        volumes: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.volumes, Unset):
            volumes = []
            for volumes_item_data in self.volumes:
                volumes_item = volumes_item_data.to_dict()
                volumes.append(volumes_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "gpu_indices": gpu_indices,
                "lease_id": lease_id,
            }
        )
        if peers is not UNSET:
            field_dict["peers"] = peers
        if volumes is not UNSET:
            field_dict["volumes"] = volumes

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.lease_peer import LeasePeer
        from ..models.lease_volume import LeaseVolume

        d = dict(src_dict)
        gpu_indices = cast(list[int], d.pop("gpu_indices"))

        lease_id = UUID(d.pop("lease_id"))

        _peers = d.pop("peers", UNSET)
        peers: list[LeasePeer] | Unset = UNSET
        if _peers is not UNSET:
            peers = []
            for peers_item_data in _peers:
                peers_item = LeasePeer.from_dict(peers_item_data)

                peers.append(peers_item)

        _volumes = d.pop("volumes", UNSET)
        volumes: list[LeaseVolume] | Unset = UNSET
        if _volumes is not UNSET:
            volumes = []
            for volumes_item_data in _volumes:
                volumes_item = LeaseVolume.from_dict(volumes_item_data)

                volumes.append(volumes_item)

        node_lease = cls(
            gpu_indices=gpu_indices,
            lease_id=lease_id,
            peers=peers,
            volumes=volumes,
        )

        node_lease.additional_properties = d
        return node_lease

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
