from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.tenant_status import TenantStatus
from ..types import UNSET, Unset

T = TypeVar("T", bound="UpdateTenantRequest")


@_attrs_define
class UpdateTenantRequest:
    """
    Example:
        {'status': 'suspended'}

    Attributes:
        name (None | str | Unset):
        status (None | TenantStatus | Unset):
    """

    name: None | str | Unset = UNSET
    status: None | TenantStatus | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        name: None | str | Unset
        if isinstance(self.name, Unset):
            name = UNSET
        else:
            name = self.name

        status: None | str | Unset
        if isinstance(self.status, Unset):
            status = UNSET
        elif isinstance(self.status, TenantStatus):
            status = self.status.value
        else:
            status = self.status

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if name is not UNSET:
            field_dict["name"] = name
        if status is not UNSET:
            field_dict["status"] = status

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        name = _parse_name(d.pop("name", UNSET))

        def _parse_status(data: object) -> None | TenantStatus | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                status_type_0 = TenantStatus(data)

                return status_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | TenantStatus | Unset, data)

        status = _parse_status(d.pop("status", UNSET))

        update_tenant_request = cls(
            name=name,
            status=status,
        )

        return update_tenant_request
