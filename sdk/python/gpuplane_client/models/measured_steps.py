from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="MeasuredSteps")


@_attrs_define
class MeasuredSteps:
    """A job's measured steps against its plan's prediction.

    Attributes:
        first_loss (float):
        last_at (datetime.datetime):
        last_loss (float):
        last_step (int):
        median_step_time_s (float): Median wall time of a step, seconds (past the first, warm-up step once there are
            more).
        peak_memory_bytes (int): The highest peak memory any reported step saw on the reporting rank, bytes.
        steps (int): Steps reported.
        tokens_per_s (float): Tokens per second at the median step.
        predicted_memory_per_gpu_bytes (int | None | Unset):
        predicted_step_time_s (float | None | Unset): The plan's predicted step time and throughput (absent without a
            plan).
        predicted_tokens_per_s (float | None | Unset):
        step_time_vs_plan (float | None | Unset): Measured over predicted step time (above 1: slower than planned).
    """

    first_loss: float
    last_at: datetime.datetime
    last_loss: float
    last_step: int
    median_step_time_s: float
    peak_memory_bytes: int
    steps: int
    tokens_per_s: float
    predicted_memory_per_gpu_bytes: int | None | Unset = UNSET
    predicted_step_time_s: float | None | Unset = UNSET
    predicted_tokens_per_s: float | None | Unset = UNSET
    step_time_vs_plan: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        first_loss = self.first_loss

        last_at = self.last_at.isoformat()

        last_loss = self.last_loss

        last_step = self.last_step

        median_step_time_s = self.median_step_time_s

        peak_memory_bytes = self.peak_memory_bytes

        steps = self.steps

        tokens_per_s = self.tokens_per_s

        predicted_memory_per_gpu_bytes: int | None | Unset
        if isinstance(self.predicted_memory_per_gpu_bytes, Unset):
            predicted_memory_per_gpu_bytes = UNSET
        else:
            predicted_memory_per_gpu_bytes = self.predicted_memory_per_gpu_bytes

        predicted_step_time_s: float | None | Unset
        if isinstance(self.predicted_step_time_s, Unset):
            predicted_step_time_s = UNSET
        else:
            predicted_step_time_s = self.predicted_step_time_s

        predicted_tokens_per_s: float | None | Unset
        if isinstance(self.predicted_tokens_per_s, Unset):
            predicted_tokens_per_s = UNSET
        else:
            predicted_tokens_per_s = self.predicted_tokens_per_s

        step_time_vs_plan: float | None | Unset
        if isinstance(self.step_time_vs_plan, Unset):
            step_time_vs_plan = UNSET
        else:
            step_time_vs_plan = self.step_time_vs_plan

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "first_loss": first_loss,
                "last_at": last_at,
                "last_loss": last_loss,
                "last_step": last_step,
                "median_step_time_s": median_step_time_s,
                "peak_memory_bytes": peak_memory_bytes,
                "steps": steps,
                "tokens_per_s": tokens_per_s,
            }
        )
        if predicted_memory_per_gpu_bytes is not UNSET:
            field_dict["predicted_memory_per_gpu_bytes"] = (
                predicted_memory_per_gpu_bytes
            )
        if predicted_step_time_s is not UNSET:
            field_dict["predicted_step_time_s"] = predicted_step_time_s
        if predicted_tokens_per_s is not UNSET:
            field_dict["predicted_tokens_per_s"] = predicted_tokens_per_s
        if step_time_vs_plan is not UNSET:
            field_dict["step_time_vs_plan"] = step_time_vs_plan

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        first_loss = d.pop("first_loss")

        last_at = datetime.datetime.fromisoformat(d.pop("last_at"))

        last_loss = d.pop("last_loss")

        last_step = d.pop("last_step")

        median_step_time_s = d.pop("median_step_time_s")

        peak_memory_bytes = d.pop("peak_memory_bytes")

        steps = d.pop("steps")

        tokens_per_s = d.pop("tokens_per_s")

        def _parse_predicted_memory_per_gpu_bytes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        predicted_memory_per_gpu_bytes = _parse_predicted_memory_per_gpu_bytes(
            d.pop("predicted_memory_per_gpu_bytes", UNSET)
        )

        def _parse_predicted_step_time_s(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        predicted_step_time_s = _parse_predicted_step_time_s(
            d.pop("predicted_step_time_s", UNSET)
        )

        def _parse_predicted_tokens_per_s(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        predicted_tokens_per_s = _parse_predicted_tokens_per_s(
            d.pop("predicted_tokens_per_s", UNSET)
        )

        def _parse_step_time_vs_plan(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        step_time_vs_plan = _parse_step_time_vs_plan(d.pop("step_time_vs_plan", UNSET))

        measured_steps = cls(
            first_loss=first_loss,
            last_at=last_at,
            last_loss=last_loss,
            last_step=last_step,
            median_step_time_s=median_step_time_s,
            peak_memory_bytes=peak_memory_bytes,
            steps=steps,
            tokens_per_s=tokens_per_s,
            predicted_memory_per_gpu_bytes=predicted_memory_per_gpu_bytes,
            predicted_step_time_s=predicted_step_time_s,
            predicted_tokens_per_s=predicted_tokens_per_s,
            step_time_vs_plan=step_time_vs_plan,
        )

        measured_steps.additional_properties = d
        return measured_steps

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
