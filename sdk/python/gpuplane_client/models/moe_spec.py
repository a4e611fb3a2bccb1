from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="MoeSpec")


@_attrs_define
class MoeSpec:
    """Mixture-of-experts layout of the FFN. Each expert is an FFN of `ffn` (the architecture's
    field); shared experts run on every token.

        Attributes:
            experts (int): Routed experts per MoE layer.
            experts_per_token (int): Routed experts each token is sent to (top-k).
            capacity_factor (float | None | Unset): Expert capacity factor: tokens an expert computes (and exchanges)
                relative to a perfectly
                balanced router, e.g. 1.25; default 1.0 (dropless with balanced routing).
            dense_ffn (int | None | Unset): FFN size of those dense layers (default: `ffn`).
            dense_layers (int | Unset): The first `dense_layers` layers have a dense FFN of `dense_ffn` instead
                (DeepSeek-V3: 3);
                default 0.
            shared_experts (int | Unset): Shared experts every token also passes through (DeepSeek, Qwen-MoE); default 0.
    """

    experts: int
    experts_per_token: int
    capacity_factor: float | None | Unset = UNSET
    dense_ffn: int | None | Unset = UNSET
    dense_layers: int | Unset = UNSET
    shared_experts: int | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        experts = self.experts

        experts_per_token = self.experts_per_token

        capacity_factor: float | None | Unset
        if isinstance(self.capacity_factor, Unset):
            capacity_factor = UNSET
        else:
            capacity_factor = self.capacity_factor

        dense_ffn: int | None | Unset
        if isinstance(self.dense_ffn, Unset):
            dense_ffn = UNSET
        else:
            dense_ffn = self.dense_ffn

        dense_layers = self.dense_layers

        shared_experts = self.shared_experts

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "experts": experts,
                "experts_per_token": experts_per_token,
            }
        )
        if capacity_factor is not UNSET:
            field_dict["capacity_factor"] = capacity_factor
        if dense_ffn is not UNSET:
            field_dict["dense_ffn"] = dense_ffn
        if dense_layers is not UNSET:
            field_dict["dense_layers"] = dense_layers
        if shared_experts is not UNSET:
            field_dict["shared_experts"] = shared_experts

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        experts = d.pop("experts")

        experts_per_token = d.pop("experts_per_token")

        def _parse_capacity_factor(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        capacity_factor = _parse_capacity_factor(d.pop("capacity_factor", UNSET))

        def _parse_dense_ffn(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        dense_ffn = _parse_dense_ffn(d.pop("dense_ffn", UNSET))

        dense_layers = d.pop("dense_layers", UNSET)

        shared_experts = d.pop("shared_experts", UNSET)

        moe_spec = cls(
            experts=experts,
            experts_per_token=experts_per_token,
            capacity_factor=capacity_factor,
            dense_ffn=dense_ffn,
            dense_layers=dense_layers,
            shared_experts=shared_experts,
        )

        return moe_spec
