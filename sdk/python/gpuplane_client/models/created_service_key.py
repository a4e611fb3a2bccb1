from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="CreatedServiceKey")


@_attrs_define
class CreatedServiceKey:
    """A new key, with its secret (shown only here).

    Attributes:
        created_at (datetime.datetime):
        id (UUID):
        name (str):
        prefix (str): The first characters of the secret, to tell keys apart.
        service_id (UUID):
        secret (str): The key: callers send `Authorization: Bearer <secret>` to the service's URL. Not shown again.
        revoked_at (datetime.datetime | None | Unset): Set once revoked: the key never works again.
    """

    created_at: datetime.datetime
    id: UUID
    name: str
    prefix: str
    service_id: UUID
    secret: str
    revoked_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at = self.created_at.isoformat()

        id = str(self.id)

        name = self.name

        prefix = self.prefix

        service_id = str(self.service_id)

        secret = self.secret

        revoked_at: None | str | Unset
        if isinstance(self.revoked_at, Unset):
            revoked_at = UNSET
        elif isinstance(self.revoked_at, datetime.datetime):
            revoked_at = self.revoked_at.isoformat()
        else:
            revoked_at = self.revoked_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at": created_at,
                "id": id,
                "name": name,
                "prefix": prefix,
                "service_id": service_id,
                "secret": secret,
            }
        )
        if revoked_at is not UNSET:
            field_dict["revoked_at"] = revoked_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        id = UUID(d.pop("id"))

        name = d.pop("name")

        prefix = d.pop("prefix")

        service_id = UUID(d.pop("service_id"))

        secret = d.pop("secret")

        def _parse_revoked_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                revoked_at_type_0 = datetime.datetime.fromisoformat(data)

                return revoked_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        revoked_at = _parse_revoked_at(d.pop("revoked_at", UNSET))

        created_service_key = cls(
            created_at=created_at,
            id=id,
            name=name,
            prefix=prefix,
            service_id=service_id,
            secret=secret,
            revoked_at=revoked_at,
        )

        created_service_key.additional_properties = d
        return created_service_key

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
