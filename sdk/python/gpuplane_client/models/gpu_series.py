from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.telemetry_point import TelemetryPoint


T = TypeVar("T", bound="GpuSeries")


@_attrs_define
class GpuSeries:
    """
    Attributes:
        gpu_id (UUID):
        hostname (str):
        index (int):
        node_id (UUID):
        points (list[TelemetryPoint]):
    """

    gpu_id: UUID
    hostname: str
    index: int
    node_id: UUID
    points: list[TelemetryPoint]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        gpu_id = str(self.gpu_id)

        hostname = self.hostname

        index = self.index

        node_id = str(self.node_id)

        points = []
        for points_item_data in self.points:
            points_item = points_item_data.to_dict()
            points.append(points_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "gpu_id": gpu_id,
                "hostname": hostname,
                "index": index,
                "node_id": node_id,
                "points": points,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.telemetry_point import TelemetryPoint

        d = dict(src_dict)
        gpu_id = UUID(d.pop("gpu_id"))

        hostname = d.pop("hostname")

        index = d.pop("index")

        node_id = UUID(d.pop("node_id"))

        points = []
        _points = d.pop("points")
        for points_item_data in _points:
            points_item = TelemetryPoint.from_dict(points_item_data)

            points.append(points_item)

        gpu_series = cls(
            gpu_id=gpu_id,
            hostname=hostname,
            index=index,
            node_id=node_id,
            points=points,
        )

        gpu_series.additional_properties = d
        return gpu_series

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
