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
        concurrent_seqs (int | None | Unset): Inference: sequences in flight per replica (default 16).
        context_len (int | None | Unset): Inference: tokens of context per sequence (default `seq_len` or 4096).
        global_batch (int | None | Unset): Global batch in sequences (training; default 512 sequences).
        lora_rank (int | None | Unset): LoRA rank (default 16).
        precision (Precision | Unset): Compute precision. FP8 uses the FP8 tensor peak for GEMMs; weights and optimizer
            states
            stay as frameworks keep them (bf16 weights + fp32 master), so memory is the same as bf16.
        seq_len (int | None | Unset): Training sequence length (default 4096).
    """

    kind: WorkloadKind
    concurrent_seqs: int | None | Unset = UNSET
    context_len: int | None | Unset = UNSET
    global_batch: int | None | Unset = UNSET
    lora_rank: int | None | Unset = UNSET
    precision: Precision | Unset = UNSET
    seq_len: int | None | Unset = UNSET

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

        lora_rank: int | None | Unset
        if isinstance(self.lora_rank, Unset):
            lora_rank = UNSET
        else:
            lora_rank = self.lora_rank

        precision: str | Unset = UNSET
        if not isinstance(self.precision, Unset):
            precision = self.precision.value

        seq_len: int | None | Unset
        if isinstance(self.seq_len, Unset):
            seq_len = UNSET
        else:
            seq_len = self.seq_len

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
        if lora_rank is not UNSET:
            field_dict["lora_rank"] = lora_rank
        if precision is not UNSET:
            field_dict["precision"] = precision
        if seq_len is not UNSET:
            field_dict["seq_len"] = seq_len

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

        def _parse_lora_rank(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        lora_rank = _parse_lora_rank(d.pop("lora_rank", UNSET))

        _precision = d.pop("precision", UNSET)
        precision: Precision | Unset
        if isinstance(_precision, Unset):
            precision = UNSET
        else:
            precision = Precision(_precision)

        def _parse_seq_len(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        seq_len = _parse_seq_len(d.pop("seq_len", UNSET))

        workload_fields = cls(
            kind=kind,
            concurrent_seqs=concurrent_seqs,
            context_len=context_len,
            global_batch=global_batch,
            lora_rank=lora_rank,
            precision=precision,
            seq_len=seq_len,
        )

        return workload_fields
