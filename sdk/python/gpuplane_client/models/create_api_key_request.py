from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

from ..models.tenant_role import TenantRole

T = TypeVar("T", bound="CreateApiKeyRequest")


@_attrs_define
class CreateApiKeyRequest:
    """
    Example:
        {'name': 'ci-pipeline', 'role': 'tenant_member'}

    Attributes:
        name (str): A label for people, 1-100 characters.
        role (TenantRole): The roles a tenant key may have (documentation of [`CreateApiKeyRequest::role`]; `operator`
            is refused).
    """

    name: str
    role: TenantRole

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        role = self.role.value

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
                "role": role,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        name = d.pop("name")

        role = TenantRole(d.pop("role"))

        create_api_key_request = cls(
            name=name,
            role=role,
        )

        return create_api_key_request
