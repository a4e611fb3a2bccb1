from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="UpdateServiceRequest")


@_attrs_define
class UpdateServiceRequest:
    """
    Example:
        {'public': False, 'rate_limit_per_minute': 600}

    Attributes:
        public (bool | None | Unset): Callable without a key.
        rate_limit_per_minute (int | None | Unset): Requests per minute per key (per client address when public),
            1-1000000; `null`: unlimited.
    """

    public: bool | None | Unset = UNSET
    rate_limit_per_minute: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        public: bool | None | Unset
        if isinstance(self.public, Unset):
            public = UNSET
        else:
            public = self.public

        rate_limit_per_minute: int | None | Unset
        if isinstance(self.rate_limit_per_minute, Unset):
            rate_limit_per_minute = UNSET
        else:
            rate_limit_per_minute = self.rate_limit_per_minute

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if public is not UNSET:
            field_dict["public"] = public
        if rate_limit_per_minute is not UNSET:
            field_dict["rate_limit_per_minute"] = rate_limit_per_minute

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_public(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        public = _parse_public(d.pop("public", UNSET))

        def _parse_rate_limit_per_minute(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        rate_limit_per_minute = _parse_rate_limit_per_minute(
            d.pop("rate_limit_per_minute", UNSET)
        )

        update_service_request = cls(
            public=public,
            rate_limit_per_minute=rate_limit_per_minute,
        )

        return update_service_request
