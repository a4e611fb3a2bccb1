from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="NodeUtilization")


@_attrs_define
class NodeUtilization:
    """
    Attributes:
        hostname (str):
        node_id (UUID):
        samples (int):
        avg_gpu_util (float | None | Unset):
        avg_power_w (float | None | Unset):
    """

    hostname: str
    node_id: UUID
    samples: int
    avg_gpu_util: float | None | Unset = UNSET
    avg_power_w: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        hostname = self.hostname

        node_id = str(self.node_id)

        samples = self.samples

        avg_gpu_util: float | None | Unset
        if isinstance(self.avg_gpu_util, Unset):
            avg_gpu_util = UNSET
        else:
            avg_gpu_util = self.avg_gpu_util

        avg_power_w: float | None | Unset
        if isinstance(self.avg_power_w, Unset):
            avg_power_w = UNSET
        else:
            avg_power_w = self.avg_power_w

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "hostname": hostname,
                "node_id": node_id,
                "samples": samples,
            }
        )
        if avg_gpu_util is not UNSET:
            field_dict["avg_gpu_util"] = avg_gpu_util
        if avg_power_w is not UNSET:
            field_dict["avg_power_w"] = avg_power_w

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        hostname = d.pop("hostname")

        node_id = UUID(d.pop("node_id"))

        samples = d.pop("samples")

        def _parse_avg_gpu_util(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        avg_gpu_util = _parse_avg_gpu_util(d.pop("avg_gpu_util", UNSET))

        def _parse_avg_power_w(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        avg_power_w = _parse_avg_power_w(d.pop("avg_power_w", UNSET))

        node_utilization = cls(
            hostname=hostname,
            node_id=node_id,
            samples=samples,
            avg_gpu_util=avg_gpu_util,
            avg_power_w=avg_power_w,
        )

        node_utilization.additional_properties = d
        return node_utilization

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
