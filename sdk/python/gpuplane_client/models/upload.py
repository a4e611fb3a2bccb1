from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="Upload")


@_attrs_define
class Upload:
    """An uploaded archive.

    Example:
        {'created_at': '2026-12-05T10:00:00Z', 'digest':
            'sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08', 'files': 12, 'last_used_at':
            '2026-12-05T10:02:00Z', 'size_bytes': 18233, 'unpacked_bytes': 64310}

    Attributes:
        created_at (datetime.datetime):
        digest (str): `sha256:` and the archive's SHA-256: what a job's `workdir` names.
        files (int): Regular files in it.
        last_used_at (datetime.datetime): When it was last sent or named by a new job: an upload no running job names is
            deleted the service's
            upload retention after this (docs/uploads.md).
        size_bytes (int): The archive's size.
        unpacked_bytes (int): What its files add up to unpacked.
    """

    created_at: datetime.datetime
    digest: str
    files: int
    last_used_at: datetime.datetime
    size_bytes: int
    unpacked_bytes: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at = self.created_at.isoformat()

        digest = self.digest

        files = self.files

        last_used_at = self.last_used_at.isoformat()

        size_bytes = self.size_bytes

        unpacked_bytes = self.unpacked_bytes

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at": created_at,
                "digest": digest,
                "files": files,
                "last_used_at": last_used_at,
                "size_bytes": size_bytes,
                "unpacked_bytes": unpacked_bytes,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        digest = d.pop("digest")

        files = d.pop("files")

        last_used_at = datetime.datetime.fromisoformat(d.pop("last_used_at"))

        size_bytes = d.pop("size_bytes")

        unpacked_bytes = d.pop("unpacked_bytes")

        upload = cls(
            created_at=created_at,
            digest=digest,
            files=files,
            last_used_at=last_used_at,
            size_bytes=size_bytes,
            unpacked_bytes=unpacked_bytes,
        )

        upload.additional_properties = d
        return upload

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
