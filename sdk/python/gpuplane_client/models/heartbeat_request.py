from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.gpu_sample import GpuSample


T = TypeVar("T", bound="HeartbeatRequest")


@_attrs_define
class HeartbeatRequest:
    """
    Attributes:
        samples (list[GpuSample]): Samples since the last delivered heartbeat; after an outage, everything buffered
            (oldest first).
    """

    samples: list[GpuSample]

    def to_dict(self) -> dict[str, Any]:
        samples = []
        for samples_item_data in self.samples:
            samples_item = samples_item_data.to_dict()
            samples.append(samples_item)

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "samples": samples,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.gpu_sample import GpuSample

        d = dict(src_dict)
        samples = []
        _samples = d.pop("samples")
        for samples_item_data in _samples:
            samples_item = GpuSample.from_dict(samples_item_data)

            samples.append(samples_item)

        heartbeat_request = cls(
            samples=samples,
        )

        return heartbeat_request
