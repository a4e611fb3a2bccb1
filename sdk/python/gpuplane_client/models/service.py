from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.request_stats import RequestStats


T = TypeVar("T", bound="Service")


@_attrs_define
class Service:
    """A service: where callers reach it and who may.

    Attributes:
        created_at (datetime.datetime):
        health_path (str):
        id (UUID):
        job_id (UUID):
        job_state (str): The job's state (the service answers while it runs).
        lease_id (UUID):
        port (int):
        protocol (str): `http`, or `openai` (an OpenAI-compatible server: the gateway also counts the tokens it
            returns).
        public (bool): Callable without a key.
        ready_replicas (int): The job's parts that run and answered their health path last.
        replicas (int): The job's parts that run (or are starting).
        updated_at (datetime.datetime):
        url (str): The gateway's address of the service: a request to `{url}/PATH` reaches `/PATH` on a ready replica.
        rate_limit_per_minute (int | None | Unset): Requests per minute per key (per client address when public); null:
            unlimited.
        last_hour (None | RequestStats | Unset):
    """

    created_at: datetime.datetime
    health_path: str
    id: UUID
    job_id: UUID
    job_state: str
    lease_id: UUID
    port: int
    protocol: str
    public: bool
    ready_replicas: int
    replicas: int
    updated_at: datetime.datetime
    url: str
    rate_limit_per_minute: int | None | Unset = UNSET
    last_hour: None | RequestStats | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.request_stats import RequestStats

        created_at = self.created_at.isoformat()

        health_path = self.health_path

        id = str(self.id)

        job_id = str(self.job_id)

        job_state = self.job_state

        lease_id = str(self.lease_id)

        port = self.port

        protocol = self.protocol

        public = self.public

        ready_replicas = self.ready_replicas

        replicas = self.replicas

        updated_at = self.updated_at.isoformat()

        url = self.url

        rate_limit_per_minute: int | None | Unset
        if isinstance(self.rate_limit_per_minute, Unset):
            rate_limit_per_minute = UNSET
        else:
            rate_limit_per_minute = self.rate_limit_per_minute

        last_hour: dict[str, Any] | None | Unset
        if isinstance(self.last_hour, Unset):
            last_hour = UNSET
        elif isinstance(self.last_hour, RequestStats):
            last_hour = self.last_hour.to_dict()
        else:
            last_hour = self.last_hour

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at": created_at,
                "health_path": health_path,
                "id": id,
                "job_id": job_id,
                "job_state": job_state,
                "lease_id": lease_id,
                "port": port,
                "protocol": protocol,
                "public": public,
                "ready_replicas": ready_replicas,
                "replicas": replicas,
                "updated_at": updated_at,
                "url": url,
            }
        )
        if rate_limit_per_minute is not UNSET:
            field_dict["rate_limit_per_minute"] = rate_limit_per_minute
        if last_hour is not UNSET:
            field_dict["last_hour"] = last_hour

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.request_stats import RequestStats

        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        health_path = d.pop("health_path")

        id = UUID(d.pop("id"))

        job_id = UUID(d.pop("job_id"))

        job_state = d.pop("job_state")

        lease_id = UUID(d.pop("lease_id"))

        port = d.pop("port")

        protocol = d.pop("protocol")

        public = d.pop("public")

        ready_replicas = d.pop("ready_replicas")

        replicas = d.pop("replicas")

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        url = d.pop("url")

        def _parse_rate_limit_per_minute(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        rate_limit_per_minute = _parse_rate_limit_per_minute(
            d.pop("rate_limit_per_minute", UNSET)
        )

        def _parse_last_hour(data: object) -> None | RequestStats | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                last_hour_type_0 = RequestStats.from_dict(data)

                return last_hour_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RequestStats | Unset, data)

        last_hour = _parse_last_hour(d.pop("last_hour", UNSET))

        service = cls(
            created_at=created_at,
            health_path=health_path,
            id=id,
            job_id=job_id,
            job_state=job_state,
            lease_id=lease_id,
            port=port,
            protocol=protocol,
            public=public,
            ready_replicas=ready_replicas,
            replicas=replicas,
            updated_at=updated_at,
            url=url,
            rate_limit_per_minute=rate_limit_per_minute,
            last_hour=last_hour,
        )

        service.additional_properties = d
        return service

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
