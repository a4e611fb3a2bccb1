from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="GpuModel")


@_attrs_define
class GpuModel:
    """A GPU model's datasheet facts (dense tensor throughput, no sparsity).

    Example:
        {'bf16_tflops': 989.0, 'fp8_tflops': 1979.0, 'gpu_link': 'nvlink4', 'gpu_link_gbps': 900, 'host_link': 'pcie5',
            'key': 'h100', 'memory_bandwidth_gbps': 3350, 'memory_bytes': 80000000000, 'name': 'H100 SXM'}

    Attributes:
        bf16_tflops (float): Dense BF16/FP16 tensor TFLOP/s.
        gpu_link (str): GPU-to-GPU link: `none`, `nvlink3`, `nvlink4` or `nvlink5`.
        gpu_link_gbps (int): GPU-to-GPU bandwidth per GPU, GB/s (0 without a link).
        host_link (str): Host link: `pcie3`, `pcie4` or `pcie5`.
        key (str): Catalog key, e.g. `h100`, `rtx4090`.
        memory_bandwidth_gbps (int): Memory bandwidth, GB/s.
        memory_bytes (int):
        name (str):
        fp8_tflops (float | None | Unset): Dense FP8 tensor TFLOP/s; absent when the GPU has no FP8 tensor cores.
    """

    bf16_tflops: float
    gpu_link: str
    gpu_link_gbps: int
    host_link: str
    key: str
    memory_bandwidth_gbps: int
    memory_bytes: int
    name: str
    fp8_tflops: float | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        bf16_tflops = self.bf16_tflops

        gpu_link = self.gpu_link

        gpu_link_gbps = self.gpu_link_gbps

        host_link = self.host_link

        key = self.key

        memory_bandwidth_gbps = self.memory_bandwidth_gbps

        memory_bytes = self.memory_bytes

        name = self.name

        fp8_tflops: float | None | Unset
        if isinstance(self.fp8_tflops, Unset):
            fp8_tflops = UNSET
        else:
            fp8_tflops = self.fp8_tflops

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "bf16_tflops": bf16_tflops,
                "gpu_link": gpu_link,
                "gpu_link_gbps": gpu_link_gbps,
                "host_link": host_link,
                "key": key,
                "memory_bandwidth_gbps": memory_bandwidth_gbps,
                "memory_bytes": memory_bytes,
                "name": name,
            }
        )
        if fp8_tflops is not UNSET:
            field_dict["fp8_tflops"] = fp8_tflops

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        bf16_tflops = d.pop("bf16_tflops")

        gpu_link = d.pop("gpu_link")

        gpu_link_gbps = d.pop("gpu_link_gbps")

        host_link = d.pop("host_link")

        key = d.pop("key")

        memory_bandwidth_gbps = d.pop("memory_bandwidth_gbps")

        memory_bytes = d.pop("memory_bytes")

        name = d.pop("name")

        def _parse_fp8_tflops(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        fp8_tflops = _parse_fp8_tflops(d.pop("fp8_tflops", UNSET))

        gpu_model = cls(
            bf16_tflops=bf16_tflops,
            gpu_link=gpu_link,
            gpu_link_gbps=gpu_link_gbps,
            host_link=host_link,
            key=key,
            memory_bandwidth_gbps=memory_bandwidth_gbps,
            memory_bytes=memory_bytes,
            name=name,
            fp8_tflops=fp8_tflops,
        )

        return gpu_model
