from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.recompute import Recompute
from ..models.workload_kind import WorkloadKind
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.mixed_part_use import MixedPartUse
    from ..models.mixed_stage import MixedStage
    from ..models.plan import Plan


T = TypeVar("T", bound="MixedPlan")


@_attrs_define
class MixedPlan:
    """One ranked plan over a mixed cluster.

    Attributes:
        bubble_fraction (float): Pipeline fill and drain, fraction of the step.
        calibrated (bool): False when any part used has an uncalibrated GPU.
        dp (int): Identical replicas (data-parallel degree).
        dp_and_optimizer_s (float): Exposed data-parallel reduction plus optimizer update of the slowest stage, seconds.
        explanation (str): The plan in words, per part.
        global_batch (int): Sequences per step (the request's, or the nearest multiple of `dp` when it does not
            divide; said in `notes`).
        grad_accum (int): Micro-batches per replica per step.
        memory_per_gpu_bytes (int): Largest memory of any GPU, bytes.
        micro_batch (int):
        notes (list[str]): Departures from the request, unused parts, memory headroom, calibration, runtime needs.
        parts (list[MixedPartUse]): Every part of the request, in request order.
        parts_used (int): Number of parts the plan uses.
        pp (int): Pipeline stages per replica, over all parts.
        pp_comm_s (float): Exposed pipeline p2p, seconds per step.
        recompute (Recompute): Activation recomputation policy.
        sequence_parallel (bool): Sequence parallelism; in a mix, on in every stage whose TP degree is above 1.
        stages (list[MixedStage]): The stages of one replica, first to last.
        step_time_s (float): Predicted time of one optimizer step, seconds.
        tokens_per_s (float): Predicted training tokens per second, all replicas together.
        workload (WorkloadKind): What the GPUs will do.
        zero_stage (int): 1 (distributed optimizer) whenever `dp > 1` in a mix; a single part's own choice otherwise.
        single_part (None | Plan | Unset):
    """

    bubble_fraction: float
    calibrated: bool
    dp: int
    dp_and_optimizer_s: float
    explanation: str
    global_batch: int
    grad_accum: int
    memory_per_gpu_bytes: int
    micro_batch: int
    notes: list[str]
    parts: list[MixedPartUse]
    parts_used: int
    pp: int
    pp_comm_s: float
    recompute: Recompute
    sequence_parallel: bool
    stages: list[MixedStage]
    step_time_s: float
    tokens_per_s: float
    workload: WorkloadKind
    zero_stage: int
    single_part: None | Plan | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.plan import Plan

        bubble_fraction = self.bubble_fraction

        calibrated = self.calibrated

        dp = self.dp

        dp_and_optimizer_s = self.dp_and_optimizer_s

        explanation = self.explanation

        global_batch = self.global_batch

        grad_accum = self.grad_accum

        memory_per_gpu_bytes = self.memory_per_gpu_bytes

        micro_batch = self.micro_batch

        notes = self.notes

        parts = []
        for parts_item_data in self.parts:
            parts_item = parts_item_data.to_dict()
            parts.append(parts_item)

        parts_used = self.parts_used

        pp = self.pp

        pp_comm_s = self.pp_comm_s

        recompute = self.recompute.value

        sequence_parallel = self.sequence_parallel

        stages = []
        for stages_item_data in self.stages:
            stages_item = stages_item_data.to_dict()
            stages.append(stages_item)

        step_time_s = self.step_time_s

        tokens_per_s = self.tokens_per_s

        workload = self.workload.value

        zero_stage = self.zero_stage

        single_part: dict[str, Any] | None | Unset
        if isinstance(self.single_part, Unset):
            single_part = UNSET
        elif isinstance(self.single_part, Plan):
            single_part = self.single_part.to_dict()
        else:
            single_part = self.single_part

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "bubble_fraction": bubble_fraction,
                "calibrated": calibrated,
                "dp": dp,
                "dp_and_optimizer_s": dp_and_optimizer_s,
                "explanation": explanation,
                "global_batch": global_batch,
                "grad_accum": grad_accum,
                "memory_per_gpu_bytes": memory_per_gpu_bytes,
                "micro_batch": micro_batch,
                "notes": notes,
                "parts": parts,
                "parts_used": parts_used,
                "pp": pp,
                "pp_comm_s": pp_comm_s,
                "recompute": recompute,
                "sequence_parallel": sequence_parallel,
                "stages": stages,
                "step_time_s": step_time_s,
                "tokens_per_s": tokens_per_s,
                "workload": workload,
                "zero_stage": zero_stage,
            }
        )
        if single_part is not UNSET:
            field_dict["single_part"] = single_part

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.mixed_part_use import MixedPartUse
        from ..models.mixed_stage import MixedStage
        from ..models.plan import Plan

        d = dict(src_dict)
        bubble_fraction = d.pop("bubble_fraction")

        calibrated = d.pop("calibrated")

        dp = d.pop("dp")

        dp_and_optimizer_s = d.pop("dp_and_optimizer_s")

        explanation = d.pop("explanation")

        global_batch = d.pop("global_batch")

        grad_accum = d.pop("grad_accum")

        memory_per_gpu_bytes = d.pop("memory_per_gpu_bytes")

        micro_batch = d.pop("micro_batch")

        notes = cast(list[str], d.pop("notes"))

        parts = []
        _parts = d.pop("parts")
        for parts_item_data in _parts:
            parts_item = MixedPartUse.from_dict(parts_item_data)

            parts.append(parts_item)

        parts_used = d.pop("parts_used")

        pp = d.pop("pp")

        pp_comm_s = d.pop("pp_comm_s")

        recompute = Recompute(d.pop("recompute"))

        sequence_parallel = d.pop("sequence_parallel")

        stages = []
        _stages = d.pop("stages")
        for stages_item_data in _stages:
            stages_item = MixedStage.from_dict(stages_item_data)

            stages.append(stages_item)

        step_time_s = d.pop("step_time_s")

        tokens_per_s = d.pop("tokens_per_s")

        workload = WorkloadKind(d.pop("workload"))

        zero_stage = d.pop("zero_stage")

        def _parse_single_part(data: object) -> None | Plan | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                single_part_type_0 = Plan.from_dict(data)

                return single_part_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Plan | Unset, data)

        single_part = _parse_single_part(d.pop("single_part", UNSET))

        mixed_plan = cls(
            bubble_fraction=bubble_fraction,
            calibrated=calibrated,
            dp=dp,
            dp_and_optimizer_s=dp_and_optimizer_s,
            explanation=explanation,
            global_batch=global_batch,
            grad_accum=grad_accum,
            memory_per_gpu_bytes=memory_per_gpu_bytes,
            micro_batch=micro_batch,
            notes=notes,
            parts=parts,
            parts_used=parts_used,
            pp=pp,
            pp_comm_s=pp_comm_s,
            recompute=recompute,
            sequence_parallel=sequence_parallel,
            stages=stages,
            step_time_s=step_time_s,
            tokens_per_s=tokens_per_s,
            workload=workload,
            zero_stage=zero_stage,
            single_part=single_part,
        )

        mixed_plan.additional_properties = d
        return mixed_plan

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
