from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.environment_state import EnvironmentState
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.environment_node import EnvironmentNode


T = TypeVar("T", bound="Environment")


@_attrs_define
class Environment:
    """A lease's interactive environment.

    Attributes:
        created_at (datetime.datetime):
        files_at_lease_end (str): What happens to the lease's files (`/lease/home`, shared with its jobs) when the lease
            ends.
        lease_id (UUID):
        nodes (list[EnvironmentNode]): One per node of the lease, by host name.
        state (EnvironmentState): An environment's state on one node.
        user (str): The user to log in as.
        image (None | str | Unset):
        stopped_at (datetime.datetime | None | Unset):
    """

    created_at: datetime.datetime
    files_at_lease_end: str
    lease_id: UUID
    nodes: list[EnvironmentNode]
    state: EnvironmentState
    user: str
    image: None | str | Unset = UNSET
    stopped_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at = self.created_at.isoformat()

        files_at_lease_end = self.files_at_lease_end

        lease_id = str(self.lease_id)

        nodes = []
        for nodes_item_data in self.nodes:
            nodes_item = nodes_item_data.to_dict()
            nodes.append(nodes_item)

        state = self.state.value

        user = self.user

        image: None | str | Unset
        if isinstance(self.image, Unset):
            image = UNSET
        else:
            image = self.image

        stopped_at: None | str | Unset
        if isinstance(self.stopped_at, Unset):
            stopped_at = UNSET
        elif isinstance(self.stopped_at, datetime.datetime):
            stopped_at = self.stopped_at.isoformat()
        else:
            stopped_at = self.stopped_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at": created_at,
                "files_at_lease_end": files_at_lease_end,
                "lease_id": lease_id,
                "nodes": nodes,
                "state": state,
                "user": user,
            }
        )
        if image is not UNSET:
            field_dict["image"] = image
        if stopped_at is not UNSET:
            field_dict["stopped_at"] = stopped_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.environment_node import EnvironmentNode

        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        files_at_lease_end = d.pop("files_at_lease_end")

        lease_id = UUID(d.pop("lease_id"))

        nodes = []
        _nodes = d.pop("nodes")
        for nodes_item_data in _nodes:
            nodes_item = EnvironmentNode.from_dict(nodes_item_data)

            nodes.append(nodes_item)

        state = EnvironmentState(d.pop("state"))

        user = d.pop("user")

        def _parse_image(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        image = _parse_image(d.pop("image", UNSET))

        def _parse_stopped_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                stopped_at_type_0 = datetime.datetime.fromisoformat(data)

                return stopped_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        stopped_at = _parse_stopped_at(d.pop("stopped_at", UNSET))

        environment = cls(
            created_at=created_at,
            files_at_lease_end=files_at_lease_end,
            lease_id=lease_id,
            nodes=nodes,
            state=state,
            user=user,
            image=image,
            stopped_at=stopped_at,
        )

        environment.additional_properties = d
        return environment

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
