from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="TokenRequest")


@_attrs_define
class TokenRequest:
    """
    Example:
        {'api_key': 'gpk_4f9pQm2c7HkYbXrS1aTzLw0vNeUd8GjKoPiQ3sBcFhM'}

    Attributes:
        api_key (str): An API key (`gpk_...`).
    """

    api_key: str

    def to_dict(self) -> dict[str, Any]:
        api_key = self.api_key

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "api_key": api_key,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        api_key = d.pop("api_key")

        token_request = cls(
            api_key=api_key,
        )

        return token_request
