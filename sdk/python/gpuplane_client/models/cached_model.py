from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="CachedModel")


@_attrs_define
class CachedModel:
    """A model in a pool's caches.

    Attributes:
        free_gpus (int): Free GPUs on those hosts now.
        hosts (int): Ready hosts of the pool whose cache holds it.
        largest_free_block (int): The most free GPUs on one of them: the largest one-host lease that gets the model from
            the cache now.
        model_id (str): Its hub id (`org/name`): a job loads it by this id from `HF_HOME` (`/models` in the lease).
    """

    free_gpus: int
    hosts: int
    largest_free_block: int
    model_id: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        free_gpus = self.free_gpus

        hosts = self.hosts

        largest_free_block = self.largest_free_block

        model_id = self.model_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "free_gpus": free_gpus,
                "hosts": hosts,
                "largest_free_block": largest_free_block,
                "model_id": model_id,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        free_gpus = d.pop("free_gpus")

        hosts = d.pop("hosts")

        largest_free_block = d.pop("largest_free_block")

        model_id = d.pop("model_id")

        cached_model = cls(
            free_gpus=free_gpus,
            hosts=hosts,
            largest_free_block=largest_free_block,
            model_id=model_id,
        )

        cached_model.additional_properties = d
        return cached_model

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
