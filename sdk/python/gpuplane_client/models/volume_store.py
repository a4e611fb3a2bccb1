from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

from ..models.volume_kind import VolumeKind

T = TypeVar("T", bound="VolumeStore")


@_attrs_define
class VolumeStore:
    """A volume store the agent offers, with its space now (reported with every heartbeat).

    Attributes:
        free_bytes (int): Free space on it, bytes (images are sparse: what a volume has not written yet is still free
            here).
        kind (VolumeKind): Where a volume's image lives.
        total_bytes (int): Size of the filesystem that holds the images, bytes.
    """

    free_bytes: int
    kind: VolumeKind
    total_bytes: int

    def to_dict(self) -> dict[str, Any]:
        free_bytes = self.free_bytes

        kind = self.kind.value

        total_bytes = self.total_bytes

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "free_bytes": free_bytes,
                "kind": kind,
                "total_bytes": total_bytes,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        free_bytes = d.pop("free_bytes")

        kind = VolumeKind(d.pop("kind"))

        total_bytes = d.pop("total_bytes")

        volume_store = cls(
            free_bytes=free_bytes,
            kind=kind,
            total_bytes=total_bytes,
        )

        return volume_store
