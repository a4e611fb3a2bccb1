from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.gpu_model import GpuModel


T = TypeVar("T", bound="Pool")


@_attrs_define
class Pool:
    """A pool with its GPU model's facts, its price and what is free in it now.

    Attributes:
        created_at (datetime.datetime):
        currency (str): ISO 4217 code, e.g. `USD`, `CNY`.
        free_gpus (int): GPUs a new lease could take now.
        gpu_model (GpuModel): A GPU model's datasheet facts (dense tensor throughput, no sparsity). Example:
            {'bf16_tflops': 989.0, 'fp8_tflops': 1979.0, 'gpu_link': 'nvlink4', 'gpu_link_gbps': 900, 'host_link': 'pcie5',
            'key': 'h100', 'memory_bandwidth_gbps': 3350, 'memory_bytes': 80000000000, 'name': 'H100 SXM'}.
        id (UUID):
        largest_free_block (int): The most free GPUs on any single node: the largest `single_node` lease possible now.
        name (str): Unique slug, e.g. `h100-us-east`.
        price_per_gpu_hour_minor (int): Price of one GPU for one hour, in minor units of `currency` (cents, fen).
        region (str):
        total_gpus (int): Every GPU in the pool, whatever its state.
        updated_at (datetime.datetime):
        min_cuda_version (None | str | Unset): This pool's minimum CUDA version, overriding the service's (absent: the
            service's applies).
        min_driver_version (None | str | Unset): This pool's minimum NVIDIA driver version, overriding the service's
            (absent: the service's applies).
    """

    created_at: datetime.datetime
    currency: str
    free_gpus: int
    gpu_model: GpuModel
    id: UUID
    largest_free_block: int
    name: str
    price_per_gpu_hour_minor: int
    region: str
    total_gpus: int
    updated_at: datetime.datetime
    min_cuda_version: None | str | Unset = UNSET
    min_driver_version: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at = self.created_at.isoformat()

        currency = self.currency

        free_gpus = self.free_gpus

        gpu_model = self.gpu_model.to_dict()

        id = str(self.id)

        largest_free_block = self.largest_free_block

        name = self.name

        price_per_gpu_hour_minor = self.price_per_gpu_hour_minor

        region = self.region

        total_gpus = self.total_gpus

        updated_at = self.updated_at.isoformat()

        min_cuda_version: None | str | Unset
        if isinstance(self.min_cuda_version, Unset):
            min_cuda_version = UNSET
        else:
            min_cuda_version = self.min_cuda_version

        min_driver_version: None | str | Unset
        if isinstance(self.min_driver_version, Unset):
            min_driver_version = UNSET
        else:
            min_driver_version = self.min_driver_version

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at": created_at,
                "currency": currency,
                "free_gpus": free_gpus,
                "gpu_model": gpu_model,
                "id": id,
                "largest_free_block": largest_free_block,
                "name": name,
                "price_per_gpu_hour_minor": price_per_gpu_hour_minor,
                "region": region,
                "total_gpus": total_gpus,
                "updated_at": updated_at,
            }
        )
        if min_cuda_version is not UNSET:
            field_dict["min_cuda_version"] = min_cuda_version
        if min_driver_version is not UNSET:
            field_dict["min_driver_version"] = min_driver_version

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.gpu_model import GpuModel

        d = dict(src_dict)
        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        currency = d.pop("currency")

        free_gpus = d.pop("free_gpus")

        gpu_model = GpuModel.from_dict(d.pop("gpu_model"))

        id = UUID(d.pop("id"))

        largest_free_block = d.pop("largest_free_block")

        name = d.pop("name")

        price_per_gpu_hour_minor = d.pop("price_per_gpu_hour_minor")

        region = d.pop("region")

        total_gpus = d.pop("total_gpus")

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        def _parse_min_cuda_version(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        min_cuda_version = _parse_min_cuda_version(d.pop("min_cuda_version", UNSET))

        def _parse_min_driver_version(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        min_driver_version = _parse_min_driver_version(
            d.pop("min_driver_version", UNSET)
        )

        pool = cls(
            created_at=created_at,
            currency=currency,
            free_gpus=free_gpus,
            gpu_model=gpu_model,
            id=id,
            largest_free_block=largest_free_block,
            name=name,
            price_per_gpu_hour_minor=price_per_gpu_hour_minor,
            region=region,
            total_gpus=total_gpus,
            updated_at=updated_at,
            min_cuda_version=min_cuda_version,
            min_driver_version=min_driver_version,
        )

        pool.additional_properties = d
        return pool

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
