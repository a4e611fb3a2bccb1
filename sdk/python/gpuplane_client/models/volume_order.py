from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.volume_action import VolumeAction
from ..models.volume_kind import VolumeKind

T = TypeVar("T", bound="VolumeOrder")


@_attrs_define
class VolumeOrder:
    """One volume of this node's, in the heartbeat's answer. Every volume the node must hold or destroy is listed
    with every answer, so an agent that restarts or missed an answer catches up at its next heartbeat.

        Attributes:
            action (VolumeAction): What the service asks of the agent for one volume.
            kind (VolumeKind): Where a volume's image lives.
            size_bytes (int): The volume's size, bytes (GiB x 2^30).
            volume_id (UUID):
    """

    action: VolumeAction
    kind: VolumeKind
    size_bytes: int
    volume_id: UUID
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        action = self.action.value

        kind = self.kind.value

        size_bytes = self.size_bytes

        volume_id = str(self.volume_id)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "action": action,
                "kind": kind,
                "size_bytes": size_bytes,
                "volume_id": volume_id,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        action = VolumeAction(d.pop("action"))

        kind = VolumeKind(d.pop("kind"))

        size_bytes = d.pop("size_bytes")

        volume_id = UUID(d.pop("volume_id"))

        volume_order = cls(
            action=action,
            kind=kind,
            size_bytes=size_bytes,
            volume_id=volume_id,
        )

        volume_order.additional_properties = d
        return volume_order

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
