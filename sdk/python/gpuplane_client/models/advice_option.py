from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.plan import Plan


T = TypeVar("T", bound="AdviceOption")


@_attrs_define
class AdviceOption:
    """One option on the cost/time frontier: a pool, a GPU count, its best plan, hours and cost.

    Attributes:
        cheapest (bool): The least `cost_minor` of the options shown in this currency (one per currency).
        cost_minor (int): `ceil(gpu_count * hours * price_per_gpu_hour_minor)`.
        currency (str):
        fastest (bool): The least `hours` (training) or the most throughput (inference) of all options shown
            (exactly one).
        gpu_count (int):
        gpu_key (str):
        gpus_per_node (int):
        hours (float): Hours to process the training tokens, or the serving hours.
        meets_budget (bool):
        meets_deadline (bool):
        meets_load (bool): Inference: whether the throughput sustains the load (always true for training).
        nodes (int):
        plan (Plan): One ranked plan.
        pool_id (str):
    """

    cheapest: bool
    cost_minor: int
    currency: str
    fastest: bool
    gpu_count: int
    gpu_key: str
    gpus_per_node: int
    hours: float
    meets_budget: bool
    meets_deadline: bool
    meets_load: bool
    nodes: int
    plan: Plan
    pool_id: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        cheapest = self.cheapest

        cost_minor = self.cost_minor

        currency = self.currency

        fastest = self.fastest

        gpu_count = self.gpu_count

        gpu_key = self.gpu_key

        gpus_per_node = self.gpus_per_node

        hours = self.hours

        meets_budget = self.meets_budget

        meets_deadline = self.meets_deadline

        meets_load = self.meets_load

        nodes = self.nodes

        plan = self.plan.to_dict()

        pool_id = self.pool_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "cheapest": cheapest,
                "cost_minor": cost_minor,
                "currency": currency,
                "fastest": fastest,
                "gpu_count": gpu_count,
                "gpu_key": gpu_key,
                "gpus_per_node": gpus_per_node,
                "hours": hours,
                "meets_budget": meets_budget,
                "meets_deadline": meets_deadline,
                "meets_load": meets_load,
                "nodes": nodes,
                "plan": plan,
                "pool_id": pool_id,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.plan import Plan

        d = dict(src_dict)
        cheapest = d.pop("cheapest")

        cost_minor = d.pop("cost_minor")

        currency = d.pop("currency")

        fastest = d.pop("fastest")

        gpu_count = d.pop("gpu_count")

        gpu_key = d.pop("gpu_key")

        gpus_per_node = d.pop("gpus_per_node")

        hours = d.pop("hours")

        meets_budget = d.pop("meets_budget")

        meets_deadline = d.pop("meets_deadline")

        meets_load = d.pop("meets_load")

        nodes = d.pop("nodes")

        plan = Plan.from_dict(d.pop("plan"))

        pool_id = d.pop("pool_id")

        advice_option = cls(
            cheapest=cheapest,
            cost_minor=cost_minor,
            currency=currency,
            fastest=fastest,
            gpu_count=gpu_count,
            gpu_key=gpu_key,
            gpus_per_node=gpus_per_node,
            hours=hours,
            meets_budget=meets_budget,
            meets_deadline=meets_deadline,
            meets_load=meets_load,
            nodes=nodes,
            plan=plan,
            pool_id=pool_id,
        )

        advice_option.additional_properties = d
        return advice_option

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
