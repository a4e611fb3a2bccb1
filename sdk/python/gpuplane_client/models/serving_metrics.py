from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.precision import Precision

T = TypeVar("T", bound="ServingMetrics")


@_attrs_define
class ServingMetrics:
    """Serving figures of an LLM inference plan, per replica unless said otherwise.

    Attributes:
        concurrency (int): Sequences in flight per replica (also `micro_batch`).
        concurrency_searched (bool): The concurrency was searched (the most throughput within the latency bounds), not
            given.
        decode_step_s (float): One decode step alone, seconds.
        input_len (int):
        kv_cache_precision (Precision): Compute precision. FP8 uses the FP8 tensor peak for GEMMs; weights and optimizer
            states
            stay as frameworks keep them (bf16 weights + fp32 master), so memory is the same as bf16.
        max_concurrency (int): The most sequences whose KV cache fits per replica.
        output_len (int):
        requests_per_s (float): Requests completed per second, whole cluster.
        tpot_s (float): Time per output token, seconds: one decode step of every sequence in flight plus the
            share of prompt prefill interleaved with it.
        ttft_s (float): Time to first token, seconds: the prompt's prefill, the decode steps it is interleaved
            with, and the wait behind other prompts.
        weight_only_fp8 (bool): FP8 weights on a GPU without FP8 tensor cores: weights stored in 8 bits, computed in 16
            (weight-only FP8, W8A16, as vLLM's Marlin kernels serve it on A100).
    """

    concurrency: int
    concurrency_searched: bool
    decode_step_s: float
    input_len: int
    kv_cache_precision: Precision
    max_concurrency: int
    output_len: int
    requests_per_s: float
    tpot_s: float
    ttft_s: float
    weight_only_fp8: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        concurrency = self.concurrency

        concurrency_searched = self.concurrency_searched

        decode_step_s = self.decode_step_s

        input_len = self.input_len

        kv_cache_precision = self.kv_cache_precision.value

        max_concurrency = self.max_concurrency

        output_len = self.output_len

        requests_per_s = self.requests_per_s

        tpot_s = self.tpot_s

        ttft_s = self.ttft_s

        weight_only_fp8 = self.weight_only_fp8

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "concurrency": concurrency,
                "concurrency_searched": concurrency_searched,
                "decode_step_s": decode_step_s,
                "input_len": input_len,
                "kv_cache_precision": kv_cache_precision,
                "max_concurrency": max_concurrency,
                "output_len": output_len,
                "requests_per_s": requests_per_s,
                "tpot_s": tpot_s,
                "ttft_s": ttft_s,
                "weight_only_fp8": weight_only_fp8,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        concurrency = d.pop("concurrency")

        concurrency_searched = d.pop("concurrency_searched")

        decode_step_s = d.pop("decode_step_s")

        input_len = d.pop("input_len")

        kv_cache_precision = Precision(d.pop("kv_cache_precision"))

        max_concurrency = d.pop("max_concurrency")

        output_len = d.pop("output_len")

        requests_per_s = d.pop("requests_per_s")

        tpot_s = d.pop("tpot_s")

        ttft_s = d.pop("ttft_s")

        weight_only_fp8 = d.pop("weight_only_fp8")

        serving_metrics = cls(
            concurrency=concurrency,
            concurrency_searched=concurrency_searched,
            decode_step_s=decode_step_s,
            input_len=input_len,
            kv_cache_precision=kv_cache_precision,
            max_concurrency=max_concurrency,
            output_len=output_len,
            requests_per_s=requests_per_s,
            tpot_s=tpot_s,
            ttft_s=ttft_s,
            weight_only_fp8=weight_only_fp8,
        )

        serving_metrics.additional_properties = d
        return serving_metrics

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
