from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.node_facts import NodeFacts


T = TypeVar("T", bound="RegisterRequest")


@_attrs_define
class RegisterRequest:
    """
    Example:
        {'join_token': 'gpj_...', 'node': {'address': '10.0.0.11', 'cuda_version': '12.4', 'driver_version':
            '550.54.15', 'gpus': [{'index': 0, 'memory_bytes': 85520809984, 'name': 'NVIDIA H100 80GB HBM3', 'uuid':
            'GPU-0a1b2c3d-0000-0000-0000-000000000000'}], 'hostname': 'gpu-node-01', 'intra_link': 'nvlink', 'network_gbps':
            400, 'rdma': True}}

    Attributes:
        join_token (str): A join token minted by an operator for the pool this node joins.
        node (NodeFacts): What a node agent tells the service about its host.
    """

    join_token: str
    node: NodeFacts

    def to_dict(self) -> dict[str, Any]:
        join_token = self.join_token

        node = self.node.to_dict()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "join_token": join_token,
                "node": node,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.node_facts import NodeFacts

        d = dict(src_dict)
        join_token = d.pop("join_token")

        node = NodeFacts.from_dict(d.pop("node"))

        register_request = cls(
            join_token=join_token,
            node=node,
        )

        return register_request
