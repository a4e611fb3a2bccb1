from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.lease_state import LeaseState
from ..models.placement import Placement
from ..models.term import Term
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.lease_gpu import LeaseGpu
    from ..models.lease_part import LeasePart


T = TypeVar("T", bound="Lease")


@_attrs_define
class Lease:
    """
    Attributes:
        created_at (datetime.datetime):
        external (bool): Some of its GPUs are on external nodes (see `LeaseGpu.external`): the platform runs no jobs on
            them and
            does not prove they are alive, so the lease is billed from its start to its end on the operator's word,
            not up to its nodes' last heartbeat as on agent nodes.
        generation (int): Incremented on every change; send it as `If-Match` to extend safely.
        gpu_count (int):
        gpus (list[LeaseGpu]): Its GPUs (empty while queued); after its end, the ones it held.
        id (UUID):
        placement (Placement): How a lease's GPUs are laid over nodes.
        pool_id (UUID):
        state (LeaseState):
        tenant_id (UUID):
        term (Term):
        updated_at (datetime.datetime):
        duration_hours (int | None | Unset):
        end_reason (None | str | Unset):
        ended_at (datetime.datetime | None | Unset): When it actually ended.
        ends_at (datetime.datetime | None | Unset): When the lease expires (absent while queued).
        idle_release_after_minutes (int | None | Unset): Opt-in: release the lease once it has been idle this many
            minutes (10-10080), its running jobs first given
            their stop notice; null: never released for idleness. Set at creation or with `PATCH /v1/leases/{id}`.
        idle_since (datetime.datetime | None | Unset): The start of the lease's current idle spell: its GPUs, every one
            of them reporting, stayed under the
            service's idle threshold since then (`lease.idle` announced it). Null while it is not idle, and always
            for a lease with a GPU that reports no telemetry (on an external node, which has no agent).
        months (int | None | Unset):
        parts (list[LeasePart] | None | Unset): A lease across pools only (absent for a single-pool lease): its parts,
            one per pool, in the order asked,
            each billed at its own pool's price. `pool_id` and `placement` above are then the first part's, `gpu_count`
            the sum of the parts', and `gpus` every part's GPUs.
        release_deadline (datetime.datetime | None | Unset): A release is under way (the tenant's, or the idle release):
            the lease's running jobs were given their
            stop notice, and it is released once they have stopped, at the latest at this time. Billed until then.
        starts_at (datetime.datetime | None | Unset): When the GPUs were allocated (absent while queued).
    """

    created_at: datetime.datetime
    external: bool
    generation: int
    gpu_count: int
    gpus: list[LeaseGpu]
    id: UUID
    placement: Placement
    pool_id: UUID
    state: LeaseState
    tenant_id: UUID
    term: Term
    updated_at: datetime.datetime
    duration_hours: int | None | Unset = UNSET
    end_reason: None | str | Unset = UNSET
    ended_at: datetime.datetime | None | Unset = UNSET
    ends_at: datetime.datetime | None | Unset = UNSET
    idle_release_after_minutes: int | None | Unset = UNSET
    idle_since: datetime.datetime | None | Unset = UNSET
    months: int | None | Unset = UNSET
    parts: list[LeasePart] | None | Unset = UNSET
    release_deadline: datetime.datetime | None | Unset = UNSET
    starts_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at = self.created_at.isoformat()

        external = self.external

        generation = self.generation

        gpu_count = self.gpu_count

        gpus = []
        for gpus_item_data in self.gpus:
            gpus_item = gpus_item_data.to_dict()
            gpus.append(gpus_item)

        id = str(self.id)

        placement = self.placement.value

        pool_id = str(self.pool_id)

        state = self.state.value

        tenant_id = str(self.tenant_id)

        term = self.term.value

        updated_at = self.updated_at.isoformat()

        duration_hours: int | None | Unset
        if isinstance(self.duration_hours, Unset):
            duration_hours = UNSET
        else:
            duration_hours = self.duration_hours

        end_reason: None | str | Unset
        if isinstance(self.end_reason, Unset):
            end_reason = UNSET
        else:
            end_reason = self.end_reason

        ended_at: None | str | Unset
        if isinstance(self.ended_at, Unset):
            ended_at = UNSET
        elif isinstance(self.ended_at, datetime.datetime):
            ended_at = self.ended_at.isoformat()
        else:
            ended_at = self.ended_at

        ends_at: None | str | Unset
        if isinstance(self.ends_at, Unset):
            ends_at = UNSET
        elif isinstance(self.ends_at, datetime.datetime):
            ends_at = self.ends_at.isoformat()
        else:
            ends_at = self.ends_at

        idle_release_after_minutes: int | None | Unset
        if isinstance(self.idle_release_after_minutes, Unset):
            idle_release_after_minutes = UNSET
        else:
            idle_release_after_minutes = self.idle_release_after_minutes

        idle_since: None | str | Unset
        if isinstance(self.idle_since, Unset):
            idle_since = UNSET
        elif isinstance(self.idle_since, datetime.datetime):
            idle_since = self.idle_since.isoformat()
        else:
            idle_since = self.idle_since

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

        release_deadline: None | str | Unset
        if isinstance(self.release_deadline, Unset):
            release_deadline = UNSET
        elif isinstance(self.release_deadline, datetime.datetime):
            release_deadline = self.release_deadline.isoformat()
        else:
            release_deadline = self.release_deadline

        starts_at: None | str | Unset
        if isinstance(self.starts_at, Unset):
            starts_at = UNSET
        elif isinstance(self.starts_at, datetime.datetime):
            starts_at = self.starts_at.isoformat()
        else:
            starts_at = self.starts_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at": created_at,
                "external": external,
                "generation": generation,
                "gpu_count": gpu_count,
                "gpus": gpus,
                "id": id,
                "placement": placement,
                "pool_id": pool_id,
                "state": state,
                "tenant_id": tenant_id,
                "term": term,
                "updated_at": updated_at,
            }
        )
        if duration_hours is not UNSET:
            field_dict["duration_hours"] = duration_hours
        if end_reason is not UNSET:
            field_dict["end_reason"] = end_reason
        if ended_at is not UNSET:
            field_dict["ended_at"] = ended_at
        if ends_at is not UNSET:
            field_dict["ends_at"] = ends_at
        if idle_release_after_minutes is not UNSET:
            field_dict["idle_release_after_minutes"] = idle_release_after_minutes
        if idle_since is not UNSET:
            field_dict["idle_since"] = idle_since
        if months is not UNSET:
            field_dict["months"] = months
        if parts is not UNSET:
            field_dict["parts"] = parts
        if release_deadline is not UNSET:
            field_dict["release_deadline"] = release_deadline
        if starts_at is not UNSET:
            field_dict["starts_at"] = starts_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.lease_gpu import LeaseGpu
        from ..models.lease_part import LeasePart

        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        external = d.pop("external")

        generation = d.pop("generation")

        gpu_count = d.pop("gpu_count")

        gpus = []
        _gpus = d.pop("gpus")
        for gpus_item_data in _gpus:
            gpus_item = LeaseGpu.from_dict(gpus_item_data)

            gpus.append(gpus_item)

        id = UUID(d.pop("id"))

        placement = Placement(d.pop("placement"))

        pool_id = UUID(d.pop("pool_id"))

        state = LeaseState(d.pop("state"))

        tenant_id = UUID(d.pop("tenant_id"))

        term = Term(d.pop("term"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        def _parse_duration_hours(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        duration_hours = _parse_duration_hours(d.pop("duration_hours", UNSET))

        def _parse_end_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        end_reason = _parse_end_reason(d.pop("end_reason", UNSET))

        def _parse_ended_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                ended_at_type_0 = datetime.datetime.fromisoformat(data)

                return ended_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        ended_at = _parse_ended_at(d.pop("ended_at", UNSET))

        def _parse_ends_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                ends_at_type_0 = datetime.datetime.fromisoformat(data)

                return ends_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        ends_at = _parse_ends_at(d.pop("ends_at", UNSET))

        def _parse_idle_release_after_minutes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        idle_release_after_minutes = _parse_idle_release_after_minutes(
            d.pop("idle_release_after_minutes", UNSET)
        )

        def _parse_idle_since(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                idle_since_type_0 = datetime.datetime.fromisoformat(data)

                return idle_since_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        idle_since = _parse_idle_since(d.pop("idle_since", UNSET))

        def _parse_months(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        months = _parse_months(d.pop("months", UNSET))

        def _parse_parts(data: object) -> list[LeasePart] | None | Unset:
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
                    parts_type_0_item = LeasePart.from_dict(parts_type_0_item_data)

                    parts_type_0.append(parts_type_0_item)

                return parts_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[LeasePart] | None | Unset, data)

        parts = _parse_parts(d.pop("parts", UNSET))

        def _parse_release_deadline(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                release_deadline_type_0 = datetime.datetime.fromisoformat(data)

                return release_deadline_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        release_deadline = _parse_release_deadline(d.pop("release_deadline", UNSET))

        def _parse_starts_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                starts_at_type_0 = datetime.datetime.fromisoformat(data)

                return starts_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        starts_at = _parse_starts_at(d.pop("starts_at", UNSET))

        lease = cls(
            created_at=created_at,
            external=external,
            generation=generation,
            gpu_count=gpu_count,
            gpus=gpus,
            id=id,
            placement=placement,
            pool_id=pool_id,
            state=state,
            tenant_id=tenant_id,
            term=term,
            updated_at=updated_at,
            duration_hours=duration_hours,
            end_reason=end_reason,
            ended_at=ended_at,
            ends_at=ends_at,
            idle_release_after_minutes=idle_release_after_minutes,
            idle_since=idle_since,
            months=months,
            parts=parts,
            release_deadline=release_deadline,
            starts_at=starts_at,
        )

        lease.additional_properties = d
        return lease

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
