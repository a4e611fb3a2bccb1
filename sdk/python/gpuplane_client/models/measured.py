from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="Measured")


@_attrs_define
class Measured:
    """What was measured on a lease's GPUs over a window (for a job: since the job started).

    Attributes:
        gpus (int): The lease's GPUs.
        gpus_reporting (int): The lease's GPUs with samples in the window.
        running_for_s (int): How long the job has been running.
        samples (int): Samples behind the mean.
        window_s (int): The window actually covered: the last 5 minutes, or since the job started if that is later.
        avg_gpu_util (float | None | Unset): Mean DCGM_FI_DEV_GPU_UTIL over the window, percent (absent without
            samples).
        busiest_gpu_util (float | None | Unset): The busiest GPU's mean utilization over the window, percent (absent
            without samples).
    """

    gpus: int
    gpus_reporting: int
    running_for_s: int
    samples: int
    window_s: int
    avg_gpu_util: float | None | Unset = UNSET
    busiest_gpu_util: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        gpus = self.gpus

        gpus_reporting = self.gpus_reporting

        running_for_s = self.running_for_s

        samples = self.samples

        window_s = self.window_s

        avg_gpu_util: float | None | Unset
        if isinstance(self.avg_gpu_util, Unset):
            avg_gpu_util = UNSET
        else:
            avg_gpu_util = self.avg_gpu_util

        busiest_gpu_util: float | None | Unset
        if isinstance(self.busiest_gpu_util, Unset):
            busiest_gpu_util = UNSET
        else:
            busiest_gpu_util = self.busiest_gpu_util

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "gpus": gpus,
                "gpus_reporting": gpus_reporting,
                "running_for_s": running_for_s,
                "samples": samples,
                "window_s": window_s,
            }
        )
        if avg_gpu_util is not UNSET:
            field_dict["avg_gpu_util"] = avg_gpu_util
        if busiest_gpu_util is not UNSET:
            field_dict["busiest_gpu_util"] = busiest_gpu_util

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        gpus = d.pop("gpus")

        gpus_reporting = d.pop("gpus_reporting")

        running_for_s = d.pop("running_for_s")

        samples = d.pop("samples")

        window_s = d.pop("window_s")

        def _parse_avg_gpu_util(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        avg_gpu_util = _parse_avg_gpu_util(d.pop("avg_gpu_util", UNSET))

        def _parse_busiest_gpu_util(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        busiest_gpu_util = _parse_busiest_gpu_util(d.pop("busiest_gpu_util", UNSET))

        measured = cls(
            gpus=gpus,
            gpus_reporting=gpus_reporting,
            running_for_s=running_for_s,
            samples=samples,
            window_s=window_s,
            avg_gpu_util=avg_gpu_util,
            busiest_gpu_util=busiest_gpu_util,
        )

        measured.additional_properties = d
        return measured

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
