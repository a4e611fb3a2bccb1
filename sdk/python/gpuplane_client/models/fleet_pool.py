from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="FleetPool")


@_attrs_define
class FleetPool:
    """One pool's nodes and GPUs, counted (`GET /v1/admin/fleet`). Free and leased GPUs are the pool's own
    figures (`GET /v1/pools`).

        Attributes:
            gpus (int): GPUs on the pool's nodes.
            gpus_unhealthy (int): GPUs marked unhealthy (after a fatal XID, until an operator restores them).
            nodes (int): Nodes in the pool, in any state.
            nodes_ready (int): Nodes in state `ready` (taking new leases).
            pool_id (UUID):
    """

    gpus: int
    gpus_unhealthy: int
    nodes: int
    nodes_ready: int
    pool_id: UUID
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        gpus = self.gpus

        gpus_unhealthy = self.gpus_unhealthy

        nodes = self.nodes

        nodes_ready = self.nodes_ready

        pool_id = str(self.pool_id)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "gpus": gpus,
                "gpus_unhealthy": gpus_unhealthy,
                "nodes": nodes,
                "nodes_ready": nodes_ready,
                "pool_id": pool_id,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        gpus = d.pop("gpus")

        gpus_unhealthy = d.pop("gpus_unhealthy")

        nodes = d.pop("nodes")

        nodes_ready = d.pop("nodes_ready")

        pool_id = UUID(d.pop("pool_id"))

        fleet_pool = cls(
            gpus=gpus,
            gpus_unhealthy=gpus_unhealthy,
            nodes=nodes,
            nodes_ready=nodes_ready,
            pool_id=pool_id,
        )

        fleet_pool.additional_properties = d
        return fleet_pool

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
