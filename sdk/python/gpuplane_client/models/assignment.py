from __future__ import annotations

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
    from ..models.stop_notice import StopNotice


T = TypeVar("T", bound="Assignment")


@_attrs_define
class Assignment:
    """A job's part that this node has to run (or stop).

    Attributes:
        desired (Desired): What the service wants a node to do with its part of a job.
        job_id (UUID):
        job_node_id (UUID): Report its status at `POST /v1/agent/assignments/{job_node_id}/status`.
        lease_id (UUID): The lease it runs on: its processes run as that lease's user, in that lease's directory.
        spec (LaunchSpec): What one node runs: exactly this argv (no shell) with exactly this environment (plus PATH and
            HOME).
        state (JobState): State of a job, and of each of its nodes.
        notice (None | StopNotice | Unset):
    """

    desired: Desired
    job_id: UUID
    job_node_id: UUID
    lease_id: UUID
    spec: LaunchSpec
    state: JobState
    notice: None | StopNotice | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.stop_notice import StopNotice

        desired = self.desired.value

        job_id = str(self.job_id)

        job_node_id = str(self.job_node_id)

        lease_id = str(self.lease_id)

        spec = self.spec.to_dict()

        state = self.state.value

        notice: dict[str, Any] | None | Unset
        if isinstance(self.notice, Unset):
            notice = UNSET
        elif isinstance(self.notice, StopNotice):
            notice = self.notice.to_dict()
        else:
            notice = self.notice

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "desired": desired,
                "job_id": job_id,
                "job_node_id": job_node_id,
                "lease_id": lease_id,
                "spec": spec,
                "state": state,
            }
        )
        if notice is not UNSET:
            field_dict["notice"] = notice

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.launch_spec import LaunchSpec
        from ..models.stop_notice import StopNotice

        d = dict(src_dict)
        desired = Desired(d.pop("desired"))

        job_id = UUID(d.pop("job_id"))

        job_node_id = UUID(d.pop("job_node_id"))

        lease_id = UUID(d.pop("lease_id"))

        spec = LaunchSpec.from_dict(d.pop("spec"))

        state = JobState(d.pop("state"))

        def _parse_notice(data: object) -> None | StopNotice | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                notice_type_0 = StopNotice.from_dict(data)

                return notice_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | StopNotice | Unset, data)

        notice = _parse_notice(d.pop("notice", UNSET))

        assignment = cls(
            desired=desired,
            job_id=job_id,
            job_node_id=job_node_id,
            lease_id=lease_id,
            spec=spec,
            state=state,
            notice=notice,
        )

        assignment.additional_properties = d
        return assignment

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
