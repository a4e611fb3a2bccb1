from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="PairLatency")


@_attrs_define
class PairLatency:
    """The latest round trips from one node of a lease to another.

    Attributes:
        lost (int): Probes lost in the reporting period.
        measured_at (datetime.datetime):
        node_hostname (str):
        node_id (UUID): The node that measured.
        p50_us (int): Median round trip, microseconds.
        p99_us (int): 99th percentile round trip, microseconds.
        peer_hostname (str):
        peer_node_id (UUID): The node it measured to.
        probes (int): Probes answered in the reporting period.
    """

    lost: int
    measured_at: datetime.datetime
    node_hostname: str
    node_id: UUID
    p50_us: int
    p99_us: int
    peer_hostname: str
    peer_node_id: UUID
    probes: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        lost = self.lost

        measured_at = self.measured_at.isoformat()

        node_hostname = self.node_hostname

        node_id = str(self.node_id)

        p50_us = self.p50_us

        p99_us = self.p99_us

        peer_hostname = self.peer_hostname

        peer_node_id = str(self.peer_node_id)

        probes = self.probes

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "lost": lost,
                "measured_at": measured_at,
                "node_hostname": node_hostname,
                "node_id": node_id,
                "p50_us": p50_us,
                "p99_us": p99_us,
                "peer_hostname": peer_hostname,
                "peer_node_id": peer_node_id,
                "probes": probes,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        lost = d.pop("lost")

        measured_at = datetime.datetime.fromisoformat(d.pop("measured_at"))

        node_hostname = d.pop("node_hostname")

        node_id = UUID(d.pop("node_id"))

        p50_us = d.pop("p50_us")

        p99_us = d.pop("p99_us")

        peer_hostname = d.pop("peer_hostname")

        peer_node_id = UUID(d.pop("peer_node_id"))

        probes = d.pop("probes")

        pair_latency = cls(
            lost=lost,
            measured_at=measured_at,
            node_hostname=node_hostname,
            node_id=node_id,
            p50_us=p50_us,
            p99_us=p99_us,
            peer_hostname=peer_hostname,
            peer_node_id=peer_node_id,
            probes=probes,
        )

        pair_latency.additional_properties = d
        return pair_latency

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
