from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="CreatedJoinToken")


@_attrs_define
class CreatedJoinToken:
    """
    Attributes:
        created_at (datetime.datetime):
        expires_at (datetime.datetime):
        id (UUID):
        max_uses (int):
        pool_id (UUID):
        prefix (str): The first characters of the token, to recognise it.
        uses (int):
        join_token (str): The secret token for `gpuplane agent --join-token`. Shown only now.
        revoked_at (datetime.datetime | None | Unset):
    """

    created_at: datetime.datetime
    expires_at: datetime.datetime
    id: UUID
    max_uses: int
    pool_id: UUID
    prefix: str
    uses: int
    join_token: str
    revoked_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at = self.created_at.isoformat()

        expires_at = self.expires_at.isoformat()

        id = str(self.id)

        max_uses = self.max_uses

        pool_id = str(self.pool_id)

        prefix = self.prefix

        uses = self.uses

        join_token = self.join_token

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
                "expires_at": expires_at,
                "id": id,
                "max_uses": max_uses,
                "pool_id": pool_id,
                "prefix": prefix,
                "uses": uses,
                "join_token": join_token,
            }
        )
        if revoked_at is not UNSET:
            field_dict["revoked_at"] = revoked_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        expires_at = datetime.datetime.fromisoformat(d.pop("expires_at"))

        id = UUID(d.pop("id"))

        max_uses = d.pop("max_uses")

        pool_id = UUID(d.pop("pool_id"))

        prefix = d.pop("prefix")

        uses = d.pop("uses")

        join_token = d.pop("join_token")

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

        created_join_token = cls(
            created_at=created_at,
            expires_at=expires_at,
            id=id,
            max_uses=max_uses,
            pool_id=pool_id,
            prefix=prefix,
            uses=uses,
            join_token=join_token,
            revoked_at=revoked_at,
        )

        created_join_token.additional_properties = d
        return created_join_token

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
