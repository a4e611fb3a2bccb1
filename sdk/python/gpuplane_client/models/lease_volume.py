from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.volume_kind import VolumeKind

T = TypeVar("T", bound="LeaseVolume")


@_attrs_define
class LeaseVolume:
    """A volume attached to a lease, as the lease's agents mount it.

    Attributes:
        kind (VolumeKind): Where a volume's image lives.
        mount (str): Mounted at `/volumes/<mount>`: 1-63 characters, a-z, 0-9, `.`, `_`, `-`, starting with a letter or
            digit.
        read_only (bool):
        volume_id (UUID):
    """

    kind: VolumeKind
    mount: str
    read_only: bool
    volume_id: UUID
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        kind = self.kind.value

        mount = self.mount

        read_only = self.read_only

        volume_id = str(self.volume_id)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "kind": kind,
                "mount": mount,
                "read_only": read_only,
                "volume_id": volume_id,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        kind = VolumeKind(d.pop("kind"))

        mount = d.pop("mount")

        read_only = d.pop("read_only")

        volume_id = UUID(d.pop("volume_id"))

        lease_volume = cls(
            kind=kind,
            mount=mount,
            read_only=read_only,
            volume_id=volume_id,
        )

        lease_volume.additional_properties = d
        return lease_volume

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
