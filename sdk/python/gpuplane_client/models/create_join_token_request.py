from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="CreateJoinTokenRequest")


@_attrs_define
class CreateJoinTokenRequest:
    """
    Example:
        {'max_uses': 16, 'ttl_hours': 24}

    Attributes:
        max_uses (int | Unset): How many registrations it allows (1-100000, default 1).
        ttl_hours (int | Unset): Hours until it expires (1-8760, default 24).
    """

    max_uses: int | Unset = UNSET
    ttl_hours: int | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        max_uses = self.max_uses

        ttl_hours = self.ttl_hours

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if max_uses is not UNSET:
            field_dict["max_uses"] = max_uses
        if ttl_hours is not UNSET:
            field_dict["ttl_hours"] = ttl_hours

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        max_uses = d.pop("max_uses", UNSET)

        ttl_hours = d.pop("ttl_hours", UNSET)

        create_join_token_request = cls(
            max_uses=max_uses,
            ttl_hours=ttl_hours,
        )

        return create_join_token_request
