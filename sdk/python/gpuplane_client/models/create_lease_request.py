from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..models.placement import Placement
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.start_environment_request import StartEnvironmentRequest


T = TypeVar("T", bound="CreateLeaseRequest")


@_attrs_define
class CreateLeaseRequest:
    """
    Example:
        {'duration_hours': 24, 'gpu_count': 8, 'placement': 'single_node', 'pool_id':
            '0192f5a0-0000-7000-8000-000000000001'}

    Attributes:
        gpu_count (int): GPUs wanted, 1-4096.
        duration_hours (int | None | Unset): Hourly term: length in hours (1-8784). Give this or `months`.
        environment (None | StartEnvironmentRequest | Unset):
        gpu_model (None | str | Unset): Any pool of this GPU model (the one with the most free GPUs). Give this or
            `pool_id`.
        idle_release_after_minutes (int | None | Unset): Release the lease once it has been idle this many minutes
            (10-10080), after its running jobs got their
            stop notice; see `Lease.idle_since`. Absent or null: never released for idleness.
        months (int | None | Unset): Monthly term: length in calendar months (1-36). Give this or `duration_hours`.
        placement (Placement | Unset): How a lease's GPUs are laid over nodes.
        pool_id (None | Unset | UUID): The pool to lease from. Give this or `gpu_model`.
        queue (bool | Unset): When capacity is short, wait in the pool's queue instead of failing with 409.
    """

    gpu_count: int
    duration_hours: int | None | Unset = UNSET
    environment: None | StartEnvironmentRequest | Unset = UNSET
    gpu_model: None | str | Unset = UNSET
    idle_release_after_minutes: int | None | Unset = UNSET
    months: int | None | Unset = UNSET
    placement: Placement | Unset = UNSET
    pool_id: None | Unset | UUID = UNSET
    queue: bool | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.start_environment_request import StartEnvironmentRequest

        gpu_count = self.gpu_count

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

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "gpu_count": gpu_count,
            }
        )
        if duration_hours is not UNSET:
            field_dict["duration_hours"] = duration_hours
        if environment is not UNSET:
            field_dict["environment"] = environment
        if gpu_model is not UNSET:
            field_dict["gpu_model"] = gpu_model
        if idle_release_after_minutes is not UNSET:
            field_dict["idle_release_after_minutes"] = idle_release_after_minutes
        if months is not UNSET:
            field_dict["months"] = months
        if placement is not UNSET:
            field_dict["placement"] = placement
        if pool_id is not UNSET:
            field_dict["pool_id"] = pool_id
        if queue is not UNSET:
            field_dict["queue"] = queue

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.start_environment_request import StartEnvironmentRequest

        d = dict(src_dict)
        gpu_count = d.pop("gpu_count")

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

        create_lease_request = cls(
            gpu_count=gpu_count,
            duration_hours=duration_hours,
            environment=environment,
            gpu_model=gpu_model,
            idle_release_after_minutes=idle_release_after_minutes,
            months=months,
            placement=placement,
            pool_id=pool_id,
            queue=queue,
        )

        return create_lease_request
