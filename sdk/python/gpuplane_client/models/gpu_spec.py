from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.link_kind import LinkKind
from ..types import UNSET, Unset

T = TypeVar("T", bound="GpuSpec")


@_attrs_define
class GpuSpec:
    """One GPU model. Bandwidths in GB/s (decimal), throughput in dense TFLOP/s.

    Attributes:
        bf16_tflops (float): Dense BF16/FP16 tensor TFLOP/s (FP32 accumulate).
        key (str):
        link (LinkKind): GPU-to-GPU link inside a node.
        link_gb_s (float): Intra-node GPU-GPU bandwidth, GB/s (NVLink total, or PCIe one direction).
        mem_bandwidth_gb_s (float): HBM/GDDR bandwidth, GB/s.
        memory_bytes (int): Memory as labelled, in bytes (decimal GB).
        name (str):
        fp8_tflops (float | None | Unset): Dense FP8 tensor TFLOP/s, if the GPU has FP8 tensor cores.
    """

    bf16_tflops: float
    key: str
    link: LinkKind
    link_gb_s: float
    mem_bandwidth_gb_s: float
    memory_bytes: int
    name: str
    fp8_tflops: float | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        bf16_tflops = self.bf16_tflops

        key = self.key

        link = self.link.value

        link_gb_s = self.link_gb_s

        mem_bandwidth_gb_s = self.mem_bandwidth_gb_s

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
                "key": key,
                "link": link,
                "link_gb_s": link_gb_s,
                "mem_bandwidth_gb_s": mem_bandwidth_gb_s,
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

        key = d.pop("key")

        link = LinkKind(d.pop("link"))

        link_gb_s = d.pop("link_gb_s")

        mem_bandwidth_gb_s = d.pop("mem_bandwidth_gb_s")

        memory_bytes = d.pop("memory_bytes")

        name = d.pop("name")

        def _parse_fp8_tflops(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        fp8_tflops = _parse_fp8_tflops(d.pop("fp8_tflops", UNSET))

        gpu_spec = cls(
            bf16_tflops=bf16_tflops,
            key=key,
            link=link,
            link_gb_s=link_gb_s,
            mem_bandwidth_gb_s=mem_bandwidth_gb_s,
            memory_bytes=memory_bytes,
            name=name,
            fp8_tflops=fp8_tflops,
        )

        return gpu_spec
