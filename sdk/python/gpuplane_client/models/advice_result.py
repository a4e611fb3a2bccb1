from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.advice_mix import AdviceMix
    from ..models.advice_option import AdviceOption
    from ..models.skipped_pool import SkippedPool


T = TypeVar("T", bound="AdviceResult")


@_attrs_define
class AdviceResult:
    """Advice across pools: the cost/time frontier of every pool and GPU count. An option is left
    out when another is at least as fast and costs no more, or no more than `cost_tie_bps` more
    (a tie goes to the faster). Options meeting every constraint (deadline, budget, load) come
    first, then the rest; each part cheapest, so slowest, first.

        Attributes:
            cost_tie_bps (int): The cost tolerance of a tie, in basis points of the smaller cost (100 = 1%): of two
                options whose costs differ by no more, only the faster is shown.
            options (list[AdviceOption]):
            skipped (list[SkippedPool]):
            mixes (list[AdviceMix] | Unset): Training and LoRA: two pools of one currency used together by one plan over
                unlike GPUs,
                each mix shown only when it is cheaper or faster than every single-pool option of its
                currency (and not beaten by another mix shown); empty when no mix is. Apart from
                `options`, which stay single-pool, so that a client reading them is unaffected.
    """

    cost_tie_bps: int
    options: list[AdviceOption]
    skipped: list[SkippedPool]
    mixes: list[AdviceMix] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        cost_tie_bps = self.cost_tie_bps

        options = []
        for options_item_data in self.options:
            options_item = options_item_data.to_dict()
            options.append(options_item)

        skipped = []
        for skipped_item_data in self.skipped:
            skipped_item = skipped_item_data.to_dict()
            skipped.append(skipped_item)

        mixes: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.mixes, Unset):
            mixes = []
            for mixes_item_data in self.mixes:
                mixes_item = mixes_item_data.to_dict()
                mixes.append(mixes_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "cost_tie_bps": cost_tie_bps,
                "options": options,
                "skipped": skipped,
            }
        )
        if mixes is not UNSET:
            field_dict["mixes"] = mixes

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.advice_mix import AdviceMix
        from ..models.advice_option import AdviceOption
        from ..models.skipped_pool import SkippedPool

        d = dict(src_dict)
        cost_tie_bps = d.pop("cost_tie_bps")

        options = []
        _options = d.pop("options")
        for options_item_data in _options:
            options_item = AdviceOption.from_dict(options_item_data)

            options.append(options_item)

        skipped = []
        _skipped = d.pop("skipped")
        for skipped_item_data in _skipped:
            skipped_item = SkippedPool.from_dict(skipped_item_data)

            skipped.append(skipped_item)

        _mixes = d.pop("mixes", UNSET)
        mixes: list[AdviceMix] | Unset = UNSET
        if _mixes is not UNSET:
            mixes = []
            for mixes_item_data in _mixes:
                mixes_item = AdviceMix.from_dict(mixes_item_data)

                mixes.append(mixes_item)

        advice_result = cls(
            cost_tie_bps=cost_tie_bps,
            options=options,
            skipped=skipped,
            mixes=mixes,
        )

        advice_result.additional_properties = d
        return advice_result

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
