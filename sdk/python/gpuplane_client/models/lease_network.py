from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.insight import Insight
    from ..models.pair_latency import PairLatency


T = TypeVar("T", bound="LeaseNetwork")


@_attrs_define
class LeaseNetwork:
    """A lease's network: round trips between its nodes and what they mean.

    Attributes:
        insights (list[Insight]): `comm_latency_high` when the worst p99 is over the threshold, with the numbers and
            what to change.
        lease_id (UUID):
        pairs (list[PairLatency]): The latest measurement of each ordered pair of the lease's nodes (empty for a single-
            node lease).
        threshold_ms (float): p99 above which `comm.latency_high` is raised, milliseconds.
        alert_raised_at (datetime.datetime | None | Unset): Since when the `comm.latency_high` alert has been open
            (absent when it is not).
    """

    insights: list[Insight]
    lease_id: UUID
    pairs: list[PairLatency]
    threshold_ms: float
    alert_raised_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        insights = []
        for insights_item_data in self.insights:
            insights_item = insights_item_data.to_dict()
            insights.append(insights_item)

        lease_id = str(self.lease_id)

        pairs = []
        for pairs_item_data in self.pairs:
            pairs_item = pairs_item_data.to_dict()
            pairs.append(pairs_item)

        threshold_ms = self.threshold_ms

        alert_raised_at: None | str | Unset
        if isinstance(self.alert_raised_at, Unset):
            alert_raised_at = UNSET
        elif isinstance(self.alert_raised_at, datetime.datetime):
            alert_raised_at = self.alert_raised_at.isoformat()
        else:
            alert_raised_at = self.alert_raised_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "insights": insights,
                "lease_id": lease_id,
                "pairs": pairs,
                "threshold_ms": threshold_ms,
            }
        )
        if alert_raised_at is not UNSET:
            field_dict["alert_raised_at"] = alert_raised_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.insight import Insight
        from ..models.pair_latency import PairLatency

        d = dict(src_dict)
        insights = []
        _insights = d.pop("insights")
        for insights_item_data in _insights:
            insights_item = Insight.from_dict(insights_item_data)

            insights.append(insights_item)

        lease_id = UUID(d.pop("lease_id"))

        pairs = []
        _pairs = d.pop("pairs")
        for pairs_item_data in _pairs:
            pairs_item = PairLatency.from_dict(pairs_item_data)

            pairs.append(pairs_item)

        threshold_ms = d.pop("threshold_ms")

        def _parse_alert_raised_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                alert_raised_at_type_0 = datetime.datetime.fromisoformat(data)

                return alert_raised_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        alert_raised_at = _parse_alert_raised_at(d.pop("alert_raised_at", UNSET))

        lease_network = cls(
            insights=insights,
            lease_id=lease_id,
            pairs=pairs,
            threshold_ms=threshold_ms,
            alert_raised_at=alert_raised_at,
        )

        lease_network.additional_properties = d
        return lease_network

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
