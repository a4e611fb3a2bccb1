from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="Volume")


@_attrs_define
class Volume:
    """A tenant's volume, as the API shows it.

    Attributes:
        attached_to (list[UUID]): The leases it is attached to now (one read-write, or any number read-only).
        available (bool): False while that host is offline: a host volume cannot be mounted then (its data is kept, and
            it is not
            billed for the time its host is silent).
        charged_minor (int): What it has been charged so far, minor units of `currency`.
        created_at (datetime.datetime):
        currency (str):
        id (UUID):
        kind (str): `host` (kept on one host: leases that attach it are placed there) or `pool` (on the pool's shared
            filesystem: any host of the pool can mount it).
        name (str):
        node (str): The host that holds a host volume (or makes a pool volume).
        pool_id (UUID):
        pool_name (str):
        size_gib (int):
        state (str): `creating` (its host's agent makes it at its next heartbeat), `ready`, `failed` (never made, never
            charged), `deleting` (billing stopped; its agent destroys the data), `deleted`.
        delete_after_idle_days (int | None | Unset): Deleted automatically once detached this many days (a `volume.idle`
            webhook a day before); null: never.
        deleted_at (datetime.datetime | None | Unset):
        ready_at (datetime.datetime | None | Unset):
        state_reason (None | str | Unset): Why it failed, or why its last grow has not taken effect.
        used_bytes (int | None | Unset): What is written in it, bytes, as its agent last reported.
    """

    attached_to: list[UUID]
    available: bool
    charged_minor: int
    created_at: datetime.datetime
    currency: str
    id: UUID
    kind: str
    name: str
    node: str
    pool_id: UUID
    pool_name: str
    size_gib: int
    state: str
    delete_after_idle_days: int | None | Unset = UNSET
    deleted_at: datetime.datetime | None | Unset = UNSET
    ready_at: datetime.datetime | None | Unset = UNSET
    state_reason: None | str | Unset = UNSET
    used_bytes: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        attached_to = []
        for attached_to_item_data in self.attached_to:
            attached_to_item = str(attached_to_item_data)
            attached_to.append(attached_to_item)

        available = self.available

        charged_minor = self.charged_minor

        created_at = self.created_at.isoformat()

        currency = self.currency

        id = str(self.id)

        kind = self.kind

        name = self.name

        node = self.node

        pool_id = str(self.pool_id)

        pool_name = self.pool_name

        size_gib = self.size_gib

        state = self.state

        delete_after_idle_days: int | None | Unset
        if isinstance(self.delete_after_idle_days, Unset):
            delete_after_idle_days = UNSET
        else:
            delete_after_idle_days = self.delete_after_idle_days

        deleted_at: None | str | Unset
        if isinstance(self.deleted_at, Unset):
            deleted_at = UNSET
        elif isinstance(self.deleted_at, datetime.datetime):
            deleted_at = self.deleted_at.isoformat()
        else:
            deleted_at = self.deleted_at

        ready_at: None | str | Unset
        if isinstance(self.ready_at, Unset):
            ready_at = UNSET
        elif isinstance(self.ready_at, datetime.datetime):
            ready_at = self.ready_at.isoformat()
        else:
            ready_at = self.ready_at

        state_reason: None | str | Unset
        if isinstance(self.state_reason, Unset):
            state_reason = UNSET
        else:
            state_reason = self.state_reason

        used_bytes: int | None | Unset
        if isinstance(self.used_bytes, Unset):
            used_bytes = UNSET
        else:
            used_bytes = self.used_bytes

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "attached_to": attached_to,
                "available": available,
                "charged_minor": charged_minor,
                "created_at": created_at,
                "currency": currency,
                "id": id,
                "kind": kind,
                "name": name,
                "node": node,
                "pool_id": pool_id,
                "pool_name": pool_name,
                "size_gib": size_gib,
                "state": state,
            }
        )
        if delete_after_idle_days is not UNSET:
            field_dict["delete_after_idle_days"] = delete_after_idle_days
        if deleted_at is not UNSET:
            field_dict["deleted_at"] = deleted_at
        if ready_at is not UNSET:
            field_dict["ready_at"] = ready_at
        if state_reason is not UNSET:
            field_dict["state_reason"] = state_reason
        if used_bytes is not UNSET:
            field_dict["used_bytes"] = used_bytes

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        attached_to = []
        _attached_to = d.pop("attached_to")
        for attached_to_item_data in _attached_to:
            attached_to_item = UUID(attached_to_item_data)

            attached_to.append(attached_to_item)

        available = d.pop("available")

        charged_minor = d.pop("charged_minor")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        currency = d.pop("currency")

        id = UUID(d.pop("id"))

        kind = d.pop("kind")

        name = d.pop("name")

        node = d.pop("node")

        pool_id = UUID(d.pop("pool_id"))

        pool_name = d.pop("pool_name")

        size_gib = d.pop("size_gib")

        state = d.pop("state")

        def _parse_delete_after_idle_days(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        delete_after_idle_days = _parse_delete_after_idle_days(
            d.pop("delete_after_idle_days", UNSET)
        )

        def _parse_deleted_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                deleted_at_type_0 = datetime.datetime.fromisoformat(data)

                return deleted_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        deleted_at = _parse_deleted_at(d.pop("deleted_at", UNSET))

        def _parse_ready_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                ready_at_type_0 = datetime.datetime.fromisoformat(data)

                return ready_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        ready_at = _parse_ready_at(d.pop("ready_at", UNSET))

        def _parse_state_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        state_reason = _parse_state_reason(d.pop("state_reason", UNSET))

        def _parse_used_bytes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        used_bytes = _parse_used_bytes(d.pop("used_bytes", UNSET))

        volume = cls(
            attached_to=attached_to,
            available=available,
            charged_minor=charged_minor,
            created_at=created_at,
            currency=currency,
            id=id,
            kind=kind,
            name=name,
            node=node,
            pool_id=pool_id,
            pool_name=pool_name,
            size_gib=size_gib,
            state=state,
            delete_after_idle_days=delete_after_idle_days,
            deleted_at=deleted_at,
            ready_at=ready_at,
            state_reason=state_reason,
            used_bytes=used_bytes,
        )

        volume.additional_properties = d
        return volume

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
