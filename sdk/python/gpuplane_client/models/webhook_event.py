from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.webhook_event_data import WebhookEventData


T = TypeVar("T", bound="WebhookEvent")


@_attrs_define
class WebhookEvent:
    """An event, as its webhook body carries it.

    Attributes:
        data (WebhookEventData):
        id (UUID): Stable across retries: the `webhook-id` header.
        timestamp (datetime.datetime):
        type_ (str):
    """

    data: WebhookEventData
    id: UUID
    timestamp: datetime.datetime
    type_: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = self.data.to_dict()

        id = str(self.id)

        timestamp = self.timestamp.isoformat()

        type_ = self.type_

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "data": data,
                "id": id,
                "timestamp": timestamp,
                "type": type_,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.webhook_event_data import WebhookEventData

        d = dict(src_dict)
        data = WebhookEventData.from_dict(d.pop("data"))

        id = UUID(d.pop("id"))

        timestamp = datetime.datetime.fromisoformat(d.pop("timestamp"))

        type_ = d.pop("type")

        webhook_event = cls(
            data=data,
            id=id,
            timestamp=timestamp,
            type_=type_,
        )

        webhook_event.additional_properties = d
        return webhook_event

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
