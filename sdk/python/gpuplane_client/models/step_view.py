from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="StepView")


@_attrs_define
class StepView:
    """One stored step as the tenant reads it.

    Attributes:
        at (datetime.datetime):
        loss (float):
        node_id (UUID): The node whose process measured it.
        peak_memory_bytes (int):
        step (int):
        step_time_s (float):
        tokens (int):
    """

    at: datetime.datetime
    loss: float
    node_id: UUID
    peak_memory_bytes: int
    step: int
    step_time_s: float
    tokens: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        at = self.at.isoformat()

        loss = self.loss

        node_id = str(self.node_id)

        peak_memory_bytes = self.peak_memory_bytes

        step = self.step

        step_time_s = self.step_time_s

        tokens = self.tokens

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "at": at,
                "loss": loss,
                "node_id": node_id,
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

        loss = d.pop("loss")

        node_id = UUID(d.pop("node_id"))

        peak_memory_bytes = d.pop("peak_memory_bytes")

        step = d.pop("step")

        step_time_s = d.pop("step_time_s")

        tokens = d.pop("tokens")

        step_view = cls(
            at=at,
            loss=loss,
            node_id=node_id,
            peak_memory_bytes=peak_memory_bytes,
            step=step,
            step_time_s=step_time_s,
            tokens=tokens,
        )

        step_view.additional_properties = d
        return step_view

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
