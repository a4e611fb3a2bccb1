from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.desired import Desired
from ..models.job_state import JobState

T = TypeVar("T", bound="AssignmentStatusResponse")


@_attrs_define
class AssignmentStatusResponse:
    """The node's part as the service now records it.

    Attributes:
        desired (Desired): What the service wants a node to do with its part of a job.
        state (JobState): State of a job, and of each of its nodes.
    """

    desired: Desired
    state: JobState
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        desired = self.desired.value

        state = self.state.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "desired": desired,
                "state": state,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        desired = Desired(d.pop("desired"))

        state = JobState(d.pop("state"))

        assignment_status_response = cls(
            desired=desired,
            state=state,
        )

        assignment_status_response.additional_properties = d
        return assignment_status_response

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
