from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.insight import Insight
    from ..models.measured import Measured
    from ..models.measured_steps import MeasuredSteps
    from ..models.plan import Plan


T = TypeVar("T", bound="LeaseInsights")


@_attrs_define
class LeaseInsights:
    """What gpuplane sees of the lease's running job.

    Attributes:
        insights (list[Insight]): Findings with the suggested change and the numbers behind each; empty when all is
            well.
        lease_id (UUID):
        job_id (None | Unset | UUID): The job looked at: the latest running one (absent when none runs).
        measured (Measured | None | Unset):
        plan (None | Plan | Unset):
        steps (MeasuredSteps | None | Unset):
    """

    insights: list[Insight]
    lease_id: UUID
    job_id: None | Unset | UUID = UNSET
    measured: Measured | None | Unset = UNSET
    plan: None | Plan | Unset = UNSET
    steps: MeasuredSteps | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.measured import Measured
        from ..models.measured_steps import MeasuredSteps
        from ..models.plan import Plan

        insights = []
        for insights_item_data in self.insights:
            insights_item = insights_item_data.to_dict()
            insights.append(insights_item)

        lease_id = str(self.lease_id)

        job_id: None | str | Unset
        if isinstance(self.job_id, Unset):
            job_id = UNSET
        elif isinstance(self.job_id, UUID):
            job_id = str(self.job_id)
        else:
            job_id = self.job_id

        measured: dict[str, Any] | None | Unset
        if isinstance(self.measured, Unset):
            measured = UNSET
        elif isinstance(self.measured, Measured):
            measured = self.measured.to_dict()
        else:
            measured = self.measured

        plan: dict[str, Any] | None | Unset
        if isinstance(self.plan, Unset):
            plan = UNSET
        elif isinstance(self.plan, Plan):
            plan = self.plan.to_dict()
        else:
            plan = self.plan

        steps: dict[str, Any] | None | Unset
        if isinstance(self.steps, Unset):
            steps = UNSET
        elif isinstance(self.steps, MeasuredSteps):
            steps = self.steps.to_dict()
        else:
            steps = self.steps

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "insights": insights,
                "lease_id": lease_id,
            }
        )
        if job_id is not UNSET:
            field_dict["job_id"] = job_id
        if measured is not UNSET:
            field_dict["measured"] = measured
        if plan is not UNSET:
            field_dict["plan"] = plan
        if steps is not UNSET:
            field_dict["steps"] = steps

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.insight import Insight
        from ..models.measured import Measured
        from ..models.measured_steps import MeasuredSteps
        from ..models.plan import Plan

        d = dict(src_dict)
        insights = []
        _insights = d.pop("insights")
        for insights_item_data in _insights:
            insights_item = Insight.from_dict(insights_item_data)

            insights.append(insights_item)

        lease_id = UUID(d.pop("lease_id"))

        def _parse_job_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                job_id_type_0 = UUID(data)

                return job_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        job_id = _parse_job_id(d.pop("job_id", UNSET))

        def _parse_measured(data: object) -> Measured | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                measured_type_0 = Measured.from_dict(data)

                return measured_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Measured | None | Unset, data)

        measured = _parse_measured(d.pop("measured", UNSET))

        def _parse_plan(data: object) -> None | Plan | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                plan_type_0 = Plan.from_dict(data)

                return plan_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Plan | Unset, data)

        plan = _parse_plan(d.pop("plan", UNSET))

        def _parse_steps(data: object) -> MeasuredSteps | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                steps_type_0 = MeasuredSteps.from_dict(data)

                return steps_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(MeasuredSteps | None | Unset, data)

        steps = _parse_steps(d.pop("steps", UNSET))

        lease_insights = cls(
            insights=insights,
            lease_id=lease_id,
            job_id=job_id,
            measured=measured,
            plan=plan,
            steps=steps,
        )

        lease_insights.additional_properties = d
        return lease_insights

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
