from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.gpu_sample import GpuSample
    from ..models.heartbeat_request_launchers_type_0 import (
        HeartbeatRequestLaunchersType0,
    )
    from ..models.job_step import JobStep
    from ..models.part_progress import PartProgress
    from ..models.peer_latency import PeerLatency
    from ..models.serving_report import ServingReport
    from ..models.volume_report import VolumeReport
    from ..models.volume_store import VolumeStore


T = TypeVar("T", bound="HeartbeatRequest")


@_attrs_define
class HeartbeatRequest:
    """
    Attributes:
        samples (list[GpuSample]): Samples since the last delivered heartbeat; after an outage, everything buffered
            (oldest first).
        cached_models (list[str] | None | Unset): The models in this host's read-only model cache (`--model-cache`), as
            hub ids (`name` or `org/name`, each
            part 1-96 of `A-Z a-z 0-9 . _ -`, not starting with `.` or `-`, no `--`), sorted and each once: sent with
            the first heartbeat after the agent starts and whenever the list changed; absent: unchanged.
        cuda_version (None | str | Unset): The CUDA version now.
        driver_version (None | str | Unset): The NVIDIA driver version now (an upgraded host says so here without
            registering again).
        echo_port (int | None | Unset): The UDP port of the agent's echo listener, sent with the first heartbeat after
            it starts: an agent that
            restarts with its saved credential may listen on another port, and its peers' probes must follow it.
        latency (list[PeerLatency] | Unset): Round trips measured since the last heartbeat to the other nodes of this
            node's multi-node leases.
        launchers (HeartbeatRequestLaunchersType0 | None | Unset): The host's launchers, sent when they changed since
            registration (or the last heartbeat that carried
            them): software installed or removed while the agent runs.
        progress (list[PartProgress] | Unset): How far this node's running parts are, as they say in their progress
            files (those that keep one).
        serving (list[ServingReport] | Unset): This node's serving parts (replicas of services) as they are now: the
            forwarder's port and readiness.
        steps (list[JobStep] | Unset): Optimizer steps the gpuplane runtime measured in this node's jobs since the last
            delivered heartbeat,
            oldest first (buffered through outages like the samples). Only this node's own assignments are accepted.
        volume_stores (list[VolumeStore] | Unset): The volume stores this agent offers (`--volume-store`), with their
            space now; none when it offers none.
        volumes (list[VolumeReport] | Unset): The volumes this agent holds or was asked to destroy, as they are now.
    """

    samples: list[GpuSample]
    cached_models: list[str] | None | Unset = UNSET
    cuda_version: None | str | Unset = UNSET
    driver_version: None | str | Unset = UNSET
    echo_port: int | None | Unset = UNSET
    latency: list[PeerLatency] | Unset = UNSET
    launchers: HeartbeatRequestLaunchersType0 | None | Unset = UNSET
    progress: list[PartProgress] | Unset = UNSET
    serving: list[ServingReport] | Unset = UNSET
    steps: list[JobStep] | Unset = UNSET
    volume_stores: list[VolumeStore] | Unset = UNSET
    volumes: list[VolumeReport] | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.heartbeat_request_launchers_type_0 import (
            HeartbeatRequestLaunchersType0,
        )

        samples = []
        for samples_item_data in self.samples:
            samples_item = samples_item_data.to_dict()
            samples.append(samples_item)

        cached_models: list[str] | None | Unset
        if isinstance(self.cached_models, Unset):
            cached_models = UNSET
        elif isinstance(self.cached_models, list):
            cached_models = self.cached_models

        else:
            cached_models = self.cached_models

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

        echo_port: int | None | Unset
        if isinstance(self.echo_port, Unset):
            echo_port = UNSET
        else:
            echo_port = self.echo_port

        latency: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.latency, Unset):
            latency = []
            for latency_item_data in self.latency:
                latency_item = latency_item_data.to_dict()
                latency.append(latency_item)

        launchers: dict[str, Any] | None | Unset
        if isinstance(self.launchers, Unset):
            launchers = UNSET
        elif isinstance(self.launchers, HeartbeatRequestLaunchersType0):
            launchers = self.launchers.to_dict()
        else:
            launchers = self.launchers

        progress: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.progress, Unset):
            progress = []
            for progress_item_data in self.progress:
                progress_item = progress_item_data.to_dict()
                progress.append(progress_item)

        serving: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.serving, Unset):
            serving = []
            for serving_item_data in self.serving:
                serving_item = serving_item_data.to_dict()
                serving.append(serving_item)

        steps: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.steps, Unset):
            steps = []
            for steps_item_data in self.steps:
                steps_item = steps_item_data.to_dict()
                steps.append(steps_item)

        volume_stores: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.volume_stores, Unset):
            volume_stores = []
            for volume_stores_item_data in self.volume_stores:
                volume_stores_item = volume_stores_item_data.to_dict()
                volume_stores.append(volume_stores_item)

        volumes: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.volumes, Unset):
            volumes = []
            for volumes_item_data in self.volumes:
                volumes_item = volumes_item_data.to_dict()
                volumes.append(volumes_item)

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "samples": samples,
            }
        )
        if cached_models is not UNSET:
            field_dict["cached_models"] = cached_models
        if cuda_version is not UNSET:
            field_dict["cuda_version"] = cuda_version
        if driver_version is not UNSET:
            field_dict["driver_version"] = driver_version
        if echo_port is not UNSET:
            field_dict["echo_port"] = echo_port
        if latency is not UNSET:
            field_dict["latency"] = latency
        if launchers is not UNSET:
            field_dict["launchers"] = launchers
        if progress is not UNSET:
            field_dict["progress"] = progress
        if serving is not UNSET:
            field_dict["serving"] = serving
        if steps is not UNSET:
            field_dict["steps"] = steps
        if volume_stores is not UNSET:
            field_dict["volume_stores"] = volume_stores
        if volumes is not UNSET:
            field_dict["volumes"] = volumes

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.gpu_sample import GpuSample
        from ..models.heartbeat_request_launchers_type_0 import (
            HeartbeatRequestLaunchersType0,
        )
        from ..models.job_step import JobStep
        from ..models.part_progress import PartProgress
        from ..models.peer_latency import PeerLatency
        from ..models.serving_report import ServingReport
        from ..models.volume_report import VolumeReport
        from ..models.volume_store import VolumeStore

        d = dict(src_dict)
        samples = []
        _samples = d.pop("samples")
        for samples_item_data in _samples:
            samples_item = GpuSample.from_dict(samples_item_data)

            samples.append(samples_item)

        def _parse_cached_models(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                cached_models_type_0 = cast(list[str], data)

                return cached_models_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        cached_models = _parse_cached_models(d.pop("cached_models", UNSET))

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

        def _parse_echo_port(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        echo_port = _parse_echo_port(d.pop("echo_port", UNSET))

        _latency = d.pop("latency", UNSET)
        latency: list[PeerLatency] | Unset = UNSET
        if _latency is not UNSET:
            latency = []
            for latency_item_data in _latency:
                latency_item = PeerLatency.from_dict(latency_item_data)

                latency.append(latency_item)

        def _parse_launchers(
            data: object,
        ) -> HeartbeatRequestLaunchersType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                launchers_type_0 = HeartbeatRequestLaunchersType0.from_dict(data)

                return launchers_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(HeartbeatRequestLaunchersType0 | None | Unset, data)

        launchers = _parse_launchers(d.pop("launchers", UNSET))

        _progress = d.pop("progress", UNSET)
        progress: list[PartProgress] | Unset = UNSET
        if _progress is not UNSET:
            progress = []
            for progress_item_data in _progress:
                progress_item = PartProgress.from_dict(progress_item_data)

                progress.append(progress_item)

        _serving = d.pop("serving", UNSET)
        serving: list[ServingReport] | Unset = UNSET
        if _serving is not UNSET:
            serving = []
            for serving_item_data in _serving:
                serving_item = ServingReport.from_dict(serving_item_data)

                serving.append(serving_item)

        _steps = d.pop("steps", UNSET)
        steps: list[JobStep] | Unset = UNSET
        if _steps is not UNSET:
            steps = []
            for steps_item_data in _steps:
                steps_item = JobStep.from_dict(steps_item_data)

                steps.append(steps_item)

        _volume_stores = d.pop("volume_stores", UNSET)
        volume_stores: list[VolumeStore] | Unset = UNSET
        if _volume_stores is not UNSET:
            volume_stores = []
            for volume_stores_item_data in _volume_stores:
                volume_stores_item = VolumeStore.from_dict(volume_stores_item_data)

                volume_stores.append(volume_stores_item)

        _volumes = d.pop("volumes", UNSET)
        volumes: list[VolumeReport] | Unset = UNSET
        if _volumes is not UNSET:
            volumes = []
            for volumes_item_data in _volumes:
                volumes_item = VolumeReport.from_dict(volumes_item_data)

                volumes.append(volumes_item)

        heartbeat_request = cls(
            samples=samples,
            cached_models=cached_models,
            cuda_version=cuda_version,
            driver_version=driver_version,
            echo_port=echo_port,
            latency=latency,
            launchers=launchers,
            progress=progress,
            serving=serving,
            steps=steps,
            volume_stores=volume_stores,
            volumes=volumes,
        )

        return heartbeat_request
