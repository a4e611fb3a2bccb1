from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="Attachment")


@_attrs_define
class Attachment:
    """A volume attached to a lease.

    Attributes:
        attached_at (datetime.datetime):
        lease_id (UUID):
        mount_path (str): Where jobs, image jobs and SSH sessions of the lease find it, on every node: `/volumes/<mount
            name>`.
        read_only (bool):
        volume_id (UUID):
        volume_name (str):
    """

    attached_at: datetime.datetime
    lease_id: UUID
    mount_path: str
    read_only: bool
    volume_id: UUID
    volume_name: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        attached_at = self.attached_at.isoformat()

        lease_id = str(self.lease_id)

        mount_path = self.mount_path

        read_only = self.read_only

        volume_id = str(self.volume_id)

        volume_name = self.volume_name

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "attached_at": attached_at,
                "lease_id": lease_id,
                "mount_path": mount_path,
                "read_only": read_only,
                "volume_id": volume_id,
                "volume_name": volume_name,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        attached_at = datetime.datetime.fromisoformat(d.pop("attached_at"))

        lease_id = UUID(d.pop("lease_id"))

        mount_path = d.pop("mount_path")

        read_only = d.pop("read_only")

        volume_id = UUID(d.pop("volume_id"))

        volume_name = d.pop("volume_name")

        attachment = cls(
            attached_at=attached_at,
            lease_id=lease_id,
            mount_path=mount_path,
            read_only=read_only,
            volume_id=volume_id,
            volume_name=volume_name,
        )

        attachment.additional_properties = d
        return attachment

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
