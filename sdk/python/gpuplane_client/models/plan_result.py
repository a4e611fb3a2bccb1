from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.plan import Plan


T = TypeVar("T", bound="PlanResult")


@_attrs_define
class PlanResult:
    """Search result: best plan first.

    Attributes:
        evaluated (int): Configurations that satisfied the divisibility rules (including subtrees pruned by
            the memory lower bound).
        feasible (int): Configurations that fit in memory.
        plans (list[Plan]):
    """

    evaluated: int
    feasible: int
    plans: list[Plan]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        evaluated = self.evaluated

        feasible = self.feasible

        plans = []
        for plans_item_data in self.plans:
            plans_item = plans_item_data.to_dict()
            plans.append(plans_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "evaluated": evaluated,
                "feasible": feasible,
                "plans": plans,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.plan import Plan

        d = dict(src_dict)
        evaluated = d.pop("evaluated")

        feasible = d.pop("feasible")

        plans = []
        _plans = d.pop("plans")
        for plans_item_data in _plans:
            plans_item = Plan.from_dict(plans_item_data)

            plans.append(plans_item)

        plan_result = cls(
            evaluated=evaluated,
            feasible=feasible,
            plans=plans,
        )

        plan_result.additional_properties = d
        return plan_result

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
