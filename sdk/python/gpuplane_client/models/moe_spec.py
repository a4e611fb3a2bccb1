from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="MoeSpec")


@_attrs_define
class MoeSpec:
    """Mixture-of-experts layout of the FFN.

    Attributes:
        experts (int): Experts per layer.
        experts_per_token (int): Experts each token is routed to (top-k).
    """

    experts: int
    experts_per_token: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        experts = self.experts

        experts_per_token = self.experts_per_token

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "experts": experts,
                "experts_per_token": experts_per_token,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        experts = d.pop("experts")

        experts_per_token = d.pop("experts_per_token")

        moe_spec = cls(
            experts=experts,
            experts_per_token=experts_per_token,
        )

        moe_spec.additional_properties = d
        return moe_spec

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
