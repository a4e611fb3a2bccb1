from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.insight_figures import InsightFigures


T = TypeVar("T", bound="Insight")


@_attrs_define
class Insight:
    """One finding, with the change suggested and the numbers behind it.

    Attributes:
        figures (InsightFigures): The figures behind it (measured utilization, samples, window, plan figures).
        kind (str): `low_utilization`, `slower_than_plan`, `communication_bound`, `tensor_parallel_over_pcie`,
            `tensor_parallel_across_nodes` or `replan_suggested`.
        message (str):
        suggestion (str):
    """

    figures: InsightFigures
    kind: str
    message: str
    suggestion: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        figures = self.figures.to_dict()

        kind = self.kind

        message = self.message

        suggestion = self.suggestion

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "figures": figures,
                "kind": kind,
                "message": message,
                "suggestion": suggestion,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.insight_figures import InsightFigures

        d = dict(src_dict)
        figures = InsightFigures.from_dict(d.pop("figures"))

        kind = d.pop("kind")

        message = d.pop("message")

        suggestion = d.pop("suggestion")

        insight = cls(
            figures=figures,
            kind=kind,
            message=message,
            suggestion=suggestion,
        )

        insight.additional_properties = d
        return insight

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
