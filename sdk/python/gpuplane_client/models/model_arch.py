from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.diffusion_spec import DiffusionSpec
    from ..models.moe_spec import MoeSpec


T = TypeVar("T", bound="ModelArch")


@_attrs_define
class ModelArch:
    """A decoder-only transformer architecture (or a diffusion model, see `diffusion`).

    Parameter count: see [`ModelArch::param_count`].

        Attributes:
            ffn (int): FFN intermediate size. `ffn == 4 * hidden` means a GPT-style 2-matrix MLP, anything
                else a SwiGLU-style 3-matrix MLP.
            heads (int): Query heads.
            hidden (int):
            kv_heads (int): Key/value heads (grouped-query attention); equal to `heads` for classic MHA.
            layers (int):
            vocab (int):
            diffusion (DiffusionSpec | None | Unset):
            gated_mlp (bool | None | Unset): A gated MLP (SwiGLU/GeGLU: gate, up and down, 3 matrices) or not (2 matrices).
                Default:
                gated unless `ffn == 4 * hidden` (GPT's MLP).
            head_dim (int | None | Unset): Dimension of one attention head (default `hidden / heads`; Qwen3 and GPT-OSS use
                128 and
                64 with other hidden sizes).
            model_type (None | str | Unset): The Hugging Face `model_type` (from a `config.json`), when known: which decoder
                family it is.
            moe (MoeSpec | None | Unset):
            tied_embeddings (bool | Unset): The LM head shares the input embedding's weights (`tie_word_embeddings`): one
                `V*h` matrix
                is counted, except where a pipeline puts the embedding and the head on different stages
                (each holds a copy). Default false.
    """

    ffn: int
    heads: int
    hidden: int
    kv_heads: int
    layers: int
    vocab: int
    diffusion: DiffusionSpec | None | Unset = UNSET
    gated_mlp: bool | None | Unset = UNSET
    head_dim: int | None | Unset = UNSET
    model_type: None | str | Unset = UNSET
    moe: MoeSpec | None | Unset = UNSET
    tied_embeddings: bool | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.diffusion_spec import DiffusionSpec
        from ..models.moe_spec import MoeSpec

        ffn = self.ffn

        heads = self.heads

        hidden = self.hidden

        kv_heads = self.kv_heads

        layers = self.layers

        vocab = self.vocab

        diffusion: dict[str, Any] | None | Unset
        if isinstance(self.diffusion, Unset):
            diffusion = UNSET
        elif isinstance(self.diffusion, DiffusionSpec):
            diffusion = self.diffusion.to_dict()
        else:
            diffusion = self.diffusion

        gated_mlp: bool | None | Unset
        if isinstance(self.gated_mlp, Unset):
            gated_mlp = UNSET
        else:
            gated_mlp = self.gated_mlp

        head_dim: int | None | Unset
        if isinstance(self.head_dim, Unset):
            head_dim = UNSET
        else:
            head_dim = self.head_dim

        model_type: None | str | Unset
        if isinstance(self.model_type, Unset):
            model_type = UNSET
        else:
            model_type = self.model_type

        moe: dict[str, Any] | None | Unset
        if isinstance(self.moe, Unset):
            moe = UNSET
        elif isinstance(self.moe, MoeSpec):
            moe = self.moe.to_dict()
        else:
            moe = self.moe

        tied_embeddings = self.tied_embeddings

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "ffn": ffn,
                "heads": heads,
                "hidden": hidden,
                "kv_heads": kv_heads,
                "layers": layers,
                "vocab": vocab,
            }
        )
        if diffusion is not UNSET:
            field_dict["diffusion"] = diffusion
        if gated_mlp is not UNSET:
            field_dict["gated_mlp"] = gated_mlp
        if head_dim is not UNSET:
            field_dict["head_dim"] = head_dim
        if model_type is not UNSET:
            field_dict["model_type"] = model_type
        if moe is not UNSET:
            field_dict["moe"] = moe
        if tied_embeddings is not UNSET:
            field_dict["tied_embeddings"] = tied_embeddings

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.diffusion_spec import DiffusionSpec
        from ..models.moe_spec import MoeSpec

        d = dict(src_dict)
        ffn = d.pop("ffn")

        heads = d.pop("heads")

        hidden = d.pop("hidden")

        kv_heads = d.pop("kv_heads")

        layers = d.pop("layers")

        vocab = d.pop("vocab")

        def _parse_diffusion(data: object) -> DiffusionSpec | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                diffusion_type_0 = DiffusionSpec.from_dict(data)

                return diffusion_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(DiffusionSpec | None | Unset, data)

        diffusion = _parse_diffusion(d.pop("diffusion", UNSET))

        def _parse_gated_mlp(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        gated_mlp = _parse_gated_mlp(d.pop("gated_mlp", UNSET))

        def _parse_head_dim(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        head_dim = _parse_head_dim(d.pop("head_dim", UNSET))

        def _parse_model_type(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        model_type = _parse_model_type(d.pop("model_type", UNSET))

        def _parse_moe(data: object) -> MoeSpec | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                moe_type_0 = MoeSpec.from_dict(data)

                return moe_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(MoeSpec | None | Unset, data)

        moe = _parse_moe(d.pop("moe", UNSET))

        tied_embeddings = d.pop("tied_embeddings", UNSET)

        model_arch = cls(
            ffn=ffn,
            heads=heads,
            hidden=hidden,
            kv_heads=kv_heads,
            layers=layers,
            vocab=vocab,
            diffusion=diffusion,
            gated_mlp=gated_mlp,
            head_dim=head_dim,
            model_type=model_type,
            moe=moe,
            tied_embeddings=tied_embeddings,
        )

        return model_arch
