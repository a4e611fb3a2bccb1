from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.reported_state import ReportedState
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.progress import Progress


T = TypeVar("T", bound="AssignmentStatus")


@_attrs_define
class AssignmentStatus:
    """A state transition of a job's process on this node. Idempotent; states only move forward.

    Example:
        {'exit_code': 0, 'output_tail': ['step 100 loss 1.93', 'done'], 'state': 'succeeded'}

    Attributes:
        state (ReportedState): A state an agent reports.
        exit_code (int | None | Unset): The exit code; a process killed by signal N reports 128 + N.
        output_tail (list[str] | Unset): The last lines of output (the service keeps at most 50, each cut to 1000
            characters).
        progress (None | Progress | Unset):
        reason (None | str | Unset): Why, for `failed` and `cancelled` (e.g. `agent restarted`).
    """

    state: ReportedState
    exit_code: int | None | Unset = UNSET
    output_tail: list[str] | Unset = UNSET
    progress: None | Progress | Unset = UNSET
    reason: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.progress import Progress

        state = self.state.value

        exit_code: int | None | Unset
        if isinstance(self.exit_code, Unset):
            exit_code = UNSET
        else:
            exit_code = self.exit_code

        output_tail: list[str] | Unset = UNSET
        if not isinstance(self.output_tail, Unset):
            output_tail = self.output_tail

        progress: dict[str, Any] | None | Unset
        if isinstance(self.progress, Unset):
            progress = UNSET
        elif isinstance(self.progress, Progress):
            progress = self.progress.to_dict()
        else:
            progress = self.progress

        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        else:
            reason = self.reason

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "state": state,
            }
        )
        if exit_code is not UNSET:
            field_dict["exit_code"] = exit_code
        if output_tail is not UNSET:
            field_dict["output_tail"] = output_tail
        if progress is not UNSET:
            field_dict["progress"] = progress
        if reason is not UNSET:
            field_dict["reason"] = reason

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.progress import Progress

        d = dict(src_dict)
        state = ReportedState(d.pop("state"))

        def _parse_exit_code(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        exit_code = _parse_exit_code(d.pop("exit_code", UNSET))

        output_tail = cast(list[str], d.pop("output_tail", UNSET))

        def _parse_progress(data: object) -> None | Progress | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                progress_type_0 = Progress.from_dict(data)

                return progress_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Progress | Unset, data)

        progress = _parse_progress(d.pop("progress", UNSET))

        def _parse_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))

        assignment_status = cls(
            state=state,
            exit_code=exit_code,
            output_tail=output_tail,
            progress=progress,
            reason=reason,
        )

        return assignment_status
