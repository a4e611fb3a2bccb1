from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="PartProgress")


@_attrs_define
class PartProgress:
    """A part's progress as its agent reports it with the heartbeat.

    Attributes:
        done (int):
        total (int):
        job_node_id (UUID):
    """

    done: int
    total: int
    job_node_id: UUID
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        done = self.done

        total = self.total

        job_node_id = str(self.job_node_id)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "done": done,
                "total": total,
                "job_node_id": job_node_id,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        done = d.pop("done")

        total = d.pop("total")

        job_node_id = UUID(d.pop("job_node_id"))

        part_progress = cls(
            done=done,
            total=total,
            job_node_id=job_node_id,
        )

        part_progress.additional_properties = d
        return part_progress

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
