from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.mixed_plan import MixedPlan


T = TypeVar("T", bound="MixedPlanResult")


@_attrs_define
class MixedPlanResult:
    """Mixed search result: best plan first.

    Attributes:
        evaluated (int): Configurations considered (the single-part searches included).
        feasible (int): Configurations costed in full that fit in memory (a mix whose upper bound on tokens/s
            cannot beat the plans kept is not costed in full).
        plans (list[MixedPlan]):
    """

    evaluated: int
    feasible: int
    plans: list[MixedPlan]
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
        from ..models.mixed_plan import MixedPlan

        d = dict(src_dict)
        evaluated = d.pop("evaluated")

        feasible = d.pop("feasible")

        plans = []
        _plans = d.pop("plans")
        for plans_item_data in _plans:
            plans_item = MixedPlan.from_dict(plans_item_data)

            plans.append(plans_item)

        mixed_plan_result = cls(
            evaluated=evaluated,
            feasible=feasible,
            plans=plans,
        )

        mixed_plan_result.additional_properties = d
        return mixed_plan_result

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
