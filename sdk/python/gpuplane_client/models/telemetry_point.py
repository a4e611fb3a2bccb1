from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="TelemetryPoint")


@_attrs_define
class TelemetryPoint:
    """One bucket of one GPU.

    Attributes:
        fb_used_mib (int): Peak framebuffer used, MiB.
        gpu_temp_c (float): Peak GPU temperature, Celsius.
        gpu_util (float): Mean DCGM_FI_DEV_GPU_UTIL, percent.
        mem_copy_util (float): Mean DCGM_FI_DEV_MEM_COPY_UTIL, percent.
        power_w (float): Mean power, watts.
        samples (int): Samples in the bucket.
        sm_clock_mhz (float): Mean SM clock, MHz.
        t (datetime.datetime): Bucket start.
        xid_count (int): XID events in the bucket.
    """

    fb_used_mib: int
    gpu_temp_c: float
    gpu_util: float
    mem_copy_util: float
    power_w: float
    samples: int
    sm_clock_mhz: float
    t: datetime.datetime
    xid_count: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        fb_used_mib = self.fb_used_mib

        gpu_temp_c = self.gpu_temp_c

        gpu_util = self.gpu_util

        mem_copy_util = self.mem_copy_util

        power_w = self.power_w

        samples = self.samples

        sm_clock_mhz = self.sm_clock_mhz

        t = self.t.isoformat()

        xid_count = self.xid_count

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "fb_used_mib": fb_used_mib,
                "gpu_temp_c": gpu_temp_c,
                "gpu_util": gpu_util,
                "mem_copy_util": mem_copy_util,
                "power_w": power_w,
                "samples": samples,
                "sm_clock_mhz": sm_clock_mhz,
                "t": t,
                "xid_count": xid_count,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        fb_used_mib = d.pop("fb_used_mib")

        gpu_temp_c = d.pop("gpu_temp_c")

        gpu_util = d.pop("gpu_util")

        mem_copy_util = d.pop("mem_copy_util")

        power_w = d.pop("power_w")

        samples = d.pop("samples")

        sm_clock_mhz = d.pop("sm_clock_mhz")

        t = datetime.datetime.fromisoformat(d.pop("t"))

        xid_count = d.pop("xid_count")

        telemetry_point = cls(
            fb_used_mib=fb_used_mib,
            gpu_temp_c=gpu_temp_c,
            gpu_util=gpu_util,
            mem_copy_util=mem_copy_util,
            power_w=power_w,
            samples=samples,
            sm_clock_mhz=sm_clock_mhz,
            t=t,
            xid_count=xid_count,
        )

        telemetry_point.additional_properties = d
        return telemetry_point

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
