from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="HfConfig")


@_attrs_define
class HfConfig:
    """The fields of a Hugging Face `config.json` the planner reads; the document's other fields are
    ignored (it is the checkpoint's file, sent as it is). A multimodal config's `text_config` is read
    when the top level has no decoder fields.

        Attributes:
            first_k_dense_replace (int | None | Unset): DeepSeek's first dense layers.
            head_dim (int | None | Unset):
            hidden_size (int | None | Unset):
            intermediate_size (int | None | Unset):
            model_type (None | str | Unset): The family (`llama`, `qwen3`, `gemma2`, `mixtral`, ...).
            moe_intermediate_size (int | None | Unset): FFN size of one expert (default `intermediate_size`).
            n_routed_experts (int | None | Unset):
            n_shared_experts (int | None | Unset): DeepSeek's shared experts.
            num_attention_heads (int | None | Unset):
            num_experts (int | None | Unset):
            num_experts_per_tok (int | None | Unset):
            num_hidden_layers (int | None | Unset):
            num_key_value_heads (int | None | Unset): Default: `num_attention_heads`.
            num_local_experts (int | None | Unset): Routed experts (Mixtral's name; Qwen-MoE's `num_experts`, DeepSeek's
                `n_routed_experts`).
            shared_expert_intermediate_size (int | None | Unset): Qwen-MoE's shared expert, as an FFN size.
            text_config (HfConfig | None | Unset):
            tie_word_embeddings (bool | None | Unset): Default: true for the Gemma families, false otherwise (as their
                transformers configs).
            vocab_size (int | None | Unset):
    """

    first_k_dense_replace: int | None | Unset = UNSET
    head_dim: int | None | Unset = UNSET
    hidden_size: int | None | Unset = UNSET
    intermediate_size: int | None | Unset = UNSET
    model_type: None | str | Unset = UNSET
    moe_intermediate_size: int | None | Unset = UNSET
    n_routed_experts: int | None | Unset = UNSET
    n_shared_experts: int | None | Unset = UNSET
    num_attention_heads: int | None | Unset = UNSET
    num_experts: int | None | Unset = UNSET
    num_experts_per_tok: int | None | Unset = UNSET
    num_hidden_layers: int | None | Unset = UNSET
    num_key_value_heads: int | None | Unset = UNSET
    num_local_experts: int | None | Unset = UNSET
    shared_expert_intermediate_size: int | None | Unset = UNSET
    text_config: HfConfig | None | Unset = UNSET
    tie_word_embeddings: bool | None | Unset = UNSET
    vocab_size: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        first_k_dense_replace: int | None | Unset
        if isinstance(self.first_k_dense_replace, Unset):
            first_k_dense_replace = UNSET
        else:
            first_k_dense_replace = self.first_k_dense_replace

        head_dim: int | None | Unset
        if isinstance(self.head_dim, Unset):
            head_dim = UNSET
        else:
            head_dim = self.head_dim

        hidden_size: int | None | Unset
        if isinstance(self.hidden_size, Unset):
            hidden_size = UNSET
        else:
            hidden_size = self.hidden_size

        intermediate_size: int | None | Unset
        if isinstance(self.intermediate_size, Unset):
            intermediate_size = UNSET
        else:
            intermediate_size = self.intermediate_size

        model_type: None | str | Unset
        if isinstance(self.model_type, Unset):
            model_type = UNSET
        else:
            model_type = self.model_type

        moe_intermediate_size: int | None | Unset
        if isinstance(self.moe_intermediate_size, Unset):
            moe_intermediate_size = UNSET
        else:
            moe_intermediate_size = self.moe_intermediate_size

        n_routed_experts: int | None | Unset
        if isinstance(self.n_routed_experts, Unset):
            n_routed_experts = UNSET
        else:
            n_routed_experts = self.n_routed_experts

        n_shared_experts: int | None | Unset
        if isinstance(self.n_shared_experts, Unset):
            n_shared_experts = UNSET
        else:
            n_shared_experts = self.n_shared_experts

        num_attention_heads: int | None | Unset
        if isinstance(self.num_attention_heads, Unset):
            num_attention_heads = UNSET
        else:
            num_attention_heads = self.num_attention_heads

        num_experts: int | None | Unset
        if isinstance(self.num_experts, Unset):
            num_experts = UNSET
        else:
            num_experts = self.num_experts

        num_experts_per_tok: int | None | Unset
        if isinstance(self.num_experts_per_tok, Unset):
            num_experts_per_tok = UNSET
        else:
            num_experts_per_tok = self.num_experts_per_tok

        num_hidden_layers: int | None | Unset
        if isinstance(self.num_hidden_layers, Unset):
            num_hidden_layers = UNSET
        else:
            num_hidden_layers = self.num_hidden_layers

        num_key_value_heads: int | None | Unset
        if isinstance(self.num_key_value_heads, Unset):
            num_key_value_heads = UNSET
        else:
            num_key_value_heads = self.num_key_value_heads

        num_local_experts: int | None | Unset
        if isinstance(self.num_local_experts, Unset):
            num_local_experts = UNSET
        else:
            num_local_experts = self.num_local_experts

        shared_expert_intermediate_size: int | None | Unset
        if isinstance(self.shared_expert_intermediate_size, Unset):
            shared_expert_intermediate_size = UNSET
        else:
            shared_expert_intermediate_size = self.shared_expert_intermediate_size

        text_config: dict[str, Any] | None | Unset
        if isinstance(self.text_config, Unset):
            text_config = UNSET
        elif isinstance(self.text_config, HfConfig):
            text_config = self.text_config.to_dict()
        else:
            text_config = self.text_config

        tie_word_embeddings: bool | None | Unset
        if isinstance(self.tie_word_embeddings, Unset):
            tie_word_embeddings = UNSET
        else:
            tie_word_embeddings = self.tie_word_embeddings

        vocab_size: int | None | Unset
        if isinstance(self.vocab_size, Unset):
            vocab_size = UNSET
        else:
            vocab_size = self.vocab_size

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if first_k_dense_replace is not UNSET:
            field_dict["first_k_dense_replace"] = first_k_dense_replace
        if head_dim is not UNSET:
            field_dict["head_dim"] = head_dim
        if hidden_size is not UNSET:
            field_dict["hidden_size"] = hidden_size
        if intermediate_size is not UNSET:
            field_dict["intermediate_size"] = intermediate_size
        if model_type is not UNSET:
            field_dict["model_type"] = model_type
        if moe_intermediate_size is not UNSET:
            field_dict["moe_intermediate_size"] = moe_intermediate_size
        if n_routed_experts is not UNSET:
            field_dict["n_routed_experts"] = n_routed_experts
        if n_shared_experts is not UNSET:
            field_dict["n_shared_experts"] = n_shared_experts
        if num_attention_heads is not UNSET:
            field_dict["num_attention_heads"] = num_attention_heads
        if num_experts is not UNSET:
            field_dict["num_experts"] = num_experts
        if num_experts_per_tok is not UNSET:
            field_dict["num_experts_per_tok"] = num_experts_per_tok
        if num_hidden_layers is not UNSET:
            field_dict["num_hidden_layers"] = num_hidden_layers
        if num_key_value_heads is not UNSET:
            field_dict["num_key_value_heads"] = num_key_value_heads
        if num_local_experts is not UNSET:
            field_dict["num_local_experts"] = num_local_experts
        if shared_expert_intermediate_size is not UNSET:
            field_dict["shared_expert_intermediate_size"] = (
                shared_expert_intermediate_size
            )
        if text_config is not UNSET:
            field_dict["text_config"] = text_config
        if tie_word_embeddings is not UNSET:
            field_dict["tie_word_embeddings"] = tie_word_embeddings
        if vocab_size is not UNSET:
            field_dict["vocab_size"] = vocab_size

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_first_k_dense_replace(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        first_k_dense_replace = _parse_first_k_dense_replace(
            d.pop("first_k_dense_replace", UNSET)
        )

        def _parse_head_dim(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        head_dim = _parse_head_dim(d.pop("head_dim", UNSET))

        def _parse_hidden_size(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        hidden_size = _parse_hidden_size(d.pop("hidden_size", UNSET))

        def _parse_intermediate_size(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        intermediate_size = _parse_intermediate_size(d.pop("intermediate_size", UNSET))

        def _parse_model_type(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        model_type = _parse_model_type(d.pop("model_type", UNSET))

        def _parse_moe_intermediate_size(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        moe_intermediate_size = _parse_moe_intermediate_size(
            d.pop("moe_intermediate_size", UNSET)
        )

        def _parse_n_routed_experts(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        n_routed_experts = _parse_n_routed_experts(d.pop("n_routed_experts", UNSET))

        def _parse_n_shared_experts(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        n_shared_experts = _parse_n_shared_experts(d.pop("n_shared_experts", UNSET))

        def _parse_num_attention_heads(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        num_attention_heads = _parse_num_attention_heads(
            d.pop("num_attention_heads", UNSET)
        )

        def _parse_num_experts(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        num_experts = _parse_num_experts(d.pop("num_experts", UNSET))

        def _parse_num_experts_per_tok(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        num_experts_per_tok = _parse_num_experts_per_tok(
            d.pop("num_experts_per_tok", UNSET)
        )

        def _parse_num_hidden_layers(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        num_hidden_layers = _parse_num_hidden_layers(d.pop("num_hidden_layers", UNSET))

        def _parse_num_key_value_heads(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        num_key_value_heads = _parse_num_key_value_heads(
            d.pop("num_key_value_heads", UNSET)
        )

        def _parse_num_local_experts(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        num_local_experts = _parse_num_local_experts(d.pop("num_local_experts", UNSET))

        def _parse_shared_expert_intermediate_size(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        shared_expert_intermediate_size = _parse_shared_expert_intermediate_size(
            d.pop("shared_expert_intermediate_size", UNSET)
        )

        def _parse_text_config(data: object) -> HfConfig | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                text_config_type_0 = HfConfig.from_dict(data)

                return text_config_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(HfConfig | None | Unset, data)

        text_config = _parse_text_config(d.pop("text_config", UNSET))

        def _parse_tie_word_embeddings(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        tie_word_embeddings = _parse_tie_word_embeddings(
            d.pop("tie_word_embeddings", UNSET)
        )

        def _parse_vocab_size(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        vocab_size = _parse_vocab_size(d.pop("vocab_size", UNSET))

        hf_config = cls(
            first_k_dense_replace=first_k_dense_replace,
            head_dim=head_dim,
            hidden_size=hidden_size,
            intermediate_size=intermediate_size,
            model_type=model_type,
            moe_intermediate_size=moe_intermediate_size,
            n_routed_experts=n_routed_experts,
            n_shared_experts=n_shared_experts,
            num_attention_heads=num_attention_heads,
            num_experts=num_experts,
            num_experts_per_tok=num_experts_per_tok,
            num_hidden_layers=num_hidden_layers,
            num_key_value_heads=num_key_value_heads,
            num_local_experts=num_local_experts,
            shared_expert_intermediate_size=shared_expert_intermediate_size,
            text_config=text_config,
            tie_word_embeddings=tie_word_embeddings,
            vocab_size=vocab_size,
        )

        hf_config.additional_properties = d
        return hf_config

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
