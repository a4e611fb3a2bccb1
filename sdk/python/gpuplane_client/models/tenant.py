from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.tenant_status import TenantStatus
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.balance import Balance
    from ..models.quotas import Quotas


T = TypeVar("T", bound="Tenant")


@_attrs_define
class Tenant:
    """
    Attributes:
        created_at (datetime.datetime):
        id (UUID):
        name (str):
        quotas (Quotas): Limits on what a tenant may hold at once. Absent (null) means unlimited.
        status (TenantStatus):
        updated_at (datetime.datetime):
        balances (list[Balance] | Unset): The prepaid balance per currency (the sum of the tenant's ledger entries, as
            `GET /v1/billing/balance`
            gives it), in currency order; empty before the first ledger entry.
    """

    created_at: datetime.datetime
    id: UUID
    name: str
    quotas: Quotas
    status: TenantStatus
    updated_at: datetime.datetime
    balances: list[Balance] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at = self.created_at.isoformat()

        id = str(self.id)

        name = self.name

        quotas = self.quotas.to_dict()

        status = self.status.value

        updated_at = self.updated_at.isoformat()

        balances: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.balances, Unset):
            balances = []
            for balances_item_data in self.balances:
                balances_item = balances_item_data.to_dict()
                balances.append(balances_item)

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
        if balances is not UNSET:
            field_dict["balances"] = balances

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.balance import Balance
        from ..models.quotas import Quotas

        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        id = UUID(d.pop("id"))

        name = d.pop("name")

        quotas = Quotas.from_dict(d.pop("quotas"))

        status = TenantStatus(d.pop("status"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        _balances = d.pop("balances", UNSET)
        balances: list[Balance] | Unset = UNSET
        if _balances is not UNSET:
            balances = []
            for balances_item_data in _balances:
                balances_item = Balance.from_dict(balances_item_data)

                balances.append(balances_item)

        tenant = cls(
            created_at=created_at,
            id=id,
            name=name,
            quotas=quotas,
            status=status,
            updated_at=updated_at,
            balances=balances,
        )

        tenant.additional_properties = d
        return tenant

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
