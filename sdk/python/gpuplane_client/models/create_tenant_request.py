from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.quotas import Quotas


T = TypeVar("T", bound="CreateTenantRequest")


@_attrs_define
class CreateTenantRequest:
    """
    Example:
        {'name': 'acme-ml', 'quotas': {'max_concurrent_leases': 10, 'max_gpus_per_pool': 32}}

    Attributes:
        name (str):
        quotas (None | Quotas | Unset):
    """

    name: str
    quotas: None | Quotas | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.quotas import Quotas

        name = self.name

        quotas: dict[str, Any] | None | Unset
        if isinstance(self.quotas, Unset):
            quotas = UNSET
        elif isinstance(self.quotas, Quotas):
            quotas = self.quotas.to_dict()
        else:
            quotas = self.quotas

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
            }
        )
        if quotas is not UNSET:
            field_dict["quotas"] = quotas

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.quotas import Quotas

        d = dict(src_dict)
        name = d.pop("name")

        def _parse_quotas(data: object) -> None | Quotas | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                quotas_type_0 = Quotas.from_dict(data)

                return quotas_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Quotas | Unset, data)

        quotas = _parse_quotas(d.pop("quotas", UNSET))

        create_tenant_request = cls(
            name=name,
            quotas=quotas,
        )

        return create_tenant_request
