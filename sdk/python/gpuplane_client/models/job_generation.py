from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.generation_state import GenerationState
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.job_generation_correction_type_0 import JobGenerationCorrectionType0
    from ..models.job_generation_measured_type_0 import JobGenerationMeasuredType0
    from ..models.plan import Plan


T = TypeVar("T", bound="JobGeneration")


@_attrs_define
class JobGeneration:
    """One plan a job ran, in its history.

    Attributes:
        created_at (datetime.datetime):
        generation (int): 1 for the plan the job was created with, then one more per replan.
        reason (str): `created`, or why it was asked for (by whom, the pins, the measured figures for a retune).
        state (GenerationState): Where a generation (one plan a job ran) stands.
        correction (JobGenerationCorrectionType0 | None | Unset): How the planner's prediction was corrected by the
            previous generation's measurements.
        ended_at (datetime.datetime | None | Unset):
        measured (JobGenerationMeasuredType0 | None | Unset): What it measured while it ran (set when it ended).
        plan (None | Plan | Unset):
        requested_by (None | Unset | UUID): The API key that asked for it (absent when the service did).
        started_at (datetime.datetime | None | Unset):
    """

    created_at: datetime.datetime
    generation: int
    reason: str
    state: GenerationState
    correction: JobGenerationCorrectionType0 | None | Unset = UNSET
    ended_at: datetime.datetime | None | Unset = UNSET
    measured: JobGenerationMeasuredType0 | None | Unset = UNSET
    plan: None | Plan | Unset = UNSET
    requested_by: None | Unset | UUID = UNSET
    started_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.job_generation_correction_type_0 import (
            JobGenerationCorrectionType0,
        )
        from ..models.job_generation_measured_type_0 import JobGenerationMeasuredType0
        from ..models.plan import Plan

        created_at = self.created_at.isoformat()

        generation = self.generation

        reason = self.reason

        state = self.state.value

        correction: dict[str, Any] | None | Unset
        if isinstance(self.correction, Unset):
            correction = UNSET
        elif isinstance(self.correction, JobGenerationCorrectionType0):
            correction = self.correction.to_dict()
        else:
            correction = self.correction

        ended_at: None | str | Unset
        if isinstance(self.ended_at, Unset):
            ended_at = UNSET
        elif isinstance(self.ended_at, datetime.datetime):
            ended_at = self.ended_at.isoformat()
        else:
            ended_at = self.ended_at

        measured: dict[str, Any] | None | Unset
        if isinstance(self.measured, Unset):
            measured = UNSET
        elif isinstance(self.measured, JobGenerationMeasuredType0):
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

        requested_by: None | str | Unset
        if isinstance(self.requested_by, Unset):
            requested_by = UNSET
        elif isinstance(self.requested_by, UUID):
            requested_by = str(self.requested_by)
        else:
            requested_by = self.requested_by

        started_at: None | str | Unset
        if isinstance(self.started_at, Unset):
            started_at = UNSET
        elif isinstance(self.started_at, datetime.datetime):
            started_at = self.started_at.isoformat()
        else:
            started_at = self.started_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at": created_at,
                "generation": generation,
                "reason": reason,
                "state": state,
            }
        )
        if correction is not UNSET:
            field_dict["correction"] = correction
        if ended_at is not UNSET:
            field_dict["ended_at"] = ended_at
        if measured is not UNSET:
            field_dict["measured"] = measured
        if plan is not UNSET:
            field_dict["plan"] = plan
        if requested_by is not UNSET:
            field_dict["requested_by"] = requested_by
        if started_at is not UNSET:
            field_dict["started_at"] = started_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.job_generation_correction_type_0 import (
            JobGenerationCorrectionType0,
        )
        from ..models.job_generation_measured_type_0 import JobGenerationMeasuredType0
        from ..models.plan import Plan

        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        generation = d.pop("generation")

        reason = d.pop("reason")

        state = GenerationState(d.pop("state"))

        def _parse_correction(
            data: object,
        ) -> JobGenerationCorrectionType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                correction_type_0 = JobGenerationCorrectionType0.from_dict(data)

                return correction_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(JobGenerationCorrectionType0 | None | Unset, data)

        correction = _parse_correction(d.pop("correction", UNSET))

        def _parse_ended_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                ended_at_type_0 = datetime.datetime.fromisoformat(data)

                return ended_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        ended_at = _parse_ended_at(d.pop("ended_at", UNSET))

        def _parse_measured(data: object) -> JobGenerationMeasuredType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                measured_type_0 = JobGenerationMeasuredType0.from_dict(data)

                return measured_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(JobGenerationMeasuredType0 | None | Unset, data)

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

        def _parse_requested_by(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                requested_by_type_0 = UUID(data)

                return requested_by_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        requested_by = _parse_requested_by(d.pop("requested_by", UNSET))

        def _parse_started_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                started_at_type_0 = datetime.datetime.fromisoformat(data)

                return started_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        started_at = _parse_started_at(d.pop("started_at", UNSET))

        job_generation = cls(
            created_at=created_at,
            generation=generation,
            reason=reason,
            state=state,
            correction=correction,
            ended_at=ended_at,
            measured=measured,
            plan=plan,
            requested_by=requested_by,
            started_at=started_at,
        )

        job_generation.additional_properties = d
        return job_generation

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
