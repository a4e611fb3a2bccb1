from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.lease_event_detail_type_0 import LeaseEventDetailType0


T = TypeVar("T", bound="LeaseEvent")


@_attrs_define
class LeaseEvent:
    """One entry of a lease's history.

    Attributes:
        actor (str): `tenant:<key id>`, `operator:<key id>` or `system`.
        at (datetime.datetime):
        id (UUID):
        kind (str): e.g. `created`, `queued`, `allocated`, `extended`, `released`, `expired`, `terminated`,
            `interrupted`.
        detail (LeaseEventDetailType0 | None | Unset):
        from_state (None | str | Unset):
        reason (None | str | Unset):
        to_state (None | str | Unset):
    """

    actor: str
    at: datetime.datetime
    id: UUID
    kind: str
    detail: LeaseEventDetailType0 | None | Unset = UNSET
    from_state: None | str | Unset = UNSET
    reason: None | str | Unset = UNSET
    to_state: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.lease_event_detail_type_0 import LeaseEventDetailType0

        actor = self.actor

        at = self.at.isoformat()

        id = str(self.id)

        kind = self.kind

        detail: dict[str, Any] | None | Unset
        if isinstance(self.detail, Unset):
            detail = UNSET
        elif isinstance(self.detail, LeaseEventDetailType0):
            detail = self.detail.to_dict()
        else:
            detail = self.detail

        from_state: None | str | Unset
        if isinstance(self.from_state, Unset):
            from_state = UNSET
        else:
            from_state = self.from_state

        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        else:
            reason = self.reason

        to_state: None | str | Unset
        if isinstance(self.to_state, Unset):
            to_state = UNSET
        else:
            to_state = self.to_state

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "actor": actor,
                "at": at,
                "id": id,
                "kind": kind,
            }
        )
        if detail is not UNSET:
            field_dict["detail"] = detail
        if from_state is not UNSET:
            field_dict["from_state"] = from_state
        if reason is not UNSET:
            field_dict["reason"] = reason
        if to_state is not UNSET:
            field_dict["to_state"] = to_state

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.lease_event_detail_type_0 import LeaseEventDetailType0

        d = dict(src_dict)
        actor = d.pop("actor")

        at = datetime.datetime.fromisoformat(d.pop("at"))

        id = UUID(d.pop("id"))

        kind = d.pop("kind")

        def _parse_detail(data: object) -> LeaseEventDetailType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                detail_type_0 = LeaseEventDetailType0.from_dict(data)

                return detail_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(LeaseEventDetailType0 | None | Unset, data)

        detail = _parse_detail(d.pop("detail", UNSET))

        def _parse_from_state(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        from_state = _parse_from_state(d.pop("from_state", UNSET))

        def _parse_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))

        def _parse_to_state(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        to_state = _parse_to_state(d.pop("to_state", UNSET))

        lease_event = cls(
            actor=actor,
            at=at,
            id=id,
            kind=kind,
            detail=detail,
            from_state=from_state,
            reason=reason,
            to_state=to_state,
        )

        lease_event.additional_properties = d
        return lease_event

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
