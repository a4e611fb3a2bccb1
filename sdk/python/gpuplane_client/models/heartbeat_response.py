from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.desired_state import DesiredState
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.volume_order import VolumeOrder


T = TypeVar("T", bound="HeartbeatResponse")


@_attrs_define
class HeartbeatResponse:
    """
    Attributes:
        accepted_samples (int): Samples stored (duplicates of already delivered samples are skipped).
        assignments_pending (bool): There is work to fetch at `GET /v1/agent/assignments`.
        desired_state (DesiredState): What the service wants the node to do.
        heartbeat_interval_s (int): Seconds until the next heartbeat.
        volumes (list[VolumeOrder] | Unset): Every volume this node must hold or destroy (only to agents that offer a
            volume store).
    """

    accepted_samples: int
    assignments_pending: bool
    desired_state: DesiredState
    heartbeat_interval_s: int
    volumes: list[VolumeOrder] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        accepted_samples = self.accepted_samples

        assignments_pending = self.assignments_pending

        desired_state = self.desired_state.value

        heartbeat_interval_s = self.heartbeat_interval_s

        volumes: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.volumes, Unset):
            volumes = []
            for volumes_item_data in self.volumes:
                volumes_item = volumes_item_data.to_dict()
                volumes.append(volumes_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "accepted_samples": accepted_samples,
                "assignments_pending": assignments_pending,
                "desired_state": desired_state,
                "heartbeat_interval_s": heartbeat_interval_s,
            }
        )
        if volumes is not UNSET:
            field_dict["volumes"] = volumes

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.volume_order import VolumeOrder

        d = dict(src_dict)
        accepted_samples = d.pop("accepted_samples")

        assignments_pending = d.pop("assignments_pending")

        desired_state = DesiredState(d.pop("desired_state"))

        heartbeat_interval_s = d.pop("heartbeat_interval_s")

        _volumes = d.pop("volumes", UNSET)
        volumes: list[VolumeOrder] | Unset = UNSET
        if _volumes is not UNSET:
            volumes = []
            for volumes_item_data in _volumes:
                volumes_item = VolumeOrder.from_dict(volumes_item_data)

                volumes.append(volumes_item)

        heartbeat_response = cls(
            accepted_samples=accepted_samples,
            assignments_pending=assignments_pending,
            desired_state=desired_state,
            heartbeat_interval_s=heartbeat_interval_s,
            volumes=volumes,
        )

        heartbeat_response.additional_properties = d
        return heartbeat_response

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
