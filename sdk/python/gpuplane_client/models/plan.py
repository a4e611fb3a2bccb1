from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.recompute import Recompute
from ..models.workload_kind import WorkloadKind
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.memory_breakdown import MemoryBreakdown


T = TypeVar("T", bound="Plan")


@_attrs_define
class Plan:
    """One ranked plan.

    Attributes:
        bubble_fraction (float):
        calibrated (bool): False for GPUs whose efficiency curve is not calibrated (RTX 4090, A10, custom).
        comm_fraction (float):
        dp (int):
        explanation (str):
        grad_accum (int):
        hardware_tflops_per_gpu (float): Executed FLOPs (with recomputation) per second per GPU, TFLOP/s.
        memory (MemoryBreakdown): Per-GPU memory, bytes, for the most loaded GPU of a plan.
        memory_per_gpu_bytes (int):
        mfu (float): Model FLOPs utilisation against the peak of the precision used (FP8 peak for fp8).
        micro_batch (int):
        pp (int):
        recompute (Recompute): Activation recomputation policy.
        replicas (int): Inference: model replicas (`gpus / (tp * pp)`); training: equals `dp`.
        sequence_parallel (bool):
        step_time_s (float): Training: one optimizer step. Inference: one decode step of all sequences in flight.
        tflops_per_gpu (float): Model FLOPs (no recomputation) per second per GPU, TFLOP/s.
        tokens_per_s (float): Training tokens/s, or generated (decode) tokens/s for inference, whole cluster.
        tp (int):
        vp (int): Virtual pipeline stages (interleaving chunks per GPU).
        workload (WorkloadKind): What the GPUs will do.
        zero_stage (int):
        images_per_s (float | None | Unset): Diffusion inference only: images/s of the whole cluster.
        prefill_tokens_per_s (float | None | Unset): Inference only: prompt (prefill) tokens/s of the whole cluster,
            compute-bound.
    """

    bubble_fraction: float
    calibrated: bool
    comm_fraction: float
    dp: int
    explanation: str
    grad_accum: int
    hardware_tflops_per_gpu: float
    memory: MemoryBreakdown
    memory_per_gpu_bytes: int
    mfu: float
    micro_batch: int
    pp: int
    recompute: Recompute
    replicas: int
    sequence_parallel: bool
    step_time_s: float
    tflops_per_gpu: float
    tokens_per_s: float
    tp: int
    vp: int
    workload: WorkloadKind
    zero_stage: int
    images_per_s: float | None | Unset = UNSET
    prefill_tokens_per_s: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        bubble_fraction = self.bubble_fraction

        calibrated = self.calibrated

        comm_fraction = self.comm_fraction

        dp = self.dp

        explanation = self.explanation

        grad_accum = self.grad_accum

        hardware_tflops_per_gpu = self.hardware_tflops_per_gpu

        memory = self.memory.to_dict()

        memory_per_gpu_bytes = self.memory_per_gpu_bytes

        mfu = self.mfu

        micro_batch = self.micro_batch

        pp = self.pp

        recompute = self.recompute.value

        replicas = self.replicas

        sequence_parallel = self.sequence_parallel

        step_time_s = self.step_time_s

        tflops_per_gpu = self.tflops_per_gpu

        tokens_per_s = self.tokens_per_s

        tp = self.tp

        vp = self.vp

        workload = self.workload.value

        zero_stage = self.zero_stage

        images_per_s: float | None | Unset
        if isinstance(self.images_per_s, Unset):
            images_per_s = UNSET
        else:
            images_per_s = self.images_per_s

        prefill_tokens_per_s: float | None | Unset
        if isinstance(self.prefill_tokens_per_s, Unset):
            prefill_tokens_per_s = UNSET
        else:
            prefill_tokens_per_s = self.prefill_tokens_per_s

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "bubble_fraction": bubble_fraction,
                "calibrated": calibrated,
                "comm_fraction": comm_fraction,
                "dp": dp,
                "explanation": explanation,
                "grad_accum": grad_accum,
                "hardware_tflops_per_gpu": hardware_tflops_per_gpu,
                "memory": memory,
                "memory_per_gpu_bytes": memory_per_gpu_bytes,
                "mfu": mfu,
                "micro_batch": micro_batch,
                "pp": pp,
                "recompute": recompute,
                "replicas": replicas,
                "sequence_parallel": sequence_parallel,
                "step_time_s": step_time_s,
                "tflops_per_gpu": tflops_per_gpu,
                "tokens_per_s": tokens_per_s,
                "tp": tp,
                "vp": vp,
                "workload": workload,
                "zero_stage": zero_stage,
            }
        )
        if images_per_s is not UNSET:
            field_dict["images_per_s"] = images_per_s
        if prefill_tokens_per_s is not UNSET:
            field_dict["prefill_tokens_per_s"] = prefill_tokens_per_s

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.memory_breakdown import MemoryBreakdown

        d = dict(src_dict)
        bubble_fraction = d.pop("bubble_fraction")

        calibrated = d.pop("calibrated")

        comm_fraction = d.pop("comm_fraction")

        dp = d.pop("dp")

        explanation = d.pop("explanation")

        grad_accum = d.pop("grad_accum")

        hardware_tflops_per_gpu = d.pop("hardware_tflops_per_gpu")

        memory = MemoryBreakdown.from_dict(d.pop("memory"))

        memory_per_gpu_bytes = d.pop("memory_per_gpu_bytes")

        mfu = d.pop("mfu")

        micro_batch = d.pop("micro_batch")

        pp = d.pop("pp")

        recompute = Recompute(d.pop("recompute"))

        replicas = d.pop("replicas")

        sequence_parallel = d.pop("sequence_parallel")

        step_time_s = d.pop("step_time_s")

        tflops_per_gpu = d.pop("tflops_per_gpu")

        tokens_per_s = d.pop("tokens_per_s")

        tp = d.pop("tp")

        vp = d.pop("vp")

        workload = WorkloadKind(d.pop("workload"))

        zero_stage = d.pop("zero_stage")

        def _parse_images_per_s(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        images_per_s = _parse_images_per_s(d.pop("images_per_s", UNSET))

        def _parse_prefill_tokens_per_s(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        prefill_tokens_per_s = _parse_prefill_tokens_per_s(
            d.pop("prefill_tokens_per_s", UNSET)
        )

        plan = cls(
            bubble_fraction=bubble_fraction,
            calibrated=calibrated,
            comm_fraction=comm_fraction,
            dp=dp,
            explanation=explanation,
            grad_accum=grad_accum,
            hardware_tflops_per_gpu=hardware_tflops_per_gpu,
            memory=memory,
            memory_per_gpu_bytes=memory_per_gpu_bytes,
            mfu=mfu,
            micro_batch=micro_batch,
            pp=pp,
            recompute=recompute,
            replicas=replicas,
            sequence_parallel=sequence_parallel,
            step_time_s=step_time_s,
            tflops_per_gpu=tflops_per_gpu,
            tokens_per_s=tokens_per_s,
            tp=tp,
            vp=vp,
            workload=workload,
            zero_stage=zero_stage,
            images_per_s=images_per_s,
            prefill_tokens_per_s=prefill_tokens_per_s,
        )

        plan.additional_properties = d
        return plan

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
