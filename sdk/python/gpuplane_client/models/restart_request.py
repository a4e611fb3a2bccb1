from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.failure_cause import FailureCause
from ..types import UNSET, Unset

T = TypeVar("T", bound="RestartRequest")


@_attrs_define
class RestartRequest:
    """What a job asks of restarts (`restart` on create); every field optional.

    Attributes:
        backoff_s (int | None | Unset): Seconds before the first restart, doubled for each one after it (at most 3600);
            0 to 3600, default 10.
        detect_stalls (bool | None | Unset): Watch the running runtime job's steps and stop it when they stall (below):
            restarted when the policy
            restarts on `stalled`, else failed with the reason. Default: on when the job restarts on `stalled`; off
            otherwise, so a job that pauses on purpose (a long evaluation) is never stopped unasked.
        first_step_within_s (int | None | Unset): ...or when its first step does not come within this many seconds of
            its generation's start (0: never;
            else 10 to 86400; default 1800: loading a large checkpoint takes minutes).
        from_scratch (bool | None | Unset): Restart a job that names no checkpoint directory: it begins again at step 0.
            Without it, such a job with
            `max_restarts` above 0 is refused (a job that serves has nothing to resume and needs none).
        max_restarts (int | None | Unset): Restarts at most, 0 to 20 (0: never restart: a failure fails the job).
            Default: 3 for a
            `gpuplane-runtime` job with a model whose checkpoints outlive a node (`GPUPLANE_CHECKPOINT_DIR` set, by a
            read-write volume of the lease or in `env`), and for a job that serves; else 0. A service's replica that
            fails while others serve runs again on its node on its own, after the backoff; this bounds the attempts
            in a row that fail before answering their health probe.
        on (list[FailureCause] | None | Unset): The causes that restart the job (default: all four); a failure of
            another cause fails it.
        stall_factor (int | None | Unset): A running runtime job is stalled when no step arrives for this many times its
            median step time (2 to
            1000, default 10), and at least `stall_min_s` seconds (10 to 86400, default 600).
        stall_min_s (int | None | Unset):
    """

    backoff_s: int | None | Unset = UNSET
    detect_stalls: bool | None | Unset = UNSET
    first_step_within_s: int | None | Unset = UNSET
    from_scratch: bool | None | Unset = UNSET
    max_restarts: int | None | Unset = UNSET
    on: list[FailureCause] | None | Unset = UNSET
    stall_factor: int | None | Unset = UNSET
    stall_min_s: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        backoff_s: int | None | Unset
        if isinstance(self.backoff_s, Unset):
            backoff_s = UNSET
        else:
            backoff_s = self.backoff_s

        detect_stalls: bool | None | Unset
        if isinstance(self.detect_stalls, Unset):
            detect_stalls = UNSET
        else:
            detect_stalls = self.detect_stalls

        first_step_within_s: int | None | Unset
        if isinstance(self.first_step_within_s, Unset):
            first_step_within_s = UNSET
        else:
            first_step_within_s = self.first_step_within_s

        from_scratch: bool | None | Unset
        if isinstance(self.from_scratch, Unset):
            from_scratch = UNSET
        else:
            from_scratch = self.from_scratch

        max_restarts: int | None | Unset
        if isinstance(self.max_restarts, Unset):
            max_restarts = UNSET
        else:
            max_restarts = self.max_restarts

        on: list[str] | None | Unset
        if isinstance(self.on, Unset):
            on = UNSET
        elif isinstance(self.on, list):
            on = []
            for on_type_0_item_data in self.on:
                on_type_0_item = on_type_0_item_data.value
                on.append(on_type_0_item)

        else:
            on = self.on

        stall_factor: int | None | Unset
        if isinstance(self.stall_factor, Unset):
            stall_factor = UNSET
        else:
            stall_factor = self.stall_factor

        stall_min_s: int | None | Unset
        if isinstance(self.stall_min_s, Unset):
            stall_min_s = UNSET
        else:
            stall_min_s = self.stall_min_s

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if backoff_s is not UNSET:
            field_dict["backoff_s"] = backoff_s
        if detect_stalls is not UNSET:
            field_dict["detect_stalls"] = detect_stalls
        if first_step_within_s is not UNSET:
            field_dict["first_step_within_s"] = first_step_within_s
        if from_scratch is not UNSET:
            field_dict["from_scratch"] = from_scratch
        if max_restarts is not UNSET:
            field_dict["max_restarts"] = max_restarts
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

        def _parse_backoff_s(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        backoff_s = _parse_backoff_s(d.pop("backoff_s", UNSET))

        def _parse_detect_stalls(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        detect_stalls = _parse_detect_stalls(d.pop("detect_stalls", UNSET))

        def _parse_first_step_within_s(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        first_step_within_s = _parse_first_step_within_s(
            d.pop("first_step_within_s", UNSET)
        )

        def _parse_from_scratch(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        from_scratch = _parse_from_scratch(d.pop("from_scratch", UNSET))

        def _parse_max_restarts(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_restarts = _parse_max_restarts(d.pop("max_restarts", UNSET))

        def _parse_on(data: object) -> list[FailureCause] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                on_type_0 = []
                _on_type_0 = data
                for on_type_0_item_data in _on_type_0:
                    on_type_0_item = FailureCause(on_type_0_item_data)

                    on_type_0.append(on_type_0_item)

                return on_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[FailureCause] | None | Unset, data)

        on = _parse_on(d.pop("on", UNSET))

        def _parse_stall_factor(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        stall_factor = _parse_stall_factor(d.pop("stall_factor", UNSET))

        def _parse_stall_min_s(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        stall_min_s = _parse_stall_min_s(d.pop("stall_min_s", UNSET))

        restart_request = cls(
            backoff_s=backoff_s,
            detect_stalls=detect_stalls,
            first_step_within_s=first_step_within_s,
            from_scratch=from_scratch,
            max_restarts=max_restarts,
            on=on,
            stall_factor=stall_factor,
            stall_min_s=stall_min_s,
        )

        return restart_request
