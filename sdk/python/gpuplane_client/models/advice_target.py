from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="AdviceTarget")


@_attrs_define
class AdviceTarget:
    """What has to be done: training tokens, or a serving load.

    Attributes:
        requests_per_s (float | None | Unset): Inference: requests/s to sustain, each generating `tokens_per_request`
            tokens.
        serving_hours (float | None | Unset): Inference: hours the serving runs, for the cost (default 1).
        serving_tokens_per_s (float | None | Unset): Inference: generated tokens/s to sustain (or use `requests_per_s`).
        tokens_per_request (int | None | Unset): Default 256.
        training_tokens (int | None | Unset): Train/LoRA: total tokens to process.
    """

    requests_per_s: float | None | Unset = UNSET
    serving_hours: float | None | Unset = UNSET
    serving_tokens_per_s: float | None | Unset = UNSET
    tokens_per_request: int | None | Unset = UNSET
    training_tokens: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        requests_per_s: float | None | Unset
        if isinstance(self.requests_per_s, Unset):
            requests_per_s = UNSET
        else:
            requests_per_s = self.requests_per_s

        serving_hours: float | None | Unset
        if isinstance(self.serving_hours, Unset):
            serving_hours = UNSET
        else:
            serving_hours = self.serving_hours

        serving_tokens_per_s: float | None | Unset
        if isinstance(self.serving_tokens_per_s, Unset):
            serving_tokens_per_s = UNSET
        else:
            serving_tokens_per_s = self.serving_tokens_per_s

        tokens_per_request: int | None | Unset
        if isinstance(self.tokens_per_request, Unset):
            tokens_per_request = UNSET
        else:
            tokens_per_request = self.tokens_per_request

        training_tokens: int | None | Unset
        if isinstance(self.training_tokens, Unset):
            training_tokens = UNSET
        else:
            training_tokens = self.training_tokens

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if requests_per_s is not UNSET:
            field_dict["requests_per_s"] = requests_per_s
        if serving_hours is not UNSET:
            field_dict["serving_hours"] = serving_hours
        if serving_tokens_per_s is not UNSET:
            field_dict["serving_tokens_per_s"] = serving_tokens_per_s
        if tokens_per_request is not UNSET:
            field_dict["tokens_per_request"] = tokens_per_request
        if training_tokens is not UNSET:
            field_dict["training_tokens"] = training_tokens

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_requests_per_s(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        requests_per_s = _parse_requests_per_s(d.pop("requests_per_s", UNSET))

        def _parse_serving_hours(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        serving_hours = _parse_serving_hours(d.pop("serving_hours", UNSET))

        def _parse_serving_tokens_per_s(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        serving_tokens_per_s = _parse_serving_tokens_per_s(
            d.pop("serving_tokens_per_s", UNSET)
        )

        def _parse_tokens_per_request(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        tokens_per_request = _parse_tokens_per_request(
            d.pop("tokens_per_request", UNSET)
        )

        def _parse_training_tokens(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        training_tokens = _parse_training_tokens(d.pop("training_tokens", UNSET))

        advice_target = cls(
            requests_per_s=requests_per_s,
            serving_hours=serving_hours,
            serving_tokens_per_s=serving_tokens_per_s,
            tokens_per_request=tokens_per_request,
            training_tokens=training_tokens,
        )

        return advice_target
