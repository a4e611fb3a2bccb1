from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.tenant_status import TenantStatus

if TYPE_CHECKING:
    from ..models.quotas import Quotas


T = TypeVar("T", bound="PageTenantItemsItem")


@_attrs_define
class PageTenantItemsItem:
    """
    Attributes:
        created_at (datetime.datetime):
        id (UUID):
        name (str):
        quotas (Quotas): Limits on what a tenant may hold at once. Absent (null) means unlimited.
        status (TenantStatus):
        updated_at (datetime.datetime):
    """

    created_at: datetime.datetime
    id: UUID
    name: str
    quotas: Quotas
    status: TenantStatus
    updated_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at = self.created_at.isoformat()

        id = str(self.id)

        name = self.name

        quotas = self.quotas.to_dict()

        status = self.status.value

        updated_at = self.updated_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at": created_at,
                "id": id,
                "name": name,
                "quotas": quotas,
                "status": status,
                "updated_at": updated_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.quotas import Quotas

        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        id = UUID(d.pop("id"))

        name = d.pop("name")

        quotas = Quotas.from_dict(d.pop("quotas"))

        status = TenantStatus(d.pop("status"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        page_tenant_items_item = cls(
            created_at=created_at,
            id=id,
            name=name,
            quotas=quotas,
            status=status,
            updated_at=updated_at,
        )

        page_tenant_items_item.additional_properties = d
        return page_tenant_items_item

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
