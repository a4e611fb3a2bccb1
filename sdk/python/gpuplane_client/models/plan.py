from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.offload import Offload
from ..models.recompute import Recompute
from ..models.stage_split import StageSplit
from ..models.workload_kind import WorkloadKind
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.memory_breakdown import MemoryBreakdown
    from ..models.serving_metrics import ServingMetrics


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
        step_time_s (float): Training: one optimizer step. Inference: the time per output token (one decode step of all
            sequences in flight with its share of prompt prefill); diffusion: one batch of images.
        tflops_per_gpu (float): Model FLOPs (no recomputation) per second per GPU, TFLOP/s.
        tokens_per_s (float): Training tokens/s, or generated (decode) tokens/s for inference with the prompts' prefill
            charged, whole cluster.
        tp (int):
        vp (int): Virtual pipeline stages (interleaving chunks per GPU).
        workload (WorkloadKind): What the GPUs will do.
        zero_stage (int):
        cp (int | Unset): Context-parallel degree (ring attention; each GPU holds `seq_len / cp` tokens).
        ep (int | Unset): Expert-parallel degree (MoE: each GPU holds `experts / ep` experts; carved out of
            `dp * cp`, or of `tp * dp * cp` when `etp` is 1). 1 for dense models.
        etp (int | None | Unset): Expert tensor-parallel degree (Megatron's `--expert-tensor-parallel-size`) where it is
            not
            `tp`: 1 when the experts are kept whole and expert parallelism spans the tensor- and
            data-parallel ranks. Absent: `tp`, Megatron's default.
        global_batch (int | Unset): Training: the global batch (sequences) this plan runs; differs from the request when
            the
            requested batch does not divide by the data-parallel degree (see `notes`).
        host_memory_per_node_bytes (int | Unset): Host memory per node the plan needs for offloaded states, bytes (0
            without offload).
        idle_gpus (int | Unset): GPUs of the cluster the plan leaves idle (no split uses them all; see `notes`).
        images_per_s (float | None | Unset): Diffusion inference only: images/s of the whole cluster.
        layers_per_stage (list[int] | Unset): Transformer layers held by each pipeline stage, first to last (all virtual
            chunks of a
            stage together).
        notes (list[str] | Unset): Departures from the request and warnings (adjusted batch, idle GPUs, a slow step).
        offload (Offload | Unset): CPU offload of model states (DeepSpeed ZeRO-Offload / FSDP CPU offload).
        prefill_tokens_per_s (float | None | Unset): Inference only: prompt (prefill) tokens/s of the whole cluster,
            compute-bound.
        serving (None | ServingMetrics | Unset):
        stage_split (StageSplit | Unset): How the layers are split over pipeline stages.
        summary (str | Unset): The plan in plain words, for someone who does not speak Megatron: what runs where, how
            long a step
            takes, how much memory it needs. `explanation` says the same in the planner's terms.
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
    cp: int | Unset = UNSET
    ep: int | Unset = UNSET
    etp: int | None | Unset = UNSET
    global_batch: int | Unset = UNSET
    host_memory_per_node_bytes: int | Unset = UNSET
    idle_gpus: int | Unset = UNSET
    images_per_s: float | None | Unset = UNSET
    layers_per_stage: list[int] | Unset = UNSET
    notes: list[str] | Unset = UNSET
    offload: Offload | Unset = UNSET
    prefill_tokens_per_s: float | None | Unset = UNSET
    serving: None | ServingMetrics | Unset = UNSET
    stage_split: StageSplit | Unset = UNSET
    summary: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.serving_metrics import ServingMetrics

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

        cp = self.cp

        ep = self.ep

        etp: int | None | Unset
        if isinstance(self.etp, Unset):
            etp = UNSET
        else:
            etp = self.etp

        global_batch = self.global_batch

        host_memory_per_node_bytes = self.host_memory_per_node_bytes

        idle_gpus = self.idle_gpus

        images_per_s: float | None | Unset
        if isinstance(self.images_per_s, Unset):
            images_per_s = UNSET
        else:
            images_per_s = self.images_per_s

        layers_per_stage: list[int] | Unset = UNSET
        if not isinstance(self.layers_per_stage, Unset):
            layers_per_stage = self.layers_per_stage

        notes: list[str] | Unset = UNSET
        if not isinstance(self.notes, Unset):
            notes = self.notes

        offload: str | Unset = UNSET
        if not isinstance(self.offload, Unset):
            offload = self.offload.value

        prefill_tokens_per_s: float | None | Unset
        if isinstance(self.prefill_tokens_per_s, Unset):
            prefill_tokens_per_s = UNSET
        else:
            prefill_tokens_per_s = self.prefill_tokens_per_s

        serving: dict[str, Any] | None | Unset
        if isinstance(self.serving, Unset):
            serving = UNSET
        elif isinstance(self.serving, ServingMetrics):
            serving = self.serving.to_dict()
        else:
            serving = self.serving

        stage_split: str | Unset = UNSET
        if not isinstance(self.stage_split, Unset):
            stage_split = self.stage_split.value

        summary = self.summary

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
        if cp is not UNSET:
            field_dict["cp"] = cp
        if ep is not UNSET:
            field_dict["ep"] = ep
        if etp is not UNSET:
            field_dict["etp"] = etp
        if global_batch is not UNSET:
            field_dict["global_batch"] = global_batch
        if host_memory_per_node_bytes is not UNSET:
            field_dict["host_memory_per_node_bytes"] = host_memory_per_node_bytes
        if idle_gpus is not UNSET:
            field_dict["idle_gpus"] = idle_gpus
        if images_per_s is not UNSET:
            field_dict["images_per_s"] = images_per_s
        if layers_per_stage is not UNSET:
            field_dict["layers_per_stage"] = layers_per_stage
        if notes is not UNSET:
            field_dict["notes"] = notes
        if offload is not UNSET:
            field_dict["offload"] = offload
        if prefill_tokens_per_s is not UNSET:
            field_dict["prefill_tokens_per_s"] = prefill_tokens_per_s
        if serving is not UNSET:
            field_dict["serving"] = serving
        if stage_split is not UNSET:
            field_dict["stage_split"] = stage_split
        if summary is not UNSET:
            field_dict["summary"] = summary

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.memory_breakdown import MemoryBreakdown
        from ..models.serving_metrics import ServingMetrics

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

        cp = d.pop("cp", UNSET)

        ep = d.pop("ep", UNSET)

        def _parse_etp(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        etp = _parse_etp(d.pop("etp", UNSET))

        global_batch = d.pop("global_batch", UNSET)

        host_memory_per_node_bytes = d.pop("host_memory_per_node_bytes", UNSET)

        idle_gpus = d.pop("idle_gpus", UNSET)

        def _parse_images_per_s(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        images_per_s = _parse_images_per_s(d.pop("images_per_s", UNSET))

        layers_per_stage = cast(list[int], d.pop("layers_per_stage", UNSET))

        notes = cast(list[str], d.pop("notes", UNSET))

        _offload = d.pop("offload", UNSET)
        offload: Offload | Unset
        if isinstance(_offload, Unset):
            offload = UNSET
        else:
            offload = Offload(_offload)

        def _parse_prefill_tokens_per_s(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        prefill_tokens_per_s = _parse_prefill_tokens_per_s(
            d.pop("prefill_tokens_per_s", UNSET)
        )

        def _parse_serving(data: object) -> None | ServingMetrics | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                serving_type_0 = ServingMetrics.from_dict(data)

                return serving_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ServingMetrics | Unset, data)

        serving = _parse_serving(d.pop("serving", UNSET))

        _stage_split = d.pop("stage_split", UNSET)
        stage_split: StageSplit | Unset
        if isinstance(_stage_split, Unset):
            stage_split = UNSET
        else:
            stage_split = StageSplit(_stage_split)

        summary = d.pop("summary", UNSET)

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
            cp=cp,
            ep=ep,
            etp=etp,
            global_batch=global_batch,
            host_memory_per_node_bytes=host_memory_per_node_bytes,
            idle_gpus=idle_gpus,
            images_per_s=images_per_s,
            layers_per_stage=layers_per_stage,
            notes=notes,
            offload=offload,
            prefill_tokens_per_s=prefill_tokens_per_s,
            serving=serving,
            stage_split=stage_split,
            summary=summary,
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
