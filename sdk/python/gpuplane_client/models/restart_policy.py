from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.failure_cause import FailureCause
from ..types import UNSET, Unset

T = TypeVar("T", bound="RestartPolicy")


@_attrs_define
class RestartPolicy:
    """A job's restart policy, as the service resolved it at create.

    Attributes:
        max_restarts (int):
        backoff_s (int | Unset):
        detect_stalls (bool | Unset):
        first_step_within_s (int | Unset):
        from_scratch (bool | Unset):
        on (list[FailureCause] | Unset):
        stall_factor (int | Unset):
        stall_min_s (int | Unset):
    """

    max_restarts: int
    backoff_s: int | Unset = UNSET
    detect_stalls: bool | Unset = UNSET
    first_step_within_s: int | Unset = UNSET
    from_scratch: bool | Unset = UNSET
    on: list[FailureCause] | Unset = UNSET
    stall_factor: int | Unset = UNSET
    stall_min_s: int | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        max_restarts = self.max_restarts

        backoff_s = self.backoff_s

        detect_stalls = self.detect_stalls

        first_step_within_s = self.first_step_within_s

        from_scratch = self.from_scratch

        on: list[str] | Unset = UNSET
        if not isinstance(self.on, Unset):
            on = []
            for on_item_data in self.on:
                on_item = on_item_data.value
                on.append(on_item)

        stall_factor = self.stall_factor

        stall_min_s = self.stall_min_s

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "max_restarts": max_restarts,
            }
        )
        if backoff_s is not UNSET:
            field_dict["backoff_s"] = backoff_s
        if detect_stalls is not UNSET:
            field_dict["detect_stalls"] = detect_stalls
        if first_step_within_s is not UNSET:
            field_dict["first_step_within_s"] = first_step_within_s
        if from_scratch is not UNSET:
            field_dict["from_scratch"] = from_scratch
        if on is not UNSET:
            field_dict["on"] = on
        if stall_factor is not UNSET:
            field_dict["stall_factor"] = stall_factor
        if stall_min_s is not UNSET:
            field_dict["stall_min_s"] = stall_min_s

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        max_restarts = d.pop("max_restarts")

        backoff_s = d.pop("backoff_s", UNSET)

        detect_stalls = d.pop("detect_stalls", UNSET)

        first_step_within_s = d.pop("first_step_within_s", UNSET)

        from_scratch = d.pop("from_scratch", UNSET)

        _on = d.pop("on", UNSET)
        on: list[FailureCause] | Unset = UNSET
        if _on is not UNSET:
            on = []
            for on_item_data in _on:
                on_item = FailureCause(on_item_data)

                on.append(on_item)

        stall_factor = d.pop("stall_factor", UNSET)

        stall_min_s = d.pop("stall_min_s", UNSET)

        restart_policy = cls(
            max_restarts=max_restarts,
            backoff_s=backoff_s,
            detect_stalls=detect_stalls,
            first_step_within_s=first_step_within_s,
            from_scratch=from_scratch,
            on=on,
            stall_factor=stall_factor,
            stall_min_s=stall_min_s,
        )

        restart_policy.additional_properties = d
        return restart_policy

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
