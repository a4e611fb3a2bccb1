from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.job_state import JobState
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.job_generation import JobGeneration
    from ..models.job_insights import JobInsights
    from ..models.job_node import JobNode
    from ..models.measured_steps import MeasuredSteps
    from ..models.plan import Plan
    from ..models.progress import Progress
    from ..models.restart_policy import RestartPolicy
    from ..models.retune import Retune


T = TypeVar("T", bound="Job")


@_attrs_define
class Job:
    """A job on a lease.

    Attributes:
        cancel_requested (bool):
        created_at (datetime.datetime):
        generation (int): The current generation: 1, then one more per replan.
        generations (list[JobGeneration]): Every plan it ran, oldest first, and a pending replan last.
        id (UUID):
        lease_id (UUID):
        nodes (list[JobNode]): The current generation's parts, per node in rank order.
        restart (RestartPolicy): A job's restart policy, as the service resolved it at create.
        restarts (int): Restarts so far.
        retune (Retune): Re-planning from measurements; see [`retune`] for how the planner is corrected.
        state (JobState): State of a job, and of each of its nodes.
        stop_grace_s (int): Seconds a stop notice gives the job to checkpoint and exit (a replan, its lease released or
            expiring, the
            tenant's balance running out).
        template (str): The template's name (`auto` resolves to a built-in one).
        updated_at (datetime.datetime):
        finished_at (datetime.datetime | None | Unset):
        insights (JobInsights | None | Unset):
        measured (MeasuredSteps | None | Unset):
        plan (None | Plan | Unset):
        progress (None | Progress | Unset):
        reason (None | str | Unset): Why it failed or was cancelled.
        started_at (datetime.datetime | None | Unset):
        template_version (int | None | Unset): The custom template's version (absent for built-in templates).
    """

    cancel_requested: bool
    created_at: datetime.datetime
    generation: int
    generations: list[JobGeneration]
    id: UUID
    lease_id: UUID
    nodes: list[JobNode]
    restart: RestartPolicy
    restarts: int
    retune: Retune
    state: JobState
    stop_grace_s: int
    template: str
    updated_at: datetime.datetime
    finished_at: datetime.datetime | None | Unset = UNSET
    insights: JobInsights | None | Unset = UNSET
    measured: MeasuredSteps | None | Unset = UNSET
    plan: None | Plan | Unset = UNSET
    progress: None | Progress | Unset = UNSET
    reason: None | str | Unset = UNSET
    started_at: datetime.datetime | None | Unset = UNSET
    template_version: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.job_insights import JobInsights
        from ..models.measured_steps import MeasuredSteps
        from ..models.plan import Plan
        from ..models.progress import Progress

        cancel_requested = self.cancel_requested

        created_at = self.created_at.isoformat()

        generation = self.generation

        generations = []
        for generations_item_data in self.generations:
            generations_item = generations_item_data.to_dict()
            generations.append(generations_item)

        id = str(self.id)

        lease_id = str(self.lease_id)

        nodes = []
        for nodes_item_data in self.nodes:
            nodes_item = nodes_item_data.to_dict()
            nodes.append(nodes_item)

        restart = self.restart.to_dict()

        restarts = self.restarts

        retune = self.retune.to_dict()

        state = self.state.value

        stop_grace_s = self.stop_grace_s

        template = self.template

        updated_at = self.updated_at.isoformat()

        finished_at: None | str | Unset
        if isinstance(self.finished_at, Unset):
            finished_at = UNSET
        elif isinstance(self.finished_at, datetime.datetime):
            finished_at = self.finished_at.isoformat()
        else:
            finished_at = self.finished_at

        insights: dict[str, Any] | None | Unset
        if isinstance(self.insights, Unset):
            insights = UNSET
        elif isinstance(self.insights, JobInsights):
            insights = self.insights.to_dict()
        else:
            insights = self.insights

        measured: dict[str, Any] | None | Unset
        if isinstance(self.measured, Unset):
            measured = UNSET
        elif isinstance(self.measured, MeasuredSteps):
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

        progress: dict[str, Any] | None | Unset
        if isinstance(self.progress, Unset):
            progress = UNSET
        elif isinstance(self.progress, Progress):
            progress = self.progress.to_dict()
        else:
            progress = self.progress

        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        else:
            reason = self.reason

        started_at: None | str | Unset
        if isinstance(self.started_at, Unset):
            started_at = UNSET
        elif isinstance(self.started_at, datetime.datetime):
            started_at = self.started_at.isoformat()
        else:
            started_at = self.started_at

        template_version: int | None | Unset
        if isinstance(self.template_version, Unset):
            template_version = UNSET
        else:
            template_version = self.template_version

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "cancel_requested": cancel_requested,
                "created_at": created_at,
                "generation": generation,
                "generations": generations,
                "id": id,
                "lease_id": lease_id,
                "nodes": nodes,
                "restart": restart,
                "restarts": restarts,
                "retune": retune,
                "state": state,
                "stop_grace_s": stop_grace_s,
                "template": template,
                "updated_at": updated_at,
            }
        )
        if finished_at is not UNSET:
            field_dict["finished_at"] = finished_at
        if insights is not UNSET:
            field_dict["insights"] = insights
        if measured is not UNSET:
            field_dict["measured"] = measured
        if plan is not UNSET:
            field_dict["plan"] = plan
        if progress is not UNSET:
            field_dict["progress"] = progress
        if reason is not UNSET:
            field_dict["reason"] = reason
        if started_at is not UNSET:
            field_dict["started_at"] = started_at
        if template_version is not UNSET:
            field_dict["template_version"] = template_version

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.job_generation import JobGeneration
        from ..models.job_insights import JobInsights
        from ..models.job_node import JobNode
        from ..models.measured_steps import MeasuredSteps
        from ..models.plan import Plan
        from ..models.progress import Progress
        from ..models.restart_policy import RestartPolicy
        from ..models.retune import Retune

        d = dict(src_dict)
        cancel_requested = d.pop("cancel_requested")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        generation = d.pop("generation")

        generations = []
        _generations = d.pop("generations")
        for generations_item_data in _generations:
            generations_item = JobGeneration.from_dict(generations_item_data)

            generations.append(generations_item)

        id = UUID(d.pop("id"))

        lease_id = UUID(d.pop("lease_id"))

        nodes = []
        _nodes = d.pop("nodes")
        for nodes_item_data in _nodes:
            nodes_item = JobNode.from_dict(nodes_item_data)

            nodes.append(nodes_item)

        restart = RestartPolicy.from_dict(d.pop("restart"))

        restarts = d.pop("restarts")

        retune = Retune.from_dict(d.pop("retune"))

        state = JobState(d.pop("state"))

        stop_grace_s = d.pop("stop_grace_s")

        template = d.pop("template")

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        def _parse_finished_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                finished_at_type_0 = datetime.datetime.fromisoformat(data)

                return finished_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        finished_at = _parse_finished_at(d.pop("finished_at", UNSET))

        def _parse_insights(data: object) -> JobInsights | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                insights_type_0 = JobInsights.from_dict(data)

                return insights_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(JobInsights | None | Unset, data)

        insights = _parse_insights(d.pop("insights", UNSET))

        def _parse_measured(data: object) -> MeasuredSteps | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                measured_type_0 = MeasuredSteps.from_dict(data)

                return measured_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(MeasuredSteps | None | Unset, data)

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

        def _parse_progress(data: object) -> None | Progress | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                progress_type_0 = Progress.from_dict(data)

                return progress_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Progress | Unset, data)

        progress = _parse_progress(d.pop("progress", UNSET))

        def _parse_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))

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

        def _parse_template_version(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        template_version = _parse_template_version(d.pop("template_version", UNSET))

        job = cls(
            cancel_requested=cancel_requested,
            created_at=created_at,
            generation=generation,
            generations=generations,
            id=id,
            lease_id=lease_id,
            nodes=nodes,
            restart=restart,
            restarts=restarts,
            retune=retune,
            state=state,
            stop_grace_s=stop_grace_s,
            template=template,
            updated_at=updated_at,
            finished_at=finished_at,
            insights=insights,
            measured=measured,
            plan=plan,
            progress=progress,
            reason=reason,
            started_at=started_at,
            template_version=template_version,
        )

        job.additional_properties = d
        return job

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
