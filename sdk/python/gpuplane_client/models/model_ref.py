from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.hf_config import HfConfig
    from ..models.model_arch import ModelArch


T = TypeVar("T", bound="ModelRef")


@_attrs_define
class ModelRef:
    """The model: exactly one of `preset`, `architecture` and `hf_config`.

    Attributes:
        architecture (ModelArch | None | Unset):
        hf_config (HfConfig | None | Unset):
        preset (None | str | Unset):
    """

    architecture: ModelArch | None | Unset = UNSET
    hf_config: HfConfig | None | Unset = UNSET
    preset: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.hf_config import HfConfig
        from ..models.model_arch import ModelArch

        architecture: dict[str, Any] | None | Unset
        if isinstance(self.architecture, Unset):
            architecture = UNSET
        elif isinstance(self.architecture, ModelArch):
            architecture = self.architecture.to_dict()
        else:
            architecture = self.architecture

        hf_config: dict[str, Any] | None | Unset
        if isinstance(self.hf_config, Unset):
            hf_config = UNSET
        elif isinstance(self.hf_config, HfConfig):
            hf_config = self.hf_config.to_dict()
        else:
            hf_config = self.hf_config

        preset: None | str | Unset
        if isinstance(self.preset, Unset):
            preset = UNSET
        else:
            preset = self.preset

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if architecture is not UNSET:
            field_dict["architecture"] = architecture
        if hf_config is not UNSET:
            field_dict["hf_config"] = hf_config
        if preset is not UNSET:
            field_dict["preset"] = preset

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.hf_config import HfConfig
        from ..models.model_arch import ModelArch

        d = dict(src_dict)

        def _parse_architecture(data: object) -> ModelArch | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                architecture_type_0 = ModelArch.from_dict(data)

                return architecture_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ModelArch | None | Unset, data)

        architecture = _parse_architecture(d.pop("architecture", UNSET))

        def _parse_hf_config(data: object) -> HfConfig | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                hf_config_type_0 = HfConfig.from_dict(data)

                return hf_config_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(HfConfig | None | Unset, data)

        hf_config = _parse_hf_config(d.pop("hf_config", UNSET))

        def _parse_preset(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        preset = _parse_preset(d.pop("preset", UNSET))

        model_ref = cls(
            architecture=architecture,
            hf_config=hf_config,
            preset=preset,
        )

        return model_ref
