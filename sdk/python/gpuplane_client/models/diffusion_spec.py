from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="DiffusionSpec")


@_attrs_define
class DiffusionSpec:
    """A diffusion model (e.g. Stable Diffusion XL): only inference is modelled, as data-parallel
    replicas producing images.

        Attributes:
            steps (int): Denoising steps per image (classifier-free guidance doubles the evaluations); a serving
                workload's `steps` overrides it.
            text_encoder_params (int): Text encoder (and VAE) parameters.
            tflops_per_step (float): Approximate TFLOPs of one denoiser evaluation for one image at the native resolution.
            unet_params (int): Denoiser (UNet / DiT) parameters.
            resolution (int | None | Unset): Side of the square image, pixels, that `tflops_per_step` is given for (default
                1024).
    """

    steps: int
    text_encoder_params: int
    tflops_per_step: float
    unet_params: int
    resolution: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        steps = self.steps

        text_encoder_params = self.text_encoder_params

        tflops_per_step = self.tflops_per_step

        unet_params = self.unet_params

        resolution: int | None | Unset
        if isinstance(self.resolution, Unset):
            resolution = UNSET
        else:
            resolution = self.resolution

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "steps": steps,
                "text_encoder_params": text_encoder_params,
                "tflops_per_step": tflops_per_step,
                "unet_params": unet_params,
            }
        )
        if resolution is not UNSET:
            field_dict["resolution"] = resolution

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        steps = d.pop("steps")

        text_encoder_params = d.pop("text_encoder_params")

        tflops_per_step = d.pop("tflops_per_step")

        unet_params = d.pop("unet_params")

        def _parse_resolution(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        resolution = _parse_resolution(d.pop("resolution", UNSET))

        diffusion_spec = cls(
            steps=steps,
            text_encoder_params=text_encoder_params,
            tflops_per_step=tflops_per_step,
            unet_params=unet_params,
            resolution=resolution,
        )

        return diffusion_spec
