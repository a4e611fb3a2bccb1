from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.desired import Desired
from ..models.job_state import JobState
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.launch_spec import LaunchSpec
    from ..models.node_notice import NodeNotice
    from ..models.progress import Progress
    from ..models.state_change import StateChange


T = TypeVar("T", bound="JobNode")


@_attrs_define
class JobNode:
    """A job's part on one node of its lease.

    Attributes:
        attempt (int): 1, or more for a service's replica run again after it failed (the failed attempts are not
            listed).
        desired (Desired): What the service wants a node to do with its part of a job.
        history (list[StateChange]): Every state change, oldest first.
        hostname (str):
        id (UUID):
        node_id (UUID):
        node_rank (int): `NODE_RANK`: 0 is the node `MASTER_ADDR` names.
        output_tail (list[str]): The last lines of the process's output (stdout and stderr), at most 50.
        spec (LaunchSpec): What one node runs: exactly this argv (no shell) with exactly this environment (plus PATH and
            HOME).
        state (JobState): State of a job, and of each of its nodes.
        exit_code (int | None | Unset):
        finished_at (datetime.datetime | None | Unset):
        notice (NodeNotice | None | Unset):
        progress (None | Progress | Unset):
        reason (None | str | Unset):
        started_at (datetime.datetime | None | Unset):
    """

    attempt: int
    desired: Desired
    history: list[StateChange]
    hostname: str
    id: UUID
    node_id: UUID
    node_rank: int
    output_tail: list[str]
    spec: LaunchSpec
    state: JobState
    exit_code: int | None | Unset = UNSET
    finished_at: datetime.datetime | None | Unset = UNSET
    notice: NodeNotice | None | Unset = UNSET
    progress: None | Progress | Unset = UNSET
    reason: None | str | Unset = UNSET
    started_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.node_notice import NodeNotice
        from ..models.progress import Progress

        attempt = self.attempt

        desired = self.desired.value

        history = []
        for history_item_data in self.history:
            history_item = history_item_data.to_dict()
            history.append(history_item)

        hostname = self.hostname

        id = str(self.id)

        node_id = str(self.node_id)

        node_rank = self.node_rank

        output_tail = self.output_tail

        spec = self.spec.to_dict()

        state = self.state.value

        exit_code: int | None | Unset
        if isinstance(self.exit_code, Unset):
            exit_code = UNSET
        else:
            exit_code = self.exit_code

        finished_at: None | str | Unset
        if isinstance(self.finished_at, Unset):
            finished_at = UNSET
        elif isinstance(self.finished_at, datetime.datetime):
            finished_at = self.finished_at.isoformat()
        else:
            finished_at = self.finished_at

        notice: dict[str, Any] | None | Unset
        if isinstance(self.notice, Unset):
            notice = UNSET
        elif isinstance(self.notice, NodeNotice):
            notice = self.notice.to_dict()
        else:
            notice = self.notice

        progress: dict[str, Any] | None | Unset
        if isinstance(self.progress, Unset):
            progress = UNSET
        elif isinstance(self.progress, Progress):
            progress = self.progress.to_dict()
        else:
            progress = self.progress

        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        else:
            reason = self.reason

        started_at: None | str | Unset
        if isinstance(self.started_at, Unset):
            started_at = UNSET
        elif isinstance(self.started_at, datetime.datetime):
            started_at = self.started_at.isoformat()
        else:
            started_at = self.started_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "attempt": attempt,
                "desired": desired,
                "history": history,
                "hostname": hostname,
                "id": id,
                "node_id": node_id,
                "node_rank": node_rank,
                "output_tail": output_tail,
                "spec": spec,
                "state": state,
            }
        )
        if exit_code is not UNSET:
            field_dict["exit_code"] = exit_code
        if finished_at is not UNSET:
            field_dict["finished_at"] = finished_at
        if notice is not UNSET:
            field_dict["notice"] = notice
        if progress is not UNSET:
            field_dict["progress"] = progress
        if reason is not UNSET:
            field_dict["reason"] = reason
        if started_at is not UNSET:
            field_dict["started_at"] = started_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.launch_spec import LaunchSpec
        from ..models.node_notice import NodeNotice
        from ..models.progress import Progress
        from ..models.state_change import StateChange

        d = dict(src_dict)
        attempt = d.pop("attempt")

        desired = Desired(d.pop("desired"))

        history = []
        _history = d.pop("history")
        for history_item_data in _history:
            history_item = StateChange.from_dict(history_item_data)

            history.append(history_item)

        hostname = d.pop("hostname")

        id = UUID(d.pop("id"))

        node_id = UUID(d.pop("node_id"))

        node_rank = d.pop("node_rank")

        output_tail = cast(list[str], d.pop("output_tail"))

        spec = LaunchSpec.from_dict(d.pop("spec"))

        state = JobState(d.pop("state"))

        def _parse_exit_code(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        exit_code = _parse_exit_code(d.pop("exit_code", UNSET))

        def _parse_finished_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                finished_at_type_0 = datetime.datetime.fromisoformat(data)

                return finished_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        finished_at = _parse_finished_at(d.pop("finished_at", UNSET))

        def _parse_notice(data: object) -> NodeNotice | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                notice_type_0 = NodeNotice.from_dict(data)

                return notice_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(NodeNotice | None | Unset, data)

        notice = _parse_notice(d.pop("notice", UNSET))

        def _parse_progress(data: object) -> None | Progress | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                progress_type_0 = Progress.from_dict(data)

                return progress_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Progress | Unset, data)

        progress = _parse_progress(d.pop("progress", UNSET))

        def _parse_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))

        def _parse_started_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                started_at_type_0 = datetime.datetime.fromisoformat(data)

                return started_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        started_at = _parse_started_at(d.pop("started_at", UNSET))

        job_node = cls(
            attempt=attempt,
            desired=desired,
            history=history,
            hostname=hostname,
            id=id,
            node_id=node_id,
            node_rank=node_rank,
            output_tail=output_tail,
            spec=spec,
            state=state,
            exit_code=exit_code,
            finished_at=finished_at,
            notice=notice,
            progress=progress,
            reason=reason,
            started_at=started_at,
        )

        job_node.additional_properties = d
        return job_node

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
