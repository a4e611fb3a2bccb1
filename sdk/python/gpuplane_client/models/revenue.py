from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.pool_revenue import PoolRevenue
    from ..models.tenant_revenue import TenantRevenue


T = TypeVar("T", bound="Revenue")


@_attrs_define
class Revenue:
    """
    Attributes:
        from_ (datetime.datetime):
        pools (list[PoolRevenue]):
        tenants (list[TenantRevenue]):
        to (datetime.datetime):
    """

    from_: datetime.datetime
    pools: list[PoolRevenue]
    tenants: list[TenantRevenue]
    to: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from_ = self.from_.isoformat()

        pools = []
        for pools_item_data in self.pools:
            pools_item = pools_item_data.to_dict()
            pools.append(pools_item)

        tenants = []
        for tenants_item_data in self.tenants:
            tenants_item = tenants_item_data.to_dict()
            tenants.append(tenants_item)

        to = self.to.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "from": from_,
                "pools": pools,
                "tenants": tenants,
                "to": to,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.pool_revenue import PoolRevenue
        from ..models.tenant_revenue import TenantRevenue

        d = dict(src_dict)
        from_ = datetime.datetime.fromisoformat(d.pop("from"))

        pools = []
        _pools = d.pop("pools")
        for pools_item_data in _pools:
            pools_item = PoolRevenue.from_dict(pools_item_data)

            pools.append(pools_item)

        tenants = []
        _tenants = d.pop("tenants")
        for tenants_item_data in _tenants:
            tenants_item = TenantRevenue.from_dict(tenants_item_data)

            tenants.append(tenants_item)

        to = datetime.datetime.fromisoformat(d.pop("to"))

        revenue = cls(
            from_=from_,
            pools=pools,
            tenants=tenants,
            to=to,
        )

        revenue.additional_properties = d
        return revenue

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
