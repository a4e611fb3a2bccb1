from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="SkippedPool")


@_attrs_define
class SkippedPool:
    """A pool with no option shown, and why: nothing of it fits, its GPUs cannot run the precision,
    or every option of it is beaten on the cost/time frontier (the reason names the option that
    beats it).

        Attributes:
            pool_id (str):
            reason (str):
    """

    pool_id: str
    reason: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        pool_id = self.pool_id

        reason = self.reason

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "pool_id": pool_id,
                "reason": reason,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        pool_id = d.pop("pool_id")

        reason = d.pop("reason")

        skipped_pool = cls(
            pool_id=pool_id,
            reason=reason,
        )

        skipped_pool.additional_properties = d
        return skipped_pool

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
