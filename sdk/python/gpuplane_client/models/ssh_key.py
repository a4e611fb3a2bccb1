from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="SshKey")


@_attrs_define
class SshKey:
    """A registered key. The key material itself is not returned: the fingerprint identifies it.

    Attributes:
        created_at (datetime.datetime):
        fingerprint (str): As `ssh-keygen -l -E sha256` prints it: `SHA256:...`.
        id (UUID):
        key_type (str): The key's type, e.g. `ssh-ed25519`.
        name (str):
    """

    created_at: datetime.datetime
    fingerprint: str
    id: UUID
    key_type: str
    name: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at = self.created_at.isoformat()

        fingerprint = self.fingerprint

        id = str(self.id)

        key_type = self.key_type

        name = self.name

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at": created_at,
                "fingerprint": fingerprint,
                "id": id,
                "key_type": key_type,
                "name": name,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        fingerprint = d.pop("fingerprint")

        id = UUID(d.pop("id"))

        key_type = d.pop("key_type")

        name = d.pop("name")

        ssh_key = cls(
            created_at=created_at,
            fingerprint=fingerprint,
            id=id,
            key_type=key_type,
            name=name,
        )

        ssh_key.additional_properties = d
        return ssh_key

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
