from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="AttachVolumeRequest")


@_attrs_define
class AttachVolumeRequest:
    """
    Example:
        {'mount': 'ckpt', 'volume_id': '0193a0c1-0000-7000-8000-000000000002'}

    Attributes:
        volume_id (UUID):
        mount (None | str | Unset): Mounted at `/volumes/<mount>` on every node of the lease: 1-63 characters, a-z, 0-9,
            `.`, `_`, `-`,
            starting with a letter or digit. Default: the volume's name.
        read_only (bool | Unset): Read-only (any number of leases may read a volume at once); default read-write (one
            lease at a time).
    """

    volume_id: UUID
    mount: None | str | Unset = UNSET
    read_only: bool | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        volume_id = str(self.volume_id)

        mount: None | str | Unset
        if isinstance(self.mount, Unset):
            mount = UNSET
        else:
            mount = self.mount

        read_only = self.read_only

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "volume_id": volume_id,
            }
        )
        if mount is not UNSET:
            field_dict["mount"] = mount
        if read_only is not UNSET:
            field_dict["read_only"] = read_only

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        volume_id = UUID(d.pop("volume_id"))

        def _parse_mount(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        mount = _parse_mount(d.pop("mount", UNSET))

        read_only = d.pop("read_only", UNSET)

        attach_volume_request = cls(
            volume_id=volume_id,
            mount=mount,
            read_only=read_only,
        )

        return attach_volume_request
