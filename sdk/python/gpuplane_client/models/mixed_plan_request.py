from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.cluster_fields import ClusterFields
    from ..models.model_ref import ModelRef
    from ..models.workload_fields import WorkloadFields


T = TypeVar("T", bound="MixedPlanRequest")


@_attrs_define
class MixedPlanRequest:
    """A mixed-cluster planning request: the model and workload of a [`PlanRequest`], and the parts.

    Attributes:
        model (ModelRef): The model: exactly one of `preset`, `architecture` and `hf_config`.
        parts (list[ClusterFields]): One to [`MAX_PARTS`] parts, each one GPU model (`gpu` or `gpu_spec`), its GPU
            count,
            GPUs per node and node network, as a homogeneous request's `cluster`.
        workload (WorkloadFields): Workload fields as the API/CLI send them; defaults are filled by `resolve`.
        top_n (int | None | Unset): Plans to return (default 10, at most 1000).
    """

    model: ModelRef
    parts: list[ClusterFields]
    workload: WorkloadFields
    top_n: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        model = self.model.to_dict()

        parts = []
        for parts_item_data in self.parts:
            parts_item = parts_item_data.to_dict()
            parts.append(parts_item)

        workload = self.workload.to_dict()

        top_n: int | None | Unset
        if isinstance(self.top_n, Unset):
            top_n = UNSET
        else:
            top_n = self.top_n

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "model": model,
                "parts": parts,
                "workload": workload,
            }
        )
        if top_n is not UNSET:
            field_dict["top_n"] = top_n

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.cluster_fields import ClusterFields
        from ..models.model_ref import ModelRef
        from ..models.workload_fields import WorkloadFields

        d = dict(src_dict)
        model = ModelRef.from_dict(d.pop("model"))

        parts = []
        _parts = d.pop("parts")
        for parts_item_data in _parts:
            parts_item = ClusterFields.from_dict(parts_item_data)

            parts.append(parts_item)

        workload = WorkloadFields.from_dict(d.pop("workload"))

        def _parse_top_n(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        top_n = _parse_top_n(d.pop("top_n", UNSET))

        mixed_plan_request = cls(
            model=model,
            parts=parts,
            workload=workload,
            top_n=top_n,
        )

        return mixed_plan_request
