from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="CreatePoolRequest")


@_attrs_define
class CreatePoolRequest:
    """
    Example:
        {'currency': 'USD', 'gpu_model': 'h100', 'name': 'h100-us-east', 'price_per_gpu_hour_minor': 249, 'region': 'us-
            east'}

    Attributes:
        currency (str):
        gpu_model (str): GPU model key from the catalog.
        name (str):
        price_per_gpu_hour_minor (int):
        region (str):
    """

    currency: str
    gpu_model: str
    name: str
    price_per_gpu_hour_minor: int
    region: str

    def to_dict(self) -> dict[str, Any]:
        currency = self.currency

        gpu_model = self.gpu_model

        name = self.name

        price_per_gpu_hour_minor = self.price_per_gpu_hour_minor

        region = self.region

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "currency": currency,
                "gpu_model": gpu_model,
                "name": name,
                "price_per_gpu_hour_minor": price_per_gpu_hour_minor,
                "region": region,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        currency = d.pop("currency")

        gpu_model = d.pop("gpu_model")

        name = d.pop("name")

        price_per_gpu_hour_minor = d.pop("price_per_gpu_hour_minor")

        region = d.pop("region")

        create_pool_request = cls(
            currency=currency,
            gpu_model=gpu_model,
            name=name,
            price_per_gpu_hour_minor=price_per_gpu_hour_minor,
            region=region,
        )

        return create_pool_request
