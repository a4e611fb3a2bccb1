from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..models.volume_kind import VolumeKind
from ..types import UNSET, Unset

T = TypeVar("T", bound="CreateVolumeRequest")


@_attrs_define
class CreateVolumeRequest:
    """
    Example:
        {'name': 'checkpoints', 'pool_id': '0193a0c1-0000-7000-8000-000000000001', 'size_gib': 100}

    Attributes:
        name (str): 1-63 characters: a-z, 0-9, `.`, `_`, `-`, starting with a letter or digit; unique among the tenant's
            volumes that are not deleted.
        pool_id (UUID): The pool whose hosts hold it (its leases can attach it).
        size_gib (int): GiB, 1-65536. It can grow later, never shrink.
        delete_after_idle_days (int | None | Unset): Delete it once detached this many days (1-365), with a
            `volume.idle` webhook a day before; default never.
        kind (None | Unset | VolumeKind):
    """

    name: str
    pool_id: UUID
    size_gib: int
    delete_after_idle_days: int | None | Unset = UNSET
    kind: None | Unset | VolumeKind = UNSET

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        pool_id = str(self.pool_id)

        size_gib = self.size_gib

        delete_after_idle_days: int | None | Unset
        if isinstance(self.delete_after_idle_days, Unset):
            delete_after_idle_days = UNSET
        else:
            delete_after_idle_days = self.delete_after_idle_days

        kind: None | str | Unset
        if isinstance(self.kind, Unset):
            kind = UNSET
        elif isinstance(self.kind, VolumeKind):
            kind = self.kind.value
        else:
            kind = self.kind

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
                "pool_id": pool_id,
                "size_gib": size_gib,
            }
        )
        if delete_after_idle_days is not UNSET:
            field_dict["delete_after_idle_days"] = delete_after_idle_days
        if kind is not UNSET:
            field_dict["kind"] = kind

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        name = d.pop("name")

        pool_id = UUID(d.pop("pool_id"))

        size_gib = d.pop("size_gib")

        def _parse_delete_after_idle_days(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        delete_after_idle_days = _parse_delete_after_idle_days(
            d.pop("delete_after_idle_days", UNSET)
        )

        def _parse_kind(data: object) -> None | Unset | VolumeKind:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                kind_type_0 = VolumeKind(data)

                return kind_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | VolumeKind, data)

        kind = _parse_kind(d.pop("kind", UNSET))

        create_volume_request = cls(
            name=name,
            pool_id=pool_id,
            size_gib=size_gib,
            delete_after_idle_days=delete_after_idle_days,
            kind=kind,
        )

        return create_volume_request
