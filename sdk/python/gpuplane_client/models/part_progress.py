from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.progress import Progress


T = TypeVar("T", bound="PartProgress")


@_attrs_define
class PartProgress:
    """A part's progress as its agent reports it with the heartbeat.

    Attributes:
        job_node_id (UUID):
        progress (Progress): How far a job's part is through its work, as it says in [`PROGRESS_FILE`].
    """

    job_node_id: UUID
    progress: Progress

    def to_dict(self) -> dict[str, Any]:
        job_node_id = str(self.job_node_id)

        progress = self.progress.to_dict()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "job_node_id": job_node_id,
                "progress": progress,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.progress import Progress

        d = dict(src_dict)
        job_node_id = UUID(d.pop("job_node_id"))

        progress = Progress.from_dict(d.pop("progress"))

        part_progress = cls(
            job_node_id=job_node_id,
            progress=progress,
        )

        return part_progress
