from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.audit_action import AuditAction
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.audit_event_detail import AuditEventDetail


T = TypeVar("T", bound="AuditEvent")


@_attrs_define
class AuditEvent:
    """One audited change.

    Attributes:
        action (AuditAction): What an audit event records.
        at (datetime.datetime):
        detail (AuditEventDetail): Facts of the change, e.g. `{"successor_key_id": ..., "grace_seconds": 86400}` for a
            rotation.
        id (UUID):
        subject_key_id (UUID): The API key the change is about.
        actor_key_id (None | Unset | UUID): The API key whose token made the change; absent for the command line
            (`gpuplane bootstrap`).
        tenant_id (None | Unset | UUID): The tenant of the subject; absent for operator keys.
    """

    action: AuditAction
    at: datetime.datetime
    detail: AuditEventDetail
    id: UUID
    subject_key_id: UUID
    actor_key_id: None | Unset | UUID = UNSET
    tenant_id: None | Unset | UUID = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        action = self.action.value

        at = self.at.isoformat()

        detail = self.detail.to_dict()

        id = str(self.id)

        subject_key_id = str(self.subject_key_id)

        actor_key_id: None | str | Unset
        if isinstance(self.actor_key_id, Unset):
            actor_key_id = UNSET
        elif isinstance(self.actor_key_id, UUID):
            actor_key_id = str(self.actor_key_id)
        else:
            actor_key_id = self.actor_key_id

        tenant_id: None | str | Unset
        if isinstance(self.tenant_id, Unset):
            tenant_id = UNSET
        elif isinstance(self.tenant_id, UUID):
            tenant_id = str(self.tenant_id)
        else:
            tenant_id = self.tenant_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "action": action,
                "at": at,
                "detail": detail,
                "id": id,
                "subject_key_id": subject_key_id,
            }
        )
        if actor_key_id is not UNSET:
            field_dict["actor_key_id"] = actor_key_id
        if tenant_id is not UNSET:
            field_dict["tenant_id"] = tenant_id

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.audit_event_detail import AuditEventDetail

        d = dict(src_dict)
        action = AuditAction(d.pop("action"))

        at = datetime.datetime.fromisoformat(d.pop("at"))

        detail = AuditEventDetail.from_dict(d.pop("detail"))

        id = UUID(d.pop("id"))

        subject_key_id = UUID(d.pop("subject_key_id"))

        def _parse_actor_key_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                actor_key_id_type_0 = UUID(data)

                return actor_key_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        actor_key_id = _parse_actor_key_id(d.pop("actor_key_id", UNSET))

        def _parse_tenant_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                tenant_id_type_0 = UUID(data)

                return tenant_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        tenant_id = _parse_tenant_id(d.pop("tenant_id", UNSET))

        audit_event = cls(
            action=action,
            at=at,
            detail=detail,
            id=id,
            subject_key_id=subject_key_id,
            actor_key_id=actor_key_id,
            tenant_id=tenant_id,
        )

        audit_event.additional_properties = d
        return audit_event

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
