from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="DiffusionSpec")


@_attrs_define
class DiffusionSpec:
    """A diffusion model (e.g. Stable Diffusion XL): only inference is modelled, as data-parallel
    replicas producing images.

        Attributes:
            steps (int): Denoising steps per image (classifier-free guidance doubles the evaluations).
            text_encoder_params (int): Text encoder (and VAE) parameters.
            tflops_per_step (float): Approximate TFLOPs of one denoiser evaluation for one image at the native resolution.
            unet_params (int): Denoiser (UNet / DiT) parameters.
    """

    steps: int
    text_encoder_params: int
    tflops_per_step: float
    unet_params: int

    def to_dict(self) -> dict[str, Any]:
        steps = self.steps

        text_encoder_params = self.text_encoder_params

        tflops_per_step = self.tflops_per_step

        unet_params = self.unet_params

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "steps": steps,
                "text_encoder_params": text_encoder_params,
                "tflops_per_step": tflops_per_step,
                "unet_params": unet_params,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        steps = d.pop("steps")

        text_encoder_params = d.pop("text_encoder_params")

        tflops_per_step = d.pop("tflops_per_step")

        unet_params = d.pop("unet_params")

        diffusion_spec = cls(
            steps=steps,
            text_encoder_params=text_encoder_params,
            tflops_per_step=tflops_per_step,
            unet_params=unet_params,
        )

        return diffusion_spec
