from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="NodeLease")


@_attrs_define
class NodeLease:
    """A lease's part of one node.

    Attributes:
        gpu_indices (list[int]): The node's GPU indices the lease holds, ascending.
        lease_id (UUID):
    """

    gpu_indices: list[int]
    lease_id: UUID
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        gpu_indices = self.gpu_indices

        lease_id = str(self.lease_id)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "gpu_indices": gpu_indices,
                "lease_id": lease_id,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        gpu_indices = cast(list[int], d.pop("gpu_indices"))

        lease_id = UUID(d.pop("lease_id"))

        node_lease = cls(
            gpu_indices=gpu_indices,
            lease_id=lease_id,
        )

        node_lease.additional_properties = d
        return node_lease

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
