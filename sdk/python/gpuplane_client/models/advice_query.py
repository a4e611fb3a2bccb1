from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.advice_target import AdviceTarget
    from ..models.model_ref import ModelRef
    from ..models.workload_fields import WorkloadFields


T = TypeVar("T", bound="AdviceQuery")


@_attrs_define
class AdviceQuery:
    """What the tenant wants done; the platform supplies the pools.

    Example:
        {'budget_minor': 50000, 'deadline_hours': 24, 'model': {'preset': 'llama2-7b'}, 'target': {'training_tokens':
            2000000000}, 'workload': {'global_batch': 64, 'kind': 'lora', 'seq_len': 4096}}

    Attributes:
        model (ModelRef): The model: exactly one of `preset`, `architecture` and `hf_config`.
        target (AdviceTarget): What has to be done: training tokens, or a serving load.
        workload (WorkloadFields): Workload fields as the API/CLI send them; defaults are filled by `resolve`.
        budget_minor (int | None | Unset): Spend at most this, in minor units of the pool's currency.
        deadline_hours (float | None | Unset): Finish within this many hours.
    """

    model: ModelRef
    target: AdviceTarget
    workload: WorkloadFields
    budget_minor: int | None | Unset = UNSET
    deadline_hours: float | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        model = self.model.to_dict()

        target = self.target.to_dict()

        workload = self.workload.to_dict()

        budget_minor: int | None | Unset
        if isinstance(self.budget_minor, Unset):
            budget_minor = UNSET
        else:
            budget_minor = self.budget_minor

        deadline_hours: float | None | Unset
        if isinstance(self.deadline_hours, Unset):
            deadline_hours = UNSET
        else:
            deadline_hours = self.deadline_hours

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "model": model,
                "target": target,
                "workload": workload,
            }
        )
        if budget_minor is not UNSET:
            field_dict["budget_minor"] = budget_minor
        if deadline_hours is not UNSET:
            field_dict["deadline_hours"] = deadline_hours

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.advice_target import AdviceTarget
        from ..models.model_ref import ModelRef
        from ..models.workload_fields import WorkloadFields

        d = dict(src_dict)
        model = ModelRef.from_dict(d.pop("model"))

        target = AdviceTarget.from_dict(d.pop("target"))

        workload = WorkloadFields.from_dict(d.pop("workload"))

        def _parse_budget_minor(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        budget_minor = _parse_budget_minor(d.pop("budget_minor", UNSET))

        def _parse_deadline_hours(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        deadline_hours = _parse_deadline_hours(d.pop("deadline_hours", UNSET))

        advice_query = cls(
            model=model,
            target=target,
            workload=workload,
            budget_minor=budget_minor,
            deadline_hours=deadline_hours,
        )

        return advice_query
