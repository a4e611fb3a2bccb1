from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.gpu_sample import GpuSample
    from ..models.job_step import JobStep
    from ..models.peer_latency import PeerLatency


T = TypeVar("T", bound="HeartbeatRequest")


@_attrs_define
class HeartbeatRequest:
    """
    Attributes:
        samples (list[GpuSample]): Samples since the last delivered heartbeat; after an outage, everything buffered
            (oldest first).
        cuda_version (None | str | Unset): The CUDA version now.
        driver_version (None | str | Unset): The NVIDIA driver version now (an upgraded host says so here without
            registering again).
        latency (list[PeerLatency] | Unset): Round trips measured since the last heartbeat to the other nodes of this
            node's multi-node leases.
        steps (list[JobStep] | Unset): Optimizer steps the gpuplane runtime measured in this node's jobs since the last
            delivered heartbeat,
            oldest first (buffered through outages like the samples). Only this node's own assignments are accepted.
    """

    samples: list[GpuSample]
    cuda_version: None | str | Unset = UNSET
    driver_version: None | str | Unset = UNSET
    latency: list[PeerLatency] | Unset = UNSET
    steps: list[JobStep] | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        samples = []
        for samples_item_data in self.samples:
            samples_item = samples_item_data.to_dict()
            samples.append(samples_item)

        cuda_version: None | str | Unset
        if isinstance(self.cuda_version, Unset):
            cuda_version = UNSET
        else:
            cuda_version = self.cuda_version

        driver_version: None | str | Unset
        if isinstance(self.driver_version, Unset):
            driver_version = UNSET
        else:
            driver_version = self.driver_version

        latency: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.latency, Unset):
            latency = []
            for latency_item_data in self.latency:
                latency_item = latency_item_data.to_dict()
                latency.append(latency_item)

        steps: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.steps, Unset):
            steps = []
            for steps_item_data in self.steps:
                steps_item = steps_item_data.to_dict()
                steps.append(steps_item)

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "samples": samples,
            }
        )
        if cuda_version is not UNSET:
            field_dict["cuda_version"] = cuda_version
        if driver_version is not UNSET:
            field_dict["driver_version"] = driver_version
        if latency is not UNSET:
            field_dict["latency"] = latency
        if steps is not UNSET:
            field_dict["steps"] = steps

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.gpu_sample import GpuSample
        from ..models.job_step import JobStep
        from ..models.peer_latency import PeerLatency

        d = dict(src_dict)
        samples = []
        _samples = d.pop("samples")
        for samples_item_data in _samples:
            samples_item = GpuSample.from_dict(samples_item_data)

            samples.append(samples_item)

        def _parse_cuda_version(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        cuda_version = _parse_cuda_version(d.pop("cuda_version", UNSET))

        def _parse_driver_version(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        driver_version = _parse_driver_version(d.pop("driver_version", UNSET))

        _latency = d.pop("latency", UNSET)
        latency: list[PeerLatency] | Unset = UNSET
        if _latency is not UNSET:
            latency = []
            for latency_item_data in _latency:
                latency_item = PeerLatency.from_dict(latency_item_data)

                latency.append(latency_item)

        _steps = d.pop("steps", UNSET)
        steps: list[JobStep] | Unset = UNSET
        if _steps is not UNSET:
            steps = []
            for steps_item_data in _steps:
                steps_item = JobStep.from_dict(steps_item_data)

                steps.append(steps_item)

        heartbeat_request = cls(
            samples=samples,
            cuda_version=cuda_version,
            driver_version=driver_version,
            latency=latency,
            steps=steps,
        )

        return heartbeat_request
