from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="GpuFacts")


@_attrs_define
class GpuFacts:
    """One GPU as the node's driver reports it.

    Attributes:
        index (int): Index as CUDA_VISIBLE_DEVICES counts (0-63).
        memory_bytes (int): Total framebuffer memory, bytes.
        name (str): NVML name, e.g. `NVIDIA H100 80GB HBM3`.
        uuid (str): NVML UUID, e.g. `GPU-5a1c...`.
    """

    index: int
    memory_bytes: int
    name: str
    uuid: str

    def to_dict(self) -> dict[str, Any]:
        index = self.index

        memory_bytes = self.memory_bytes

        name = self.name

        uuid = self.uuid

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "index": index,
                "memory_bytes": memory_bytes,
                "name": name,
                "uuid": uuid,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        index = d.pop("index")

        memory_bytes = d.pop("memory_bytes")

        name = d.pop("name")

        uuid = d.pop("uuid")

        gpu_facts = cls(
            index=index,
            memory_bytes=memory_bytes,
            name=name,
            uuid=uuid,
        )

        return gpu_facts
