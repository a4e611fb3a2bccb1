from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="LivenessHold")


@_attrs_define
class LivenessHold:
    """Too many of a pool's agent nodes went silent at once: while `released_at` is null, no lease in the pool is
    interrupted for node silence.

        Attributes:
            id (UUID):
            opened_at (datetime.datetime):
            pool_id (UUID):
            silent_nodes (int): Silent agent nodes when the hold opened.
            total_nodes (int): Agent nodes of the pool when the hold opened.
            released_at (datetime.datetime | None | Unset): When interruptions resumed (operator release, or the pool
                recovered).
            released_by (None | str | Unset): `operator:<key id>` or `system: the pool recovered`.
    """

    id: UUID
    opened_at: datetime.datetime
    pool_id: UUID
    silent_nodes: int
    total_nodes: int
    released_at: datetime.datetime | None | Unset = UNSET
    released_by: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = str(self.id)

        opened_at = self.opened_at.isoformat()

        pool_id = str(self.pool_id)

        silent_nodes = self.silent_nodes

        total_nodes = self.total_nodes

        released_at: None | str | Unset
        if isinstance(self.released_at, Unset):
            released_at = UNSET
        elif isinstance(self.released_at, datetime.datetime):
            released_at = self.released_at.isoformat()
        else:
            released_at = self.released_at

        released_by: None | str | Unset
        if isinstance(self.released_by, Unset):
            released_by = UNSET
        else:
            released_by = self.released_by

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "opened_at": opened_at,
                "pool_id": pool_id,
                "silent_nodes": silent_nodes,
                "total_nodes": total_nodes,
            }
        )
        if released_at is not UNSET:
            field_dict["released_at"] = released_at
        if released_by is not UNSET:
            field_dict["released_by"] = released_by

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        id = UUID(d.pop("id"))

        opened_at = datetime.datetime.fromisoformat(d.pop("opened_at"))

        pool_id = UUID(d.pop("pool_id"))

        silent_nodes = d.pop("silent_nodes")

        total_nodes = d.pop("total_nodes")

        def _parse_released_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                released_at_type_0 = datetime.datetime.fromisoformat(data)

                return released_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        released_at = _parse_released_at(d.pop("released_at", UNSET))

        def _parse_released_by(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        released_by = _parse_released_by(d.pop("released_by", UNSET))

        liveness_hold = cls(
            id=id,
            opened_at=opened_at,
            pool_id=pool_id,
            silent_nodes=silent_nodes,
            total_nodes=total_nodes,
            released_at=released_at,
            released_by=released_by,
        )

        liveness_hold.additional_properties = d
        return liveness_hold

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
