from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="ServeRequest")


@_attrs_define
class ServeRequest:
    """`serve` on a job: its parts are replicas of a service that callers reach through the gateway.

    Example:
        {'health_path': '/v1/models', 'port': 8000, 'protocol': 'openai'}

    Attributes:
        port (int): The port the job's server listens on in the lease's namespace, 1024-65535; it must listen on every
            address
            (`0.0.0.0`), not only loopback. Also in the job's environment as `GPUPLANE_SERVE_PORT`.
        health_path (str | Unset): Probed with `GET` every second on each replica; a 2xx answer makes it ready (default
            `/health`). Starts with
            `/`, at most 200 characters, printable ASCII without spaces.
        protocol (str | Unset): `http` (default), or `openai` for an OpenAI-compatible server (vLLM, SGLang,
            `transformers serve`): the
            gateway then also counts the tokens its answers report.
        public (bool | Unset): Callable without a key (default false: callers need one of the service's keys).
        rate_limit_per_minute (int | None | Unset): Requests per minute per key (per client address when public),
            1-1000000; default unlimited.
    """

    port: int
    health_path: str | Unset = UNSET
    protocol: str | Unset = UNSET
    public: bool | Unset = UNSET
    rate_limit_per_minute: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        port = self.port

        health_path = self.health_path

        protocol = self.protocol

        public = self.public

        rate_limit_per_minute: int | None | Unset
        if isinstance(self.rate_limit_per_minute, Unset):
            rate_limit_per_minute = UNSET
        else:
            rate_limit_per_minute = self.rate_limit_per_minute

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "port": port,
            }
        )
        if health_path is not UNSET:
            field_dict["health_path"] = health_path
        if protocol is not UNSET:
            field_dict["protocol"] = protocol
        if public is not UNSET:
            field_dict["public"] = public
        if rate_limit_per_minute is not UNSET:
            field_dict["rate_limit_per_minute"] = rate_limit_per_minute

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        port = d.pop("port")

        health_path = d.pop("health_path", UNSET)

        protocol = d.pop("protocol", UNSET)

        public = d.pop("public", UNSET)

        def _parse_rate_limit_per_minute(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        rate_limit_per_minute = _parse_rate_limit_per_minute(
            d.pop("rate_limit_per_minute", UNSET)
        )

        serve_request = cls(
            port=port,
            health_path=health_path,
            protocol=protocol,
            public=public,
            rate_limit_per_minute=rate_limit_per_minute,
        )

        return serve_request
