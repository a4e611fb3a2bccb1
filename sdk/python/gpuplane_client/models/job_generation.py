from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.failure_cause import FailureCause
from ..models.generation_state import GenerationState
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.job_generation_correction_type_0 import JobGenerationCorrectionType0
    from ..models.job_generation_healing_type_0 import JobGenerationHealingType0
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
        cause (FailureCause | None | Unset):
        correction (JobGenerationCorrectionType0 | None | Unset): How the planner's prediction was corrected by the
            previous generation's measurements.
        ended_at (datetime.datetime | None | Unset):
        failed_at (datetime.datetime | None | Unset):
        failed_node_id (None | Unset | UUID): A restart: the node the failure was detected on, and when (a lost node:
            its last heartbeat).
        first_step_at (datetime.datetime | None | Unset):
        healing (JobGenerationHealingType0 | None | Unset): A restart: what happened to the lease (`removed_node_id`,
            `removed_gpus`, `replacement_node_id`,
            `added_gpus`, `gpus_before`, `gpus_after`).
        last_step (int | None | Unset): A restart: the last step measured before the failure, and once its first step is
            in, the step it resumed
            from (the last complete checkpoint) and the steps run again, with when that first step came.
        measured (JobGenerationMeasuredType0 | None | Unset): What it measured while it ran (set when it ended).
        plan (None | Plan | Unset):
        requested_by (None | Unset | UUID): The API key that asked for it (absent when the service did).
        resumed_from_step (int | None | Unset):
        started_at (datetime.datetime | None | Unset):
        steps_lost (int | None | Unset):
    """

    created_at: datetime.datetime
    generation: int
    reason: str
    state: GenerationState
    cause: FailureCause | None | Unset = UNSET
    correction: JobGenerationCorrectionType0 | None | Unset = UNSET
    ended_at: datetime.datetime | None | Unset = UNSET
    failed_at: datetime.datetime | None | Unset = UNSET
    failed_node_id: None | Unset | UUID = UNSET
    first_step_at: datetime.datetime | None | Unset = UNSET
    healing: JobGenerationHealingType0 | None | Unset = UNSET
    last_step: int | None | Unset = UNSET
    measured: JobGenerationMeasuredType0 | None | Unset = UNSET
    plan: None | Plan | Unset = UNSET
    requested_by: None | Unset | UUID = UNSET
    resumed_from_step: int | None | Unset = UNSET
    started_at: datetime.datetime | None | Unset = UNSET
    steps_lost: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.job_generation_correction_type_0 import (
            JobGenerationCorrectionType0,
        )
        from ..models.job_generation_healing_type_0 import JobGenerationHealingType0
        from ..models.job_generation_measured_type_0 import JobGenerationMeasuredType0
        from ..models.plan import Plan

        created_at = self.created_at.isoformat()

        generation = self.generation

        reason = self.reason

        state = self.state.value

        cause: None | str | Unset
        if isinstance(self.cause, Unset):
            cause = UNSET
        elif isinstance(self.cause, FailureCause):
            cause = self.cause.value
        else:
            cause = self.cause

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

        failed_at: None | str | Unset
        if isinstance(self.failed_at, Unset):
            failed_at = UNSET
        elif isinstance(self.failed_at, datetime.datetime):
            failed_at = self.failed_at.isoformat()
        else:
            failed_at = self.failed_at

        failed_node_id: None | str | Unset
        if isinstance(self.failed_node_id, Unset):
            failed_node_id = UNSET
        elif isinstance(self.failed_node_id, UUID):
            failed_node_id = str(self.failed_node_id)
        else:
            failed_node_id = self.failed_node_id

        first_step_at: None | str | Unset
        if isinstance(self.first_step_at, Unset):
            first_step_at = UNSET
        elif isinstance(self.first_step_at, datetime.datetime):
            first_step_at = self.first_step_at.isoformat()
        else:
            first_step_at = self.first_step_at

        healing: dict[str, Any] | None | Unset
        if isinstance(self.healing, Unset):
            healing = UNSET
        elif isinstance(self.healing, JobGenerationHealingType0):
            healing = self.healing.to_dict()
        else:
            healing = self.healing

        last_step: int | None | Unset
        if isinstance(self.last_step, Unset):
            last_step = UNSET
        else:
            last_step = self.last_step

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

        resumed_from_step: int | None | Unset
        if isinstance(self.resumed_from_step, Unset):
            resumed_from_step = UNSET
        else:
            resumed_from_step = self.resumed_from_step

        started_at: None | str | Unset
        if isinstance(self.started_at, Unset):
            started_at = UNSET
        elif isinstance(self.started_at, datetime.datetime):
            started_at = self.started_at.isoformat()
        else:
            started_at = self.started_at

        steps_lost: int | None | Unset
        if isinstance(self.steps_lost, Unset):
            steps_lost = UNSET
        else:
            steps_lost = self.steps_lost

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
        if cause is not UNSET:
            field_dict["cause"] = cause
        if correction is not UNSET:
            field_dict["correction"] = correction
        if ended_at is not UNSET:
            field_dict["ended_at"] = ended_at
        if failed_at is not UNSET:
            field_dict["failed_at"] = failed_at
        if failed_node_id is not UNSET:
            field_dict["failed_node_id"] = failed_node_id
        if first_step_at is not UNSET:
            field_dict["first_step_at"] = first_step_at
        if healing is not UNSET:
            field_dict["healing"] = healing
        if last_step is not UNSET:
            field_dict["last_step"] = last_step
        if measured is not UNSET:
            field_dict["measured"] = measured
        if plan is not UNSET:
            field_dict["plan"] = plan
        if requested_by is not UNSET:
            field_dict["requested_by"] = requested_by
        if resumed_from_step is not UNSET:
            field_dict["resumed_from_step"] = resumed_from_step
        if started_at is not UNSET:
            field_dict["started_at"] = started_at
        if steps_lost is not UNSET:
            field_dict["steps_lost"] = steps_lost

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.job_generation_correction_type_0 import (
            JobGenerationCorrectionType0,
        )
        from ..models.job_generation_healing_type_0 import JobGenerationHealingType0
        from ..models.job_generation_measured_type_0 import JobGenerationMeasuredType0
        from ..models.plan import Plan

        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        generation = d.pop("generation")

        reason = d.pop("reason")

        state = GenerationState(d.pop("state"))

        def _parse_cause(data: object) -> FailureCause | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                cause_type_0 = FailureCause(data)

                return cause_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(FailureCause | None | Unset, data)

        cause = _parse_cause(d.pop("cause", UNSET))

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

        def _parse_failed_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                failed_at_type_0 = datetime.datetime.fromisoformat(data)

                return failed_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        failed_at = _parse_failed_at(d.pop("failed_at", UNSET))

        def _parse_failed_node_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                failed_node_id_type_0 = UUID(data)

                return failed_node_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        failed_node_id = _parse_failed_node_id(d.pop("failed_node_id", UNSET))

        def _parse_first_step_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                first_step_at_type_0 = datetime.datetime.fromisoformat(data)

                return first_step_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        first_step_at = _parse_first_step_at(d.pop("first_step_at", UNSET))

        def _parse_healing(data: object) -> JobGenerationHealingType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                healing_type_0 = JobGenerationHealingType0.from_dict(data)

                return healing_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(JobGenerationHealingType0 | None | Unset, data)

        healing = _parse_healing(d.pop("healing", UNSET))

        def _parse_last_step(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        last_step = _parse_last_step(d.pop("last_step", UNSET))

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

        def _parse_resumed_from_step(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        resumed_from_step = _parse_resumed_from_step(d.pop("resumed_from_step", UNSET))

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

        def _parse_steps_lost(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        steps_lost = _parse_steps_lost(d.pop("steps_lost", UNSET))

        job_generation = cls(
            created_at=created_at,
            generation=generation,
            reason=reason,
            state=state,
            cause=cause,
            correction=correction,
            ended_at=ended_at,
            failed_at=failed_at,
            failed_node_id=failed_node_id,
            first_step_at=first_step_at,
            healing=healing,
            last_step=last_step,
            measured=measured,
            plan=plan,
            requested_by=requested_by,
            resumed_from_step=resumed_from_step,
            started_at=started_at,
            steps_lost=steps_lost,
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
