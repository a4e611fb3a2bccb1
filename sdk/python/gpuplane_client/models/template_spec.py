from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.template_param import TemplateParam


T = TypeVar("T", bound="TemplateSpec")


@_attrs_define
class TemplateSpec:
    """A custom template as an operator submits it.

    Example:
        {'argv': ['torchrun', '--nnodes={nnodes}', '--nproc-per-node={nproc_per_node}', '--node-rank={node_rank}', '--
            master-addr={master_addr}', '--master-port={master_port}', 'finetune.py', '--lr={lr}', '--optim={optim}',
            '{args}'], 'description': 'Our fine-tuning entry point', 'name': 'finetune', 'parameters': [{'default': 0.0003,
            'name': 'lr', 'type': 'float'}, {'default': 'adamw', 'name': 'optim', 'type': 'enum', 'values': ['adamw',
            'lion']}]}

    Attributes:
        argv (list[str]): The launch command, one element per argument, with `{placeholders}`.
        name (str): `[a-z0-9][a-z0-9._-]*`; not a built-in name. An existing name gets a new version.
        description (str | Unset):
        parameters (list[TemplateParam] | Unset):
    """

    argv: list[str]
    name: str
    description: str | Unset = UNSET
    parameters: list[TemplateParam] | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        argv = self.argv

        name = self.name

        description = self.description

        parameters: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.parameters, Unset):
            parameters = []
            for parameters_item_data in self.parameters:
                parameters_item = parameters_item_data.to_dict()
                parameters.append(parameters_item)

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "argv": argv,
                "name": name,
            }
        )
        if description is not UNSET:
            field_dict["description"] = description
        if parameters is not UNSET:
            field_dict["parameters"] = parameters

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.template_param import TemplateParam

        d = dict(src_dict)
        argv = cast(list[str], d.pop("argv"))

        name = d.pop("name")

        description = d.pop("description", UNSET)

        _parameters = d.pop("parameters", UNSET)
        parameters: list[TemplateParam] | Unset = UNSET
        if _parameters is not UNSET:
            parameters = []
            for parameters_item_data in _parameters:
                parameters_item = TemplateParam.from_dict(parameters_item_data)

                parameters.append(parameters_item)

        template_spec = cls(
            argv=argv,
            name=name,
            description=description,
            parameters=parameters,
        )

        return template_spec
