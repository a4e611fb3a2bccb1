from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="RotateApiKeyRequest")


@_attrs_define
class RotateApiKeyRequest:
    """
    Example:
        {'grace_seconds': 3600}

    Attributes:
        grace_seconds (int | None | Unset): How long the old key keeps working, in seconds (0-604800, default 86400). 0
            revokes it at once.
    """

    grace_seconds: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        grace_seconds: int | None | Unset
        if isinstance(self.grace_seconds, Unset):
            grace_seconds = UNSET
        else:
            grace_seconds = self.grace_seconds

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if grace_seconds is not UNSET:
            field_dict["grace_seconds"] = grace_seconds

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_grace_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        grace_seconds = _parse_grace_seconds(d.pop("grace_seconds", UNSET))

        rotate_api_key_request = cls(
            grace_seconds=grace_seconds,
        )

        return rotate_api_key_request
