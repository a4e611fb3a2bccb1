from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="CreateWebhookRequest")


@_attrs_define
class CreateWebhookRequest:
    """
    Example:
        {'description': 'on-call', 'event_types': ['lease.*', 'job.failed'], 'url':
            'https://hooks.example.com/gpuplane'}

    Attributes:
        event_types (list[str]): 1-50 event type patterns: `*`, `lease.*`, `lease.ended` ...
        url (str): An https URL whose host resolves only to public addresses (plain http and private addresses only when
            the
            service runs with `--webhook-allow-private`). No credentials, no fragment.
        description (None | str | Unset): At most 500 characters.
        enabled (bool | None | Unset): Default true.
    """

    event_types: list[str]
    url: str
    description: None | str | Unset = UNSET
    enabled: bool | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        event_types = self.event_types

        url = self.url

        description: None | str | Unset
        if isinstance(self.description, Unset):
            description = UNSET
        else:
            description = self.description

        enabled: bool | None | Unset
        if isinstance(self.enabled, Unset):
            enabled = UNSET
        else:
            enabled = self.enabled

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "event_types": event_types,
                "url": url,
            }
        )
        if description is not UNSET:
            field_dict["description"] = description
        if enabled is not UNSET:
            field_dict["enabled"] = enabled

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        event_types = cast(list[str], d.pop("event_types"))

        url = d.pop("url")

        def _parse_description(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        description = _parse_description(d.pop("description", UNSET))

        def _parse_enabled(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        enabled = _parse_enabled(d.pop("enabled", UNSET))

        create_webhook_request = cls(
            event_types=event_types,
            url=url,
            description=description,
            enabled=enabled,
        )

        return create_webhook_request
