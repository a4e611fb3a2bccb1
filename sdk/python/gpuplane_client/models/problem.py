from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.field_error import FieldError
    from ..models.problem_context_type_0 import ProblemContextType0


T = TypeVar("T", bound="Problem")


@_attrs_define
class Problem:
    """RFC 9457 problem details, as every error response of this API carries them.

    Attributes:
        code (str): Stable machine-readable code, e.g. `validation_failed`, `not_found`, `insufficient_capacity`.
        detail (str): Human explanation of this occurrence.
        status (int): HTTP status code.
        title (str): Short human summary of the problem type.
        type_ (str): A URI naming the problem type (`about:blank` style, stable per `code`).
        context (None | ProblemContextType0 | Unset): Extra machine-readable facts about the problem (e.g. free
            capacity), when the code defines any.
        errors (list[FieldError] | Unset): Field-level errors, present for validation failures.
    """

    code: str
    detail: str
    status: int
    title: str
    type_: str
    context: None | ProblemContextType0 | Unset = UNSET
    errors: list[FieldError] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.problem_context_type_0 import ProblemContextType0

        code = self.code

        detail = self.detail

        status = self.status

        title = self.title

        type_ = self.type_

        context: dict[str, Any] | None | Unset
        if isinstance(self.context, Unset):
            context = UNSET
        elif isinstance(self.context, ProblemContextType0):
            context = self.context.to_dict()
        else:
            context = self.context

        errors: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.errors, Unset):
            errors = []
            for errors_item_data in self.errors:
                errors_item = errors_item_data.to_dict()
                errors.append(errors_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "code": code,
                "detail": detail,
                "status": status,
                "title": title,
                "type": type_,
            }
        )
        if context is not UNSET:
            field_dict["context"] = context
        if errors is not UNSET:
            field_dict["errors"] = errors

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.field_error import FieldError
        from ..models.problem_context_type_0 import ProblemContextType0

        d = dict(src_dict)
        code = d.pop("code")

        detail = d.pop("detail")

        status = d.pop("status")

        title = d.pop("title")

        type_ = d.pop("type")

        def _parse_context(data: object) -> None | ProblemContextType0 | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                context_type_0 = ProblemContextType0.from_dict(data)

                return context_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ProblemContextType0 | Unset, data)

        context = _parse_context(d.pop("context", UNSET))

        _errors = d.pop("errors", UNSET)
        errors: list[FieldError] | Unset = UNSET
        if _errors is not UNSET:
            errors = []
            for errors_item_data in _errors:
                errors_item = FieldError.from_dict(errors_item_data)

                errors.append(errors_item)

        problem = cls(
            code=code,
            detail=detail,
            status=status,
            title=title,
            type_=type_,
            context=context,
            errors=errors,
        )

        problem.additional_properties = d
        return problem

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
