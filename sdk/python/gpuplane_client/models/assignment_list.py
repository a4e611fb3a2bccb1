from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.assignment import Assignment
    from ..models.environment_spec import EnvironmentSpec
    from ..models.node_lease import NodeLease


T = TypeVar("T", bound="AssignmentList")


@_attrs_define
class AssignmentList:
    """The node's unfinished assignments. One that disappears from the list (its lease ended) must be stopped.

    Attributes:
        assignments (list[Assignment]):
        leases (list[NodeLease]): The leases that hold GPUs of this node now, with the GPUs they hold: a job gets
            exactly its lease's
            devices; a lease no longer listed has ended here, and its files and processes are removed.
        environments (list[EnvironmentSpec] | Unset): The interactive environments to run on this node now; one no
            longer listed is stopped.
    """

    assignments: list[Assignment]
    leases: list[NodeLease]
    environments: list[EnvironmentSpec] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        assignments = []
        for assignments_item_data in self.assignments:
            assignments_item = assignments_item_data.to_dict()
            assignments.append(assignments_item)

        leases = []
        for leases_item_data in self.leases:
            leases_item = leases_item_data.to_dict()
            leases.append(leases_item)

        environments: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.environments, Unset):
            environments = []
            for environments_item_data in self.environments:
                environments_item = environments_item_data.to_dict()
                environments.append(environments_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "assignments": assignments,
                "leases": leases,
            }
        )
        if environments is not UNSET:
            field_dict["environments"] = environments

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.assignment import Assignment
        from ..models.environment_spec import EnvironmentSpec
        from ..models.node_lease import NodeLease

        d = dict(src_dict)
        assignments = []
        _assignments = d.pop("assignments")
        for assignments_item_data in _assignments:
            assignments_item = Assignment.from_dict(assignments_item_data)

            assignments.append(assignments_item)

        leases = []
        _leases = d.pop("leases")
        for leases_item_data in _leases:
            leases_item = NodeLease.from_dict(leases_item_data)

            leases.append(leases_item)

        _environments = d.pop("environments", UNSET)
        environments: list[EnvironmentSpec] | Unset = UNSET
        if _environments is not UNSET:
            environments = []
            for environments_item_data in _environments:
                environments_item = EnvironmentSpec.from_dict(environments_item_data)

                environments.append(environments_item)

        assignment_list = cls(
            assignments=assignments,
            leases=leases,
            environments=environments,
        )

        assignment_list.additional_properties = d
        return assignment_list

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
