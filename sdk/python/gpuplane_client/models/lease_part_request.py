from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..models.placement import Placement
from ..types import UNSET, Unset

T = TypeVar("T", bound="LeasePartRequest")


@_attrs_define
class LeasePartRequest:
    """One part of a lease across pools: GPUs of one pool.

    Attributes:
        gpu_count (int): GPUs of this part, 1-4096 (all parts together: at most 4096).
        gpu_model (None | str | Unset): Any pool of this GPU model (the one with the most free GPUs).
        placement (Placement | Unset): How a lease's GPUs are laid over nodes.
        pool_id (None | Unset | UUID): The pool of this part. Give this or `gpu_model`, or both (then the pool must
            offer that model).
    """

    gpu_count: int
    gpu_model: None | str | Unset = UNSET
    placement: Placement | Unset = UNSET
    pool_id: None | Unset | UUID = UNSET

    def to_dict(self) -> dict[str, Any]:
        gpu_count = self.gpu_count

        gpu_model: None | str | Unset
        if isinstance(self.gpu_model, Unset):
            gpu_model = UNSET
        else:
            gpu_model = self.gpu_model

        placement: str | Unset = UNSET
        if not isinstance(self.placement, Unset):
            placement = self.placement.value

        pool_id: None | str | Unset
        if isinstance(self.pool_id, Unset):
            pool_id = UNSET
        elif isinstance(self.pool_id, UUID):
            pool_id = str(self.pool_id)
        else:
            pool_id = self.pool_id

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "gpu_count": gpu_count,
            }
        )
        if gpu_model is not UNSET:
            field_dict["gpu_model"] = gpu_model
        if placement is not UNSET:
            field_dict["placement"] = placement
        if pool_id is not UNSET:
            field_dict["pool_id"] = pool_id

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        gpu_count = d.pop("gpu_count")

        def _parse_gpu_model(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        gpu_model = _parse_gpu_model(d.pop("gpu_model", UNSET))

        _placement = d.pop("placement", UNSET)
        placement: Placement | Unset
        if isinstance(_placement, Unset):
            placement = UNSET
        else:
            placement = Placement(_placement)

        def _parse_pool_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                pool_id_type_0 = UUID(data)

                return pool_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        pool_id = _parse_pool_id(d.pop("pool_id", UNSET))

        lease_part_request = cls(
            gpu_count=gpu_count,
            gpu_model=gpu_model,
            placement=placement,
            pool_id=pool_id,
        )

        return lease_part_request
