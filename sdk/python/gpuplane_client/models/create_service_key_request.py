from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="CreateServiceKeyRequest")


@_attrs_define
class CreateServiceKeyRequest:
    """
    Example:
        {'name': 'mobile-app'}

    Attributes:
        name (str): What the key is for, 1-100 characters, no control characters.
    """

    name: str

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        name = d.pop("name")

        create_service_key_request = cls(
            name=name,
        )

        return create_service_key_request
