from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.launch_spec_env import LaunchSpecEnv
    from ..models.serve_spec import ServeSpec
    from ..models.spec_file import SpecFile


T = TypeVar("T", bound="LaunchSpec")


@_attrs_define
class LaunchSpec:
    """What one node runs: exactly this argv (no shell) with exactly this environment (plus PATH and HOME).

    Attributes:
        argv (list[str]):
        env (LaunchSpecEnv):
        files (list[SpecFile] | Unset):
        image (None | str | Unset): Run inside this container image (the agent wraps argv in `docker run` with only the
            leased GPUs).
        serve (None | ServeSpec | Unset):
        workdir (None | str | Unset): The uploaded archive (its digest, `GET /v1/agent/uploads/{digest}`) the agent
            unpacks into the working
            directory before the part starts.
    """

    argv: list[str]
    env: LaunchSpecEnv
    files: list[SpecFile] | Unset = UNSET
    image: None | str | Unset = UNSET
    serve: None | ServeSpec | Unset = UNSET
    workdir: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.serve_spec import ServeSpec

        argv = self.argv

        env = self.env.to_dict()

        files: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.files, Unset):
            files = []
            for files_item_data in self.files:
                files_item = files_item_data.to_dict()
                files.append(files_item)

        image: None | str | Unset
        if isinstance(self.image, Unset):
            image = UNSET
        else:
            image = self.image

        serve: dict[str, Any] | None | Unset
        if isinstance(self.serve, Unset):
            serve = UNSET
        elif isinstance(self.serve, ServeSpec):
            serve = self.serve.to_dict()
        else:
            serve = self.serve

        workdir: None | str | Unset
        if isinstance(self.workdir, Unset):
            workdir = UNSET
        else:
            workdir = self.workdir

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "argv": argv,
                "env": env,
            }
        )
        if files is not UNSET:
            field_dict["files"] = files
        if image is not UNSET:
            field_dict["image"] = image
        if serve is not UNSET:
            field_dict["serve"] = serve
        if workdir is not UNSET:
            field_dict["workdir"] = workdir

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.launch_spec_env import LaunchSpecEnv
        from ..models.serve_spec import ServeSpec
        from ..models.spec_file import SpecFile

        d = dict(src_dict)
        argv = cast(list[str], d.pop("argv"))

        env = LaunchSpecEnv.from_dict(d.pop("env"))

        _files = d.pop("files", UNSET)
        files: list[SpecFile] | Unset = UNSET
        if _files is not UNSET:
            files = []
            for files_item_data in _files:
                files_item = SpecFile.from_dict(files_item_data)

                files.append(files_item)

        def _parse_image(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        image = _parse_image(d.pop("image", UNSET))

        def _parse_serve(data: object) -> None | ServeSpec | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                serve_type_0 = ServeSpec.from_dict(data)

                return serve_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ServeSpec | Unset, data)

        serve = _parse_serve(d.pop("serve", UNSET))

        def _parse_workdir(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        workdir = _parse_workdir(d.pop("workdir", UNSET))

        launch_spec = cls(
            argv=argv,
            env=env,
            files=files,
            image=image,
            serve=serve,
            workdir=workdir,
        )

        launch_spec.additional_properties = d
        return launch_spec

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
