from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="UpdatePoolRequest")


@_attrs_define
class UpdatePoolRequest:
    """
    Example:
        {'price_per_gpu_hour_minor': 229}

    Attributes:
        currency (None | str | Unset):
        min_cuda_version (None | str | Unset): Minimum CUDA version for this pool's nodes, e.g. `12.2`; `null` returns
            to the service's
            (`--min-cuda-version`).
        min_driver_version (None | str | Unset): Minimum NVIDIA driver version for this pool's nodes, e.g. `535.104.05`;
            `null` returns to the service's
            (`--min-driver-version`). Nodes below it become `not_ready` at once.
        name (None | str | Unset):
        price_per_gpu_hour_minor (int | None | Unset):
        region (None | str | Unset):
    """

    currency: None | str | Unset = UNSET
    min_cuda_version: None | str | Unset = UNSET
    min_driver_version: None | str | Unset = UNSET
    name: None | str | Unset = UNSET
    price_per_gpu_hour_minor: int | None | Unset = UNSET
    region: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        currency: None | str | Unset
        if isinstance(self.currency, Unset):
            currency = UNSET
        else:
            currency = self.currency

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

        name: None | str | Unset
        if isinstance(self.name, Unset):
            name = UNSET
        else:
            name = self.name

        price_per_gpu_hour_minor: int | None | Unset
        if isinstance(self.price_per_gpu_hour_minor, Unset):
            price_per_gpu_hour_minor = UNSET
        else:
            price_per_gpu_hour_minor = self.price_per_gpu_hour_minor

        region: None | str | Unset
        if isinstance(self.region, Unset):
            region = UNSET
        else:
            region = self.region

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if currency is not UNSET:
            field_dict["currency"] = currency
        if min_cuda_version is not UNSET:
            field_dict["min_cuda_version"] = min_cuda_version
        if min_driver_version is not UNSET:
            field_dict["min_driver_version"] = min_driver_version
        if name is not UNSET:
            field_dict["name"] = name
        if price_per_gpu_hour_minor is not UNSET:
            field_dict["price_per_gpu_hour_minor"] = price_per_gpu_hour_minor
        if region is not UNSET:
            field_dict["region"] = region

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_currency(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        currency = _parse_currency(d.pop("currency", UNSET))

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

        def _parse_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        name = _parse_name(d.pop("name", UNSET))

        def _parse_price_per_gpu_hour_minor(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        price_per_gpu_hour_minor = _parse_price_per_gpu_hour_minor(
            d.pop("price_per_gpu_hour_minor", UNSET)
        )

        def _parse_region(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        region = _parse_region(d.pop("region", UNSET))

        update_pool_request = cls(
            currency=currency,
            min_cuda_version=min_cuda_version,
            min_driver_version=min_driver_version,
            name=name,
            price_per_gpu_hour_minor=price_per_gpu_hour_minor,
            region=region,
        )

        return update_pool_request
