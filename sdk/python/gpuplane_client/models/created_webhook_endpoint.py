from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="CreatedWebhookEndpoint")


@_attrs_define
class CreatedWebhookEndpoint:
    """A new endpoint, with its signing secret: the only time the secret is shown.

    Attributes:
        created_at (datetime.datetime):
        description (str):
        enabled (bool): Disabled endpoints receive nothing (the service disables one that failed for days).
        event_types (list[str]): Event type patterns it receives: `*`, `lease.*`, `lease.ended` ...
        id (UUID):
        updated_at (datetime.datetime):
        url (str):
        secret (str): `whsec_` and the base64 of 32 random bytes: the HMAC-SHA256 key of the `webhook-signature` header
            (Standard Webhooks). Store it now: it is not shown again.
        disabled_reason (None | str | Unset): Why the service disabled it, if it did.
    """

    created_at: datetime.datetime
    description: str
    enabled: bool
    event_types: list[str]
    id: UUID
    updated_at: datetime.datetime
    url: str
    secret: str
    disabled_reason: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at = self.created_at.isoformat()

        description = self.description

        enabled = self.enabled

        event_types = self.event_types

        id = str(self.id)

        updated_at = self.updated_at.isoformat()

        url = self.url

        secret = self.secret

        disabled_reason: None | str | Unset
        if isinstance(self.disabled_reason, Unset):
            disabled_reason = UNSET
        else:
            disabled_reason = self.disabled_reason

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at": created_at,
                "description": description,
                "enabled": enabled,
                "event_types": event_types,
                "id": id,
                "updated_at": updated_at,
                "url": url,
                "secret": secret,
            }
        )
        if disabled_reason is not UNSET:
            field_dict["disabled_reason"] = disabled_reason

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        description = d.pop("description")

        enabled = d.pop("enabled")

        event_types = cast(list[str], d.pop("event_types"))

        id = UUID(d.pop("id"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        url = d.pop("url")

        secret = d.pop("secret")

        def _parse_disabled_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        disabled_reason = _parse_disabled_reason(d.pop("disabled_reason", UNSET))

        created_webhook_endpoint = cls(
            created_at=created_at,
            description=description,
            enabled=enabled,
            event_types=event_types,
            id=id,
            updated_at=updated_at,
            url=url,
            secret=secret,
            disabled_reason=disabled_reason,
        )

        created_webhook_endpoint.additional_properties = d
        return created_webhook_endpoint

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
