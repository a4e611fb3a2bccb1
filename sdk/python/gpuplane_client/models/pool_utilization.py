from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.node_utilization import NodeUtilization


T = TypeVar("T", bound="PoolUtilization")


@_attrs_define
class PoolUtilization:
    """
    Attributes:
        from_ (datetime.datetime):
        nodes (list[NodeUtilization]):
        pool_id (UUID):
        samples (int):
        to (datetime.datetime):
        avg_gpu_util (float | None | Unset):
    """

    from_: datetime.datetime
    nodes: list[NodeUtilization]
    pool_id: UUID
    samples: int
    to: datetime.datetime
    avg_gpu_util: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from_ = self.from_.isoformat()

        nodes = []
        for nodes_item_data in self.nodes:
            nodes_item = nodes_item_data.to_dict()
            nodes.append(nodes_item)

        pool_id = str(self.pool_id)

        samples = self.samples

        to = self.to.isoformat()

        avg_gpu_util: float | None | Unset
        if isinstance(self.avg_gpu_util, Unset):
            avg_gpu_util = UNSET
        else:
            avg_gpu_util = self.avg_gpu_util

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "from": from_,
                "nodes": nodes,
                "pool_id": pool_id,
                "samples": samples,
                "to": to,
            }
        )
        if avg_gpu_util is not UNSET:
            field_dict["avg_gpu_util"] = avg_gpu_util

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.node_utilization import NodeUtilization

        d = dict(src_dict)
        from_ = datetime.datetime.fromisoformat(d.pop("from"))

        nodes = []
        _nodes = d.pop("nodes")
        for nodes_item_data in _nodes:
            nodes_item = NodeUtilization.from_dict(nodes_item_data)

            nodes.append(nodes_item)

        pool_id = UUID(d.pop("pool_id"))

        samples = d.pop("samples")

        to = datetime.datetime.fromisoformat(d.pop("to"))

        def _parse_avg_gpu_util(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        avg_gpu_util = _parse_avg_gpu_util(d.pop("avg_gpu_util", UNSET))

        pool_utilization = cls(
            from_=from_,
            nodes=nodes,
            pool_id=pool_id,
            samples=samples,
            to=to,
            avg_gpu_util=avg_gpu_util,
        )

        pool_utilization.additional_properties = d
        return pool_utilization

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
