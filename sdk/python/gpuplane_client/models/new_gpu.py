from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="NewGpu")


@_attrs_define
class NewGpu:
    """
    Attributes:
        index (int):
        uuid (str):
    """

    index: int
    uuid: str

    def to_dict(self) -> dict[str, Any]:
        index = self.index

        uuid = self.uuid

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "index": index,
                "uuid": uuid,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        index = d.pop("index")

        uuid = d.pop("uuid")

        new_gpu = cls(
            index=index,
            uuid=uuid,
        )

        return new_gpu
