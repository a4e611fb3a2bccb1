from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.precision import Precision
from ..models.workload_kind import WorkloadKind
from ..types import UNSET, Unset

T = TypeVar("T", bound="WorkloadFields")


@_attrs_define
class WorkloadFields:
    """Workload fields as the API/CLI send them; defaults are filled by `resolve`.

    Attributes:
        kind (WorkloadKind): What the GPUs will do.
        concurrent_seqs (int | None | Unset): Inference: sequences in flight per replica, fixed. Default: searched, the
            concurrency that
            gives the most generated tokens/s within `ttft_ms` and `tpot_ms`.
        context_len (int | None | Unset): Inference: tokens of context per sequence, the most a sequence holds (default
            `input_len + output_len` when both are given, else `seq_len` or 4096).
        global_batch (int | None | Unset): Global batch in sequences (training; default 512 sequences).
        image_batch (int | None | Unset): Diffusion inference: images generated together on one GPU (default 1).
        input_len (int | None | Unset): Inference: prompt tokens per request (default `context_len - output_len`).
        kv_cache_precision (None | Precision | Unset):
        lora_rank (int | None | Unset): LoRA rank (default 16).
        output_len (int | None | Unset): Inference: generated tokens per request (default 256, at most half the
            context).
        precision (Precision | Unset): Compute precision. FP8 uses the FP8 tensor peak for GEMMs; weights and optimizer
            states
            stay as frameworks keep them (bf16 weights + fp32 master), so memory is the same as bf16.
        resolution (int | None | Unset): Diffusion inference: side of the square image, pixels (default: the model's
            native one).
        seq_len (int | None | Unset): Training sequence length (default 4096).
        steps (int | None | Unset): Diffusion inference: denoising steps per image (default: the model's).
        tpot_ms (float | None | Unset): Inference: bound on the time per output token, milliseconds (default none).
        ttft_ms (float | None | Unset): Inference: bound on the time to first token, milliseconds (default none).
    """

    kind: WorkloadKind
    concurrent_seqs: int | None | Unset = UNSET
    context_len: int | None | Unset = UNSET
    global_batch: int | None | Unset = UNSET
    image_batch: int | None | Unset = UNSET
    input_len: int | None | Unset = UNSET
    kv_cache_precision: None | Precision | Unset = UNSET
    lora_rank: int | None | Unset = UNSET
    output_len: int | None | Unset = UNSET
    precision: Precision | Unset = UNSET
    resolution: int | None | Unset = UNSET
    seq_len: int | None | Unset = UNSET
    steps: int | None | Unset = UNSET
    tpot_ms: float | None | Unset = UNSET
    ttft_ms: float | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        kind = self.kind.value

        concurrent_seqs: int | None | Unset
        if isinstance(self.concurrent_seqs, Unset):
            concurrent_seqs = UNSET
        else:
            concurrent_seqs = self.concurrent_seqs

        context_len: int | None | Unset
        if isinstance(self.context_len, Unset):
            context_len = UNSET
        else:
            context_len = self.context_len

        global_batch: int | None | Unset
        if isinstance(self.global_batch, Unset):
            global_batch = UNSET
        else:
            global_batch = self.global_batch

        image_batch: int | None | Unset
        if isinstance(self.image_batch, Unset):
            image_batch = UNSET
        else:
            image_batch = self.image_batch

        input_len: int | None | Unset
        if isinstance(self.input_len, Unset):
            input_len = UNSET
        else:
            input_len = self.input_len

        kv_cache_precision: None | str | Unset
        if isinstance(self.kv_cache_precision, Unset):
            kv_cache_precision = UNSET
        elif isinstance(self.kv_cache_precision, Precision):
            kv_cache_precision = self.kv_cache_precision.value
        else:
            kv_cache_precision = self.kv_cache_precision

        lora_rank: int | None | Unset
        if isinstance(self.lora_rank, Unset):
            lora_rank = UNSET
        else:
            lora_rank = self.lora_rank

        output_len: int | None | Unset
        if isinstance(self.output_len, Unset):
            output_len = UNSET
        else:
            output_len = self.output_len

        precision: str | Unset = UNSET
        if not isinstance(self.precision, Unset):
            precision = self.precision.value

        resolution: int | None | Unset
        if isinstance(self.resolution, Unset):
            resolution = UNSET
        else:
            resolution = self.resolution

        seq_len: int | None | Unset
        if isinstance(self.seq_len, Unset):
            seq_len = UNSET
        else:
            seq_len = self.seq_len

        steps: int | None | Unset
        if isinstance(self.steps, Unset):
            steps = UNSET
        else:
            steps = self.steps

        tpot_ms: float | None | Unset
        if isinstance(self.tpot_ms, Unset):
            tpot_ms = UNSET
        else:
            tpot_ms = self.tpot_ms

        ttft_ms: float | None | Unset
        if isinstance(self.ttft_ms, Unset):
            ttft_ms = UNSET
        else:
            ttft_ms = self.ttft_ms

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "kind": kind,
            }
        )
        if concurrent_seqs is not UNSET:
            field_dict["concurrent_seqs"] = concurrent_seqs
        if context_len is not UNSET:
            field_dict["context_len"] = context_len
        if global_batch is not UNSET:
            field_dict["global_batch"] = global_batch
        if image_batch is not UNSET:
            field_dict["image_batch"] = image_batch
        if input_len is not UNSET:
            field_dict["input_len"] = input_len
        if kv_cache_precision is not UNSET:
            field_dict["kv_cache_precision"] = kv_cache_precision
        if lora_rank is not UNSET:
            field_dict["lora_rank"] = lora_rank
        if output_len is not UNSET:
            field_dict["output_len"] = output_len
        if precision is not UNSET:
            field_dict["precision"] = precision
        if resolution is not UNSET:
            field_dict["resolution"] = resolution
        if seq_len is not UNSET:
            field_dict["seq_len"] = seq_len
        if steps is not UNSET:
            field_dict["steps"] = steps
        if tpot_ms is not UNSET:
            field_dict["tpot_ms"] = tpot_ms
        if ttft_ms is not UNSET:
            field_dict["ttft_ms"] = ttft_ms

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        kind = WorkloadKind(d.pop("kind"))

        def _parse_concurrent_seqs(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        concurrent_seqs = _parse_concurrent_seqs(d.pop("concurrent_seqs", UNSET))

        def _parse_context_len(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        context_len = _parse_context_len(d.pop("context_len", UNSET))

        def _parse_global_batch(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        global_batch = _parse_global_batch(d.pop("global_batch", UNSET))

        def _parse_image_batch(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        image_batch = _parse_image_batch(d.pop("image_batch", UNSET))

        def _parse_input_len(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        input_len = _parse_input_len(d.pop("input_len", UNSET))

        def _parse_kv_cache_precision(data: object) -> None | Precision | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                kv_cache_precision_type_0 = Precision(data)

                return kv_cache_precision_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Precision | Unset, data)

        kv_cache_precision = _parse_kv_cache_precision(
            d.pop("kv_cache_precision", UNSET)
        )

        def _parse_lora_rank(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        lora_rank = _parse_lora_rank(d.pop("lora_rank", UNSET))

        def _parse_output_len(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        output_len = _parse_output_len(d.pop("output_len", UNSET))

        _precision = d.pop("precision", UNSET)
        precision: Precision | Unset
        if isinstance(_precision, Unset):
            precision = UNSET
        else:
            precision = Precision(_precision)

        def _parse_resolution(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        resolution = _parse_resolution(d.pop("resolution", UNSET))

        def _parse_seq_len(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        seq_len = _parse_seq_len(d.pop("seq_len", UNSET))

        def _parse_steps(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        steps = _parse_steps(d.pop("steps", UNSET))

        def _parse_tpot_ms(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        tpot_ms = _parse_tpot_ms(d.pop("tpot_ms", UNSET))

        def _parse_ttft_ms(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        ttft_ms = _parse_ttft_ms(d.pop("ttft_ms", UNSET))

        workload_fields = cls(
            kind=kind,
            concurrent_seqs=concurrent_seqs,
            context_len=context_len,
            global_batch=global_batch,
            image_batch=image_batch,
            input_len=input_len,
            kv_cache_precision=kv_cache_precision,
            lora_rank=lora_rank,
            output_len=output_len,
            precision=precision,
            resolution=resolution,
            seq_len=seq_len,
            steps=steps,
            tpot_ms=tpot_ms,
            ttft_ms=ttft_ms,
        )

        return workload_fields
