from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.template_param import TemplateParam


T = TypeVar("T", bound="Template")


@_attrs_define
class Template:
    """A launch template: built-in, or an operator's custom argv template at one version.

    Attributes:
        builtin (bool):
        description (str):
        name (str):
        parameters (list[TemplateParam]):
        argv (list[str] | None | Unset): The custom template's argv with `{placeholders}` (built-in templates render
            theirs from the plan).
        created_at (datetime.datetime | None | Unset):
        version (int | None | Unset): Custom templates' version (the latest unless asked otherwise); absent for built-in
            ones.
    """

    builtin: bool
    description: str
    name: str
    parameters: list[TemplateParam]
    argv: list[str] | None | Unset = UNSET
    created_at: datetime.datetime | None | Unset = UNSET
    version: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        builtin = self.builtin

        description = self.description

        name = self.name

        parameters = []
        for parameters_item_data in self.parameters:
            parameters_item = parameters_item_data.to_dict()
            parameters.append(parameters_item)

        argv: list[str] | None | Unset
        if isinstance(self.argv, Unset):
            argv = UNSET
        elif isinstance(self.argv, list):
            argv = self.argv

        else:
            argv = self.argv

        created_at: None | str | Unset
        if isinstance(self.created_at, Unset):
            created_at = UNSET
        elif isinstance(self.created_at, datetime.datetime):
            created_at = self.created_at.isoformat()
        else:
            created_at = self.created_at

        version: int | None | Unset
        if isinstance(self.version, Unset):
            version = UNSET
        else:
            version = self.version

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "builtin": builtin,
                "description": description,
                "name": name,
                "parameters": parameters,
            }
        )
        if argv is not UNSET:
            field_dict["argv"] = argv
        if created_at is not UNSET:
            field_dict["created_at"] = created_at
        if version is not UNSET:
            field_dict["version"] = version

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.template_param import TemplateParam

        d = dict(src_dict)
        builtin = d.pop("builtin")

        description = d.pop("description")

        name = d.pop("name")

        parameters = []
        _parameters = d.pop("parameters")
        for parameters_item_data in _parameters:
            parameters_item = TemplateParam.from_dict(parameters_item_data)

            parameters.append(parameters_item)

        def _parse_argv(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                argv_type_0 = cast(list[str], data)

                return argv_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        argv = _parse_argv(d.pop("argv", UNSET))

        def _parse_created_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                created_at_type_0 = datetime.datetime.fromisoformat(data)

                return created_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        created_at = _parse_created_at(d.pop("created_at", UNSET))

        def _parse_version(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        version = _parse_version(d.pop("version", UNSET))

        template = cls(
            builtin=builtin,
            description=description,
            name=name,
            parameters=parameters,
            argv=argv,
            created_at=created_at,
            version=version,
        )

        template.additional_properties = d
        return template

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
