from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.cluster_fields import ClusterFields
    from ..models.model_ref import ModelRef
    from ..models.pins import Pins
    from ..models.workload_fields import WorkloadFields


T = TypeVar("T", bound="PlanRequest")


@_attrs_define
class PlanRequest:
    """A planning request as the HTTP API and CLI deserialize it.

    Attributes:
        cluster (ClusterFields): Cluster fields: a catalog key (`gpu`) or a full `gpu_spec`.
        model (ModelRef): The model: exactly one of `preset`, `architecture` and `hf_config`.
        workload (WorkloadFields): Workload fields as the API/CLI send them; defaults are filled by `resolve`.
        pins (Pins | Unset): Optional pins: a `Some` fixes that knob, `None` lets the search choose.
        top_n (int | None | Unset): Plans to return (default 10, at most 1000).
    """

    cluster: ClusterFields
    model: ModelRef
    workload: WorkloadFields
    pins: Pins | Unset = UNSET
    top_n: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        cluster = self.cluster.to_dict()

        model = self.model.to_dict()

        workload = self.workload.to_dict()

        pins: dict[str, Any] | Unset = UNSET
        if not isinstance(self.pins, Unset):
            pins = self.pins.to_dict()

        top_n: int | None | Unset
        if isinstance(self.top_n, Unset):
            top_n = UNSET
        else:
            top_n = self.top_n

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "cluster": cluster,
                "model": model,
                "workload": workload,
            }
        )
        if pins is not UNSET:
            field_dict["pins"] = pins
        if top_n is not UNSET:
            field_dict["top_n"] = top_n

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.cluster_fields import ClusterFields
        from ..models.model_ref import ModelRef
        from ..models.pins import Pins
        from ..models.workload_fields import WorkloadFields

        d = dict(src_dict)
        cluster = ClusterFields.from_dict(d.pop("cluster"))

        model = ModelRef.from_dict(d.pop("model"))

        workload = WorkloadFields.from_dict(d.pop("workload"))

        _pins = d.pop("pins", UNSET)
        pins: Pins | Unset
        if isinstance(_pins, Unset):
            pins = UNSET
        else:
            pins = Pins.from_dict(_pins)

        def _parse_top_n(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        top_n = _parse_top_n(d.pop("top_n", UNSET))

        plan_request = cls(
            cluster=cluster,
            model=model,
            workload=workload,
            pins=pins,
            top_n=top_n,
        )

        return plan_request
