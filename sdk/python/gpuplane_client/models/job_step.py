from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define

T = TypeVar("T", bound="JobStep")


@_attrs_define
class JobStep:
    """One measured optimizer step of a job, as an agent reports it with its heartbeat.

    Attributes:
        at (datetime.datetime):
        job_node_id (UUID): The assignment on this node whose process measured it.
        loss (float): The step's training loss (finite).
        peak_memory_bytes (int): Peak accelerator memory of the reporting rank in the step, bytes (host memory on CPU).
        step (int): Optimizer step, from 1.
        step_time_s (float): Wall time of the step, seconds.
        tokens (int): Tokens the whole job processed in the step.
    """

    at: datetime.datetime
    job_node_id: UUID
    loss: float
    peak_memory_bytes: int
    step: int
    step_time_s: float
    tokens: int

    def to_dict(self) -> dict[str, Any]:
        at = self.at.isoformat()

        job_node_id = str(self.job_node_id)

        loss = self.loss

        peak_memory_bytes = self.peak_memory_bytes

        step = self.step

        step_time_s = self.step_time_s

        tokens = self.tokens

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "at": at,
                "job_node_id": job_node_id,
                "loss": loss,
                "peak_memory_bytes": peak_memory_bytes,
                "step": step,
                "step_time_s": step_time_s,
                "tokens": tokens,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        at = datetime.datetime.fromisoformat(d.pop("at"))

        job_node_id = UUID(d.pop("job_node_id"))

        loss = d.pop("loss")

        peak_memory_bytes = d.pop("peak_memory_bytes")

        step = d.pop("step")

        step_time_s = d.pop("step_time_s")

        tokens = d.pop("tokens")

        job_step = cls(
            at=at,
            job_node_id=job_node_id,
            loss=loss,
            peak_memory_bytes=peak_memory_bytes,
            step=step,
            step_time_s=step_time_s,
            tokens=tokens,
        )

        return job_step
