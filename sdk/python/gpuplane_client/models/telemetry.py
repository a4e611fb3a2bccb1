from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.gpu_series import GpuSeries


T = TypeVar("T", bound="Telemetry")


@_attrs_define
class Telemetry:
    """
    Attributes:
        from_ (datetime.datetime):
        gpus (list[GpuSeries]):
        step_s (int):
        to (datetime.datetime):
        avg_gpu_util (float | None | Unset): Mean GPU utilization over every sample in range (absent without samples).
    """

    from_: datetime.datetime
    gpus: list[GpuSeries]
    step_s: int
    to: datetime.datetime
    avg_gpu_util: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from_ = self.from_.isoformat()

        gpus = []
        for gpus_item_data in self.gpus:
            gpus_item = gpus_item_data.to_dict()
            gpus.append(gpus_item)

        step_s = self.step_s

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
                "gpus": gpus,
                "step_s": step_s,
                "to": to,
            }
        )
        if avg_gpu_util is not UNSET:
            field_dict["avg_gpu_util"] = avg_gpu_util

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.gpu_series import GpuSeries

        d = dict(src_dict)
        from_ = datetime.datetime.fromisoformat(d.pop("from"))

        gpus = []
        _gpus = d.pop("gpus")
        for gpus_item_data in _gpus:
            gpus_item = GpuSeries.from_dict(gpus_item_data)

            gpus.append(gpus_item)

        step_s = d.pop("step_s")

        to = datetime.datetime.fromisoformat(d.pop("to"))

        def _parse_avg_gpu_util(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        avg_gpu_util = _parse_avg_gpu_util(d.pop("avg_gpu_util", UNSET))

        telemetry = cls(
            from_=from_,
            gpus=gpus,
            step_s=step_s,
            to=to,
            avg_gpu_util=avg_gpu_util,
        )

        telemetry.additional_properties = d
        return telemetry

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
