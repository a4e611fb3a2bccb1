from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="RequestStats")


@_attrs_define
class RequestStats:
    """A service's requests over a window, as `GET /v1/services/{id}` shows them.

    Attributes:
        errors (int): Answers 5xx: the replicas', or the gateway's (no replica ready, none reachable, one failed
            answering).
        minutes (int): The window, minutes (the last ones, the current one included).
        output_tokens (int): Tokens the answers of an OpenAI-compatible service reported.
        output_tokens_per_s (float):
        refused (int): Refused for the key or the rate limit (401, 429).
        requests (int):
        requests_per_s (float):
        p50_ms (float | None | Unset): Time to the end of the answer, milliseconds: the upper edge of the histogram
            bucket the median (99th
            percentile) falls in; absent without requests.
        p99_ms (float | None | Unset):
    """

    errors: int
    minutes: int
    output_tokens: int
    output_tokens_per_s: float
    refused: int
    requests: int
    requests_per_s: float
    p50_ms: float | None | Unset = UNSET
    p99_ms: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        errors = self.errors

        minutes = self.minutes

        output_tokens = self.output_tokens

        output_tokens_per_s = self.output_tokens_per_s

        refused = self.refused

        requests = self.requests

        requests_per_s = self.requests_per_s

        p50_ms: float | None | Unset
        if isinstance(self.p50_ms, Unset):
            p50_ms = UNSET
        else:
            p50_ms = self.p50_ms

        p99_ms: float | None | Unset
        if isinstance(self.p99_ms, Unset):
            p99_ms = UNSET
        else:
            p99_ms = self.p99_ms

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "errors": errors,
                "minutes": minutes,
                "output_tokens": output_tokens,
                "output_tokens_per_s": output_tokens_per_s,
                "refused": refused,
                "requests": requests,
                "requests_per_s": requests_per_s,
            }
        )
        if p50_ms is not UNSET:
            field_dict["p50_ms"] = p50_ms
        if p99_ms is not UNSET:
            field_dict["p99_ms"] = p99_ms

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        errors = d.pop("errors")

        minutes = d.pop("minutes")

        output_tokens = d.pop("output_tokens")

        output_tokens_per_s = d.pop("output_tokens_per_s")

        refused = d.pop("refused")

        requests = d.pop("requests")

        requests_per_s = d.pop("requests_per_s")

        def _parse_p50_ms(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        p50_ms = _parse_p50_ms(d.pop("p50_ms", UNSET))

        def _parse_p99_ms(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        p99_ms = _parse_p99_ms(d.pop("p99_ms", UNSET))

        request_stats = cls(
            errors=errors,
            minutes=minutes,
            output_tokens=output_tokens,
            output_tokens_per_s=output_tokens_per_s,
            refused=refused,
            requests=requests,
            requests_per_s=requests_per_s,
            p50_ms=p50_ms,
            p99_ms=p99_ms,
        )

        request_stats.additional_properties = d
        return request_stats

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
