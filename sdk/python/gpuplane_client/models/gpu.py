from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="Gpu")


@_attrs_define
class Gpu:
    """
    Attributes:
        healthy (bool): False after a fatal XID until an operator returns it to service.
        id (UUID):
        index (int): Index on the node (as CUDA_VISIBLE_DEVICES counts).
        uuid (str): The GPU's UUID as NVML reports it, e.g. `GPU-5a1c...`.
    """

    healthy: bool
    id: UUID
    index: int
    uuid: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        healthy = self.healthy

        id = str(self.id)

        index = self.index

        uuid = self.uuid

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "healthy": healthy,
                "id": id,
                "index": index,
                "uuid": uuid,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        healthy = d.pop("healthy")

        id = UUID(d.pop("id"))

        index = d.pop("index")

        uuid = d.pop("uuid")

        gpu = cls(
            healthy=healthy,
            id=id,
            index=index,
            uuid=uuid,
        )

        gpu.additional_properties = d
        return gpu

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
