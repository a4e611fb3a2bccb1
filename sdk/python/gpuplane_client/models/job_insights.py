from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.insight import Insight


T = TypeVar("T", bound="JobInsights")


@_attrs_define
class JobInsights:
    """The insights last evaluated for a job, and when.

    Attributes:
        at (datetime.datetime):
        insights (list[Insight]): Findings with the suggested change and the numbers behind each; empty when all was
            well.
    """

    at: datetime.datetime
    insights: list[Insight]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        at = self.at.isoformat()

        insights = []
        for insights_item_data in self.insights:
            insights_item = insights_item_data.to_dict()
            insights.append(insights_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "at": at,
                "insights": insights,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.insight import Insight

        d = dict(src_dict)
        at = datetime.datetime.fromisoformat(d.pop("at"))

        insights = []
        _insights = d.pop("insights")
        for insights_item_data in _insights:
            insights_item = Insight.from_dict(insights_item_data)

            insights.append(insights_item)

        job_insights = cls(
            at=at,
            insights=insights,
        )

        job_insights.additional_properties = d
        return job_insights

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
