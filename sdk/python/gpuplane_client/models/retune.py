from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

from ..models.retune_mode import RetuneMode
from ..types import UNSET, Unset

T = TypeVar("T", bound="Retune")


@_attrs_define
class Retune:
    """Re-planning from measurements; see [`retune`] for how the planner is corrected.

    Attributes:
        min_gain_pct (int | Unset): The least predicted gain in step time, percent of the measured step, that suggests
            or makes a replan. Default: 20.
        mode (RetuneMode | Unset): What the service does with a running job's measured steps (the gpuplane runtime's).
    """

    min_gain_pct: int | Unset = 20
    mode: RetuneMode | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        min_gain_pct = self.min_gain_pct

        mode: str | Unset = UNSET
        if not isinstance(self.mode, Unset):
            mode = self.mode.value

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if min_gain_pct is not UNSET:
            field_dict["min_gain_pct"] = min_gain_pct
        if mode is not UNSET:
            field_dict["mode"] = mode

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        min_gain_pct = d.pop("min_gain_pct", UNSET)

        _mode = d.pop("mode", UNSET)
        mode: RetuneMode | Unset
        if isinstance(_mode, Unset):
            mode = UNSET
        else:
            mode = RetuneMode(_mode)

        retune = cls(
            min_gain_pct=min_gain_pct,
            mode=mode,
        )

        return retune
