from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="PeerLatency")


@_attrs_define
class PeerLatency:
    """Round trips from this node to one other node of a lease (UDP echo probes).

    Attributes:
        lease_id (UUID):
        p50_us (int): Median round trip, microseconds.
        p99_us (int): 99th percentile round trip, microseconds (at least `p50_us`).
        peer_node_id (UUID): The other node.
        probes (int): Probes answered. 0 when every probe was lost (`lost` at least 1, `p50_us` and `p99_us` 0): the
            peer is
            unreachable.
        lost (int | Unset): Probes without an answer in time.
    """

    lease_id: UUID
    p50_us: int
    p99_us: int
    peer_node_id: UUID
    probes: int
    lost: int | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        lease_id = str(self.lease_id)

        p50_us = self.p50_us

        p99_us = self.p99_us

        peer_node_id = str(self.peer_node_id)

        probes = self.probes

        lost = self.lost

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "lease_id": lease_id,
                "p50_us": p50_us,
                "p99_us": p99_us,
                "peer_node_id": peer_node_id,
                "probes": probes,
            }
        )
        if lost is not UNSET:
            field_dict["lost"] = lost

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        lease_id = UUID(d.pop("lease_id"))

        p50_us = d.pop("p50_us")

        p99_us = d.pop("p99_us")

        peer_node_id = UUID(d.pop("peer_node_id"))

        probes = d.pop("probes")

        lost = d.pop("lost", UNSET)

        peer_latency = cls(
            lease_id=lease_id,
            p50_us=p50_us,
            p99_us=p99_us,
            peer_node_id=peer_node_id,
            probes=probes,
            lost=lost,
        )

        return peer_latency
