from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.param_type import ParamType
from ..types import UNSET, Unset

T = TypeVar("T", bound="TemplateParam")


@_attrs_define
class TemplateParam:
    """A typed template parameter, e.g. `{"name": "lr", "type": "float", "default": 0.0003}`.

    Attributes:
        name (str): `[a-z_][a-z0-9_]*`, used as `{name}` in the argv.
        type_ (ParamType): A parameter's type.
        default (Any | Unset):
        description (None | str | Unset):
        values (list[str] | Unset): The allowed values of an `enum` parameter.
    """

    name: str
    type_: ParamType
    default: Any | Unset = UNSET
    description: None | str | Unset = UNSET
    values: list[str] | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        type_ = self.type_.value

        default = self.default

        description: None | str | Unset
        if isinstance(self.description, Unset):
            description = UNSET
        else:
            description = self.description

        values: list[str] | Unset = UNSET
        if not isinstance(self.values, Unset):
            values = self.values

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
                "type": type_,
            }
        )
        if default is not UNSET:
            field_dict["default"] = default
        if description is not UNSET:
            field_dict["description"] = description
        if values is not UNSET:
            field_dict["values"] = values

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        name = d.pop("name")

        type_ = ParamType(d.pop("type"))

        default = d.pop("default", UNSET)

        def _parse_description(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        description = _parse_description(d.pop("description", UNSET))

        values = cast(list[str], d.pop("values", UNSET))

        template_param = cls(
            name=name,
            type_=type_,
            default=default,
            description=description,
            values=values,
        )

        return template_param
