from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.advice_mix_part import AdviceMixPart
    from ..models.mixed_plan import MixedPlan


T = TypeVar("T", bound="AdviceMix")


@_attrs_define
class AdviceMix:
    """A training plan over two pools of one currency at once (see [`MixedPlan`]), priced per pool.

    Attributes:
        cheaper (bool): Costs less than every single-pool option of its currency (every pool and GPU count
            tried, not only those shown).
        cost_minor (int): The sum of the parts' `cost_minor`.
        currency (str):
        faster (bool): Takes fewer hours than every single-pool option of its currency.
        hours (float): Hours to process the training tokens at the plan's tokens/s.
        meets_budget (bool):
        meets_deadline (bool):
        parts (list[AdviceMixPart]): The pools, in the order of the plan's parts: `plan.parts[i]` and
            `plan.stages[..].part == i`
            are about `parts[i]`.
        plan (MixedPlan): One ranked plan over a mixed cluster.
    """

    cheaper: bool
    cost_minor: int
    currency: str
    faster: bool
    hours: float
    meets_budget: bool
    meets_deadline: bool
    parts: list[AdviceMixPart]
    plan: MixedPlan
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        cheaper = self.cheaper

        cost_minor = self.cost_minor

        currency = self.currency

        faster = self.faster

        hours = self.hours

        meets_budget = self.meets_budget

        meets_deadline = self.meets_deadline

        parts = []
        for parts_item_data in self.parts:
            parts_item = parts_item_data.to_dict()
            parts.append(parts_item)

        plan = self.plan.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "cheaper": cheaper,
                "cost_minor": cost_minor,
                "currency": currency,
                "faster": faster,
                "hours": hours,
                "meets_budget": meets_budget,
                "meets_deadline": meets_deadline,
                "parts": parts,
                "plan": plan,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.advice_mix_part import AdviceMixPart
        from ..models.mixed_plan import MixedPlan

        d = dict(src_dict)
        cheaper = d.pop("cheaper")

        cost_minor = d.pop("cost_minor")

        currency = d.pop("currency")

        faster = d.pop("faster")

        hours = d.pop("hours")

        meets_budget = d.pop("meets_budget")

        meets_deadline = d.pop("meets_deadline")

        parts = []
        _parts = d.pop("parts")
        for parts_item_data in _parts:
            parts_item = AdviceMixPart.from_dict(parts_item_data)

            parts.append(parts_item)

        plan = MixedPlan.from_dict(d.pop("plan"))

        advice_mix = cls(
            cheaper=cheaper,
            cost_minor=cost_minor,
            currency=currency,
            faster=faster,
            hours=hours,
            meets_budget=meets_budget,
            meets_deadline=meets_deadline,
            parts=parts,
            plan=plan,
        )

        advice_mix.additional_properties = d
        return advice_mix

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
