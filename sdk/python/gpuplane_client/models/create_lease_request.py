from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..models.placement import Placement
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.attach_volume_request import AttachVolumeRequest
    from ..models.lease_part_request import LeasePartRequest
    from ..models.start_environment_request import StartEnvironmentRequest


T = TypeVar("T", bound="CreateLeaseRequest")


@_attrs_define
class CreateLeaseRequest:
    """
    Example:
        {'duration_hours': 24, 'gpu_count': 8, 'placement': 'single_node', 'pool_id':
            '0192f5a0-0000-7000-8000-000000000001'}

    Attributes:
        cached_model (None | str | Unset): Prefer a host whose read-only model cache holds this model (a hub id such as
            `meta-llama/Llama-3.2-1B`;
            the pool's are listed by `GET /v1/pools/{pool_id}/models`): the lease goes on the best-fit such host with
            room now, else wherever it fits as without it. Every lease's sandbox mounts its host's cache at `/models`
            with `HF_HOME` there, so a job loads a cached model by its id without downloading it. Not with `parts`.
        duration_hours (int | None | Unset): Hourly term: length in hours (1-8784). Give this or `months`.
        environment (None | StartEnvironmentRequest | Unset):
        gpu_count (int | None | Unset): GPUs wanted, 1-4096. Required, unless `parts` is given (then leave it out).
        gpu_model (None | str | Unset): Any pool of this GPU model (the one with the most free GPUs). Give this or
            `pool_id`.
        idle_release_after_minutes (int | None | Unset): Release the lease once it has been idle this many minutes
            (10-10080), after its running jobs got their
            stop notice; see `Lease.idle_since`. Absent or null: never released for idleness.
        months (int | None | Unset): Monthly term: length in calendar months (1-36). Give this or `duration_hours`.
        parts (list[LeasePartRequest] | None | Unset): A lease across pools: 2-4 parts, each GPUs of one pool (give
            `parts` instead of `pool_id`, `gpu_model` and
            `gpu_count`). All or nothing: every part gets its GPUs, or none does. The pools must all bill in one
            currency (the lease is billed, and its balance checked, in one) and lie in one region (a job's pipeline
            crosses between the parts every step). Each part is billed at its own pool's price and counts against the
            tenant's quota of its pool; the lease counts once against `max_concurrent_leases`. Queued (`queue`), it
            waits in its first part's pool's queue and starts once every part fits.
        placement (Placement | Unset): How a lease's GPUs are laid over nodes.
        pool_id (None | Unset | UUID): The pool to lease from. Give this or `gpu_model`.
        queue (bool | Unset): When capacity is short, wait in the pool's queue instead of failing with 409.
        volumes (list[AttachVolumeRequest] | Unset): Volumes to attach as the lease is created (at most 16), each as
            `POST /v1/leases/{id}/volumes` takes it;
            the create is refused, with nothing written, when one cannot be attached. A host volume places the lease on
            the host that keeps it (409 `insufficient_capacity` with the reason when that host has no room or is
            offline; two host volumes must share a host); a read-write volume places it on one host (422 on `placement`
            for `spread` over several). Not with `parts`, nor with `queue` (attach once a queued lease has started).
    """

    cached_model: None | str | Unset = UNSET
    duration_hours: int | None | Unset = UNSET
    environment: None | StartEnvironmentRequest | Unset = UNSET
    gpu_count: int | None | Unset = UNSET
    gpu_model: None | str | Unset = UNSET
    idle_release_after_minutes: int | None | Unset = UNSET
    months: int | None | Unset = UNSET
    parts: list[LeasePartRequest] | None | Unset = UNSET
    placement: Placement | Unset = UNSET
    pool_id: None | Unset | UUID = UNSET
    queue: bool | Unset = UNSET
    volumes: list[AttachVolumeRequest] | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.start_environment_request import StartEnvironmentRequest

        cached_model: None | str | Unset
        if isinstance(self.cached_model, Unset):
            cached_model = UNSET
        else:
            cached_model = self.cached_model

        duration_hours: int | None | Unset
        if isinstance(self.duration_hours, Unset):
            duration_hours = UNSET
        else:
            duration_hours = self.duration_hours

        environment: dict[str, Any] | None | Unset
        if isinstance(self.environment, Unset):
            environment = UNSET
        elif isinstance(self.environment, StartEnvironmentRequest):
            environment = self.environment.to_dict()
        else:
            environment = self.environment

        gpu_count: int | None | Unset
        if isinstance(self.gpu_count, Unset):
            gpu_count = UNSET
        else:
            gpu_count = self.gpu_count

        gpu_model: None | str | Unset
        if isinstance(self.gpu_model, Unset):
            gpu_model = UNSET
        else:
            gpu_model = self.gpu_model

        idle_release_after_minutes: int | None | Unset
        if isinstance(self.idle_release_after_minutes, Unset):
            idle_release_after_minutes = UNSET
        else:
            idle_release_after_minutes = self.idle_release_after_minutes

        months: int | None | Unset
        if isinstance(self.months, Unset):
            months = UNSET
        else:
            months = self.months

        parts: list[dict[str, Any]] | None | Unset
        if isinstance(self.parts, Unset):
            parts = UNSET
        elif isinstance(self.parts, list):
            parts = []
            for parts_type_0_item_data in self.parts:
                parts_type_0_item = parts_type_0_item_data.to_dict()
                parts.append(parts_type_0_item)

        else:
            parts = self.parts

        placement: str | Unset = UNSET
        if not isinstance(self.placement, Unset):
            placement = self.placement.value

        pool_id: None | str | Unset
        if isinstance(self.pool_id, Unset):
            pool_id = UNSET
        elif isinstance(self.pool_id, UUID):
            pool_id = str(self.pool_id)
        else:
            pool_id = self.pool_id

        queue = self.queue

        volumes: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.volumes, Unset):
            volumes = []
            for volumes_item_data in self.volumes:
                volumes_item = volumes_item_data.to_dict()
                volumes.append(volumes_item)

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if cached_model is not UNSET:
            field_dict["cached_model"] = cached_model
        if duration_hours is not UNSET:
            field_dict["duration_hours"] = duration_hours
        if environment is not UNSET:
            field_dict["environment"] = environment
        if gpu_count is not UNSET:
            field_dict["gpu_count"] = gpu_count
        if gpu_model is not UNSET:
            field_dict["gpu_model"] = gpu_model
        if idle_release_after_minutes is not UNSET:
            field_dict["idle_release_after_minutes"] = idle_release_after_minutes
        if months is not UNSET:
            field_dict["months"] = months
        if parts is not UNSET:
            field_dict["parts"] = parts
        if placement is not UNSET:
            field_dict["placement"] = placement
        if pool_id is not UNSET:
            field_dict["pool_id"] = pool_id
        if queue is not UNSET:
            field_dict["queue"] = queue
        if volumes is not UNSET:
            field_dict["volumes"] = volumes

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.attach_volume_request import AttachVolumeRequest
        from ..models.lease_part_request import LeasePartRequest
        from ..models.start_environment_request import StartEnvironmentRequest

        d = dict(src_dict)

        def _parse_cached_model(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        cached_model = _parse_cached_model(d.pop("cached_model", UNSET))

        def _parse_duration_hours(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        duration_hours = _parse_duration_hours(d.pop("duration_hours", UNSET))

        def _parse_environment(data: object) -> None | StartEnvironmentRequest | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                environment_type_0 = StartEnvironmentRequest.from_dict(data)

                return environment_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | StartEnvironmentRequest | Unset, data)

        environment = _parse_environment(d.pop("environment", UNSET))

        def _parse_gpu_count(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        gpu_count = _parse_gpu_count(d.pop("gpu_count", UNSET))

        def _parse_gpu_model(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        gpu_model = _parse_gpu_model(d.pop("gpu_model", UNSET))

        def _parse_idle_release_after_minutes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        idle_release_after_minutes = _parse_idle_release_after_minutes(
            d.pop("idle_release_after_minutes", UNSET)
        )

        def _parse_months(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        months = _parse_months(d.pop("months", UNSET))

        def _parse_parts(data: object) -> list[LeasePartRequest] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                parts_type_0 = []
                _parts_type_0 = data
                for parts_type_0_item_data in _parts_type_0:
                    parts_type_0_item = LeasePartRequest.from_dict(
                        parts_type_0_item_data
                    )

                    parts_type_0.append(parts_type_0_item)

                return parts_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[LeasePartRequest] | None | Unset, data)

        parts = _parse_parts(d.pop("parts", UNSET))

        _placement = d.pop("placement", UNSET)
        placement: Placement | Unset
        if isinstance(_placement, Unset):
            placement = UNSET
        else:
            placement = Placement(_placement)

        def _parse_pool_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                pool_id_type_0 = UUID(data)

                return pool_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        pool_id = _parse_pool_id(d.pop("pool_id", UNSET))

        queue = d.pop("queue", UNSET)

        _volumes = d.pop("volumes", UNSET)
        volumes: list[AttachVolumeRequest] | Unset = UNSET
        if _volumes is not UNSET:
            volumes = []
            for volumes_item_data in _volumes:
                volumes_item = AttachVolumeRequest.from_dict(volumes_item_data)

                volumes.append(volumes_item)

        create_lease_request = cls(
            cached_model=cached_model,
            duration_hours=duration_hours,
            environment=environment,
            gpu_count=gpu_count,
            gpu_model=gpu_model,
            idle_release_after_minutes=idle_release_after_minutes,
            months=months,
            parts=parts,
            placement=placement,
            pool_id=pool_id,
            queue=queue,
            volumes=volumes,
        )

        return create_lease_request
