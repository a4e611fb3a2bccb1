from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define

T = TypeVar("T", bound="ServingReport")


@_attrs_define
class ServingReport:
    """A serving part's forwarder on this node, as the agent reports it with each heartbeat.

    Attributes:
        job_node_id (UUID):
        port (int): The host port the gateway connects to (on the node's address).
        ready (bool): The last health probe answered 2xx.
    """

    job_node_id: UUID
    port: int
    ready: bool

    def to_dict(self) -> dict[str, Any]:
        job_node_id = str(self.job_node_id)

        port = self.port

        ready = self.ready

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "job_node_id": job_node_id,
                "port": port,
                "ready": ready,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        job_node_id = UUID(d.pop("job_node_id"))

        port = d.pop("port")

        ready = d.pop("ready")

        serving_report = cls(
            job_node_id=job_node_id,
            port=port,
            ready=ready,
        )

        return serving_report
