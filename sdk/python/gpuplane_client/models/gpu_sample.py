from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="GpuSample")


@_attrs_define
class GpuSample:
    """One GPU's telemetry at one instant, named after the NVIDIA DCGM fields it carries.

    Attributes:
        at (datetime.datetime): When the sample was taken (UTC).
        energy_mj (int): DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, millijoules since driver load (a counter).
        fb_free_mib (int): DCGM_FI_DEV_FB_FREE, MiB.
        fb_used_mib (int): DCGM_FI_DEV_FB_USED, MiB.
        gpu_index (int):
        gpu_temp_c (float): DCGM_FI_DEV_GPU_TEMP, Celsius.
        gpu_util (float): DCGM_FI_DEV_GPU_UTIL, percent.
        mem_copy_util (float): DCGM_FI_DEV_MEM_COPY_UTIL, percent.
        power_w (float): DCGM_FI_DEV_POWER_USAGE, watts.
        sm_clock_mhz (int): DCGM_FI_DEV_SM_CLOCK, MHz.
        mem_temp_c (float | None | Unset): DCGM_FI_DEV_MEMORY_TEMP, Celsius (not every GPU reports it).
        nvlink_bandwidth_gbps (float | None | Unset): DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL, GB/s (absent without NVLink).
        xid_codes (list[int] | Unset): The XID codes seen since the previous sample.
        xid_count (int | Unset): Number of XID events since the previous sample (DCGM_FI_DEV_XID_ERRORS keeps only the
            last one).
    """

    at: datetime.datetime
    energy_mj: int
    fb_free_mib: int
    fb_used_mib: int
    gpu_index: int
    gpu_temp_c: float
    gpu_util: float
    mem_copy_util: float
    power_w: float
    sm_clock_mhz: int
    mem_temp_c: float | None | Unset = UNSET
    nvlink_bandwidth_gbps: float | None | Unset = UNSET
    xid_codes: list[int] | Unset = UNSET
    xid_count: int | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        at = self.at.isoformat()

        energy_mj = self.energy_mj

        fb_free_mib = self.fb_free_mib

        fb_used_mib = self.fb_used_mib

        gpu_index = self.gpu_index

        gpu_temp_c = self.gpu_temp_c

        gpu_util = self.gpu_util

        mem_copy_util = self.mem_copy_util

        power_w = self.power_w

        sm_clock_mhz = self.sm_clock_mhz

        mem_temp_c: float | None | Unset
        if isinstance(self.mem_temp_c, Unset):
            mem_temp_c = UNSET
        else:
            mem_temp_c = self.mem_temp_c

        nvlink_bandwidth_gbps: float | None | Unset
        if isinstance(self.nvlink_bandwidth_gbps, Unset):
            nvlink_bandwidth_gbps = UNSET
        else:
            nvlink_bandwidth_gbps = self.nvlink_bandwidth_gbps

        xid_codes: list[int] | Unset = UNSET
        if not isinstance(self.xid_codes, Unset):
            xid_codes = self.xid_codes

        xid_count = self.xid_count

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "at": at,
                "energy_mj": energy_mj,
                "fb_free_mib": fb_free_mib,
                "fb_used_mib": fb_used_mib,
                "gpu_index": gpu_index,
                "gpu_temp_c": gpu_temp_c,
                "gpu_util": gpu_util,
                "mem_copy_util": mem_copy_util,
                "power_w": power_w,
                "sm_clock_mhz": sm_clock_mhz,
            }
        )
        if mem_temp_c is not UNSET:
            field_dict["mem_temp_c"] = mem_temp_c
        if nvlink_bandwidth_gbps is not UNSET:
            field_dict["nvlink_bandwidth_gbps"] = nvlink_bandwidth_gbps
        if xid_codes is not UNSET:
            field_dict["xid_codes"] = xid_codes
        if xid_count is not UNSET:
            field_dict["xid_count"] = xid_count

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        at = datetime.datetime.fromisoformat(d.pop("at"))

        energy_mj = d.pop("energy_mj")

        fb_free_mib = d.pop("fb_free_mib")

        fb_used_mib = d.pop("fb_used_mib")

        gpu_index = d.pop("gpu_index")

        gpu_temp_c = d.pop("gpu_temp_c")

        gpu_util = d.pop("gpu_util")

        mem_copy_util = d.pop("mem_copy_util")

        power_w = d.pop("power_w")

        sm_clock_mhz = d.pop("sm_clock_mhz")

        def _parse_mem_temp_c(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        mem_temp_c = _parse_mem_temp_c(d.pop("mem_temp_c", UNSET))

        def _parse_nvlink_bandwidth_gbps(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        nvlink_bandwidth_gbps = _parse_nvlink_bandwidth_gbps(
            d.pop("nvlink_bandwidth_gbps", UNSET)
        )

        xid_codes = cast(list[int], d.pop("xid_codes", UNSET))

        xid_count = d.pop("xid_count", UNSET)

        gpu_sample = cls(
            at=at,
            energy_mj=energy_mj,
            fb_free_mib=fb_free_mib,
            fb_used_mib=fb_used_mib,
            gpu_index=gpu_index,
            gpu_temp_c=gpu_temp_c,
            gpu_util=gpu_util,
            mem_copy_util=mem_copy_util,
            power_w=power_w,
            sm_clock_mhz=sm_clock_mhz,
            mem_temp_c=mem_temp_c,
            nvlink_bandwidth_gbps=nvlink_bandwidth_gbps,
            xid_codes=xid_codes,
            xid_count=xid_count,
        )

        return gpu_sample
