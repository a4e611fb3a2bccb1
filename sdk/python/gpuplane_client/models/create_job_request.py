from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.create_job_request_env import CreateJobRequestEnv
    from ..models.create_job_request_parameters import CreateJobRequestParameters
    from ..models.create_job_request_secret_env import CreateJobRequestSecretEnv
    from ..models.model_ref import ModelRef
    from ..models.pins import Pins
    from ..models.restart_request import RestartRequest
    from ..models.retune import Retune
    from ..models.serve_request import ServeRequest
    from ..models.workload_fields import WorkloadFields


T = TypeVar("T", bound="CreateJobRequest")


@_attrs_define
class CreateJobRequest:
    """A job to run on a lease's GPUs.

    Example:
        {'args': ['--train-iters', '1000'], 'command': ['pretrain_gpt.py'], 'env': {'WANDB_PROJECT': 'llama'}, 'model':
            {'preset': 'llama3-70b'}, 'template': 'auto', 'workload': {'global_batch': 512, 'kind': 'train', 'seq_len':
            4096}}

    Attributes:
        template (str): `auto` (the planner picks a built-in template), a built-in name, or a custom template's name.
        args (list[str] | Unset): Extra arguments, appended (or spliced at a custom template's `{args}`).
        command (list[str] | Unset): The program: the training script for torchrun templates (e.g. `["train.py"]`),
            `{command}` of a custom one.
        env (CreateJobRequestEnv | Unset): Extra environment: names `[A-Z_][A-Z0-9_]*`, not the launch's own variables.
        image (None | str | Unset): Run in this container image (`docker run` with only the leased GPUs); otherwise
            directly on the host.
        master_port (int | None | Unset): Rendezvous port on the first node (default 29500).
        model (ModelRef | None | Unset):
        parameters (CreateJobRequestParameters | Unset): Values of the template's parameters.
        pins (Pins | Unset): Optional pins: a `Some` fixes that knob, `None` lets the search choose.
        restart (RestartRequest | Unset): What a job asks of restarts (`restart` on create); every field optional.
        retune (Retune | Unset): Re-planning from measurements; see [`retune`] for how the planner is corrected.
        secret_env (CreateJobRequestSecretEnv | Unset): Secret environment (tokens, passwords), same name rules as
            `env`, values of 8 to 32768 bytes: never
            returned by any read of the API (to members and admins alike), never logged, replaced by `***` in output
            tails, and delivered only to the agents of the job's nodes.
        serve (None | ServeRequest | Unset):
        setup (None | str | Unset): A shell script (`sh -e`: it stops at its first failing command, up to 64 KiB) run
            before the command on
            every node, each time a part starts (a restart included), in the part's working directory and with its
            environment: installs, downloads. Its output is the job's; if it fails, the part fails with its exit code
            and the command does not run. The job's image, if any, must have `/bin/sh`.
        stop_grace_s (int | None | Unset): Seconds a stop notice (a replan, the lease released or reaching its end, the
            balance running out) gives
            the job to checkpoint and exit; default 60, at most the service's `--max-stop-grace-secs` and the lease's
            remaining time.
        template_version (int | None | Unset): A custom template's version (default: the latest).
        workdir (None | str | Unset): An upload of the tenant's (`POST /v1/uploads`), by its digest: every part starts
            in a working directory
            holding the archive's files (unpacked before the part's own files, which must not share a path with them).
        workload (None | Unset | WorkloadFields):
    """

    template: str
    args: list[str] | Unset = UNSET
    command: list[str] | Unset = UNSET
    env: CreateJobRequestEnv | Unset = UNSET
    image: None | str | Unset = UNSET
    master_port: int | None | Unset = UNSET
    model: ModelRef | None | Unset = UNSET
    parameters: CreateJobRequestParameters | Unset = UNSET
    pins: Pins | Unset = UNSET
    restart: RestartRequest | Unset = UNSET
    retune: Retune | Unset = UNSET
    secret_env: CreateJobRequestSecretEnv | Unset = UNSET
    serve: None | ServeRequest | Unset = UNSET
    setup: None | str | Unset = UNSET
    stop_grace_s: int | None | Unset = UNSET
    template_version: int | None | Unset = UNSET
    workdir: None | str | Unset = UNSET
    workload: None | Unset | WorkloadFields = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.model_ref import ModelRef
        from ..models.serve_request import ServeRequest
        from ..models.workload_fields import WorkloadFields

        template = self.template

        args: list[str] | Unset = UNSET
        if not isinstance(self.args, Unset):
            args = self.args

        command: list[str] | Unset = UNSET
        if not isinstance(self.command, Unset):
            command = self.command

        env: dict[str, Any] | Unset = UNSET
        if not isinstance(self.env, Unset):
            env = self.env.to_dict()

        image: None | str | Unset
        if isinstance(self.image, Unset):
            image = UNSET
        else:
            image = self.image

        master_port: int | None | Unset
        if isinstance(self.master_port, Unset):
            master_port = UNSET
        else:
            master_port = self.master_port

        model: dict[str, Any] | None | Unset
        if isinstance(self.model, Unset):
            model = UNSET
        elif isinstance(self.model, ModelRef):
            model = self.model.to_dict()
        else:
            model = self.model

        parameters: dict[str, Any] | Unset = UNSET
        if not isinstance(self.parameters, Unset):
            parameters = self.parameters.to_dict()

        pins: dict[str, Any] | Unset = UNSET
        if not isinstance(self.pins, Unset):
            pins = self.pins.to_dict()

        restart: dict[str, Any] | Unset = UNSET
        if not isinstance(self.restart, Unset):
            restart = self.restart.to_dict()

        retune: dict[str, Any] | Unset = UNSET
        if not isinstance(self.retune, Unset):
            retune = self.retune.to_dict()

        secret_env: dict[str, Any] | Unset = UNSET
        if not isinstance(self.secret_env, Unset):
            secret_env = self.secret_env.to_dict()

        serve: dict[str, Any] | None | Unset
        if isinstance(self.serve, Unset):
            serve = UNSET
        elif isinstance(self.serve, ServeRequest):
            serve = self.serve.to_dict()
        else:
            serve = self.serve

        setup: None | str | Unset
        if isinstance(self.setup, Unset):
            setup = UNSET
        else:
            setup = self.setup

        stop_grace_s: int | None | Unset
        if isinstance(self.stop_grace_s, Unset):
            stop_grace_s = UNSET
        else:
            stop_grace_s = self.stop_grace_s

        template_version: int | None | Unset
        if isinstance(self.template_version, Unset):
            template_version = UNSET
        else:
            template_version = self.template_version

        workdir: None | str | Unset
        if isinstance(self.workdir, Unset):
            workdir = UNSET
        else:
            workdir = self.workdir

        workload: dict[str, Any] | None | Unset
        if isinstance(self.workload, Unset):
            workload = UNSET
        elif isinstance(self.workload, WorkloadFields):
            workload = self.workload.to_dict()
        else:
            workload = self.workload

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "template": template,
            }
        )
        if args is not UNSET:
            field_dict["args"] = args
        if command is not UNSET:
            field_dict["command"] = command
        if env is not UNSET:
            field_dict["env"] = env
        if image is not UNSET:
            field_dict["image"] = image
        if master_port is not UNSET:
            field_dict["master_port"] = master_port
        if model is not UNSET:
            field_dict["model"] = model
        if parameters is not UNSET:
            field_dict["parameters"] = parameters
        if pins is not UNSET:
            field_dict["pins"] = pins
        if restart is not UNSET:
            field_dict["restart"] = restart
        if retune is not UNSET:
            field_dict["retune"] = retune
        if secret_env is not UNSET:
            field_dict["secret_env"] = secret_env
        if serve is not UNSET:
            field_dict["serve"] = serve
        if setup is not UNSET:
            field_dict["setup"] = setup
        if stop_grace_s is not UNSET:
            field_dict["stop_grace_s"] = stop_grace_s
        if template_version is not UNSET:
            field_dict["template_version"] = template_version
        if workdir is not UNSET:
            field_dict["workdir"] = workdir
        if workload is not UNSET:
            field_dict["workload"] = workload

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.create_job_request_env import CreateJobRequestEnv
        from ..models.create_job_request_parameters import CreateJobRequestParameters
        from ..models.create_job_request_secret_env import CreateJobRequestSecretEnv
        from ..models.model_ref import ModelRef
        from ..models.pins import Pins
        from ..models.restart_request import RestartRequest
        from ..models.retune import Retune
        from ..models.serve_request import ServeRequest
        from ..models.workload_fields import WorkloadFields

        d = dict(src_dict)
        template = d.pop("template")

        args = cast(list[str], d.pop("args", UNSET))

        command = cast(list[str], d.pop("command", UNSET))

        _env = d.pop("env", UNSET)
        env: CreateJobRequestEnv | Unset
        if isinstance(_env, Unset):
            env = UNSET
        else:
            env = CreateJobRequestEnv.from_dict(_env)

        def _parse_image(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        image = _parse_image(d.pop("image", UNSET))

        def _parse_master_port(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        master_port = _parse_master_port(d.pop("master_port", UNSET))

        def _parse_model(data: object) -> ModelRef | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                model_type_0 = ModelRef.from_dict(data)

                return model_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ModelRef | None | Unset, data)

        model = _parse_model(d.pop("model", UNSET))

        _parameters = d.pop("parameters", UNSET)
        parameters: CreateJobRequestParameters | Unset
        if isinstance(_parameters, Unset):
            parameters = UNSET
        else:
            parameters = CreateJobRequestParameters.from_dict(_parameters)

        _pins = d.pop("pins", UNSET)
        pins: Pins | Unset
        if isinstance(_pins, Unset):
            pins = UNSET
        else:
            pins = Pins.from_dict(_pins)

        _restart = d.pop("restart", UNSET)
        restart: RestartRequest | Unset
        if isinstance(_restart, Unset):
            restart = UNSET
        else:
            restart = RestartRequest.from_dict(_restart)

        _retune = d.pop("retune", UNSET)
        retune: Retune | Unset
        if isinstance(_retune, Unset):
            retune = UNSET
        else:
            retune = Retune.from_dict(_retune)

        _secret_env = d.pop("secret_env", UNSET)
        secret_env: CreateJobRequestSecretEnv | Unset
        if isinstance(_secret_env, Unset):
            secret_env = UNSET
        else:
            secret_env = CreateJobRequestSecretEnv.from_dict(_secret_env)

        def _parse_serve(data: object) -> None | ServeRequest | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                serve_type_0 = ServeRequest.from_dict(data)

                return serve_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ServeRequest | Unset, data)

        serve = _parse_serve(d.pop("serve", UNSET))

        def _parse_setup(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        setup = _parse_setup(d.pop("setup", UNSET))

        def _parse_stop_grace_s(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        stop_grace_s = _parse_stop_grace_s(d.pop("stop_grace_s", UNSET))

        def _parse_template_version(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        template_version = _parse_template_version(d.pop("template_version", UNSET))

        def _parse_workdir(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        workdir = _parse_workdir(d.pop("workdir", UNSET))

        def _parse_workload(data: object) -> None | Unset | WorkloadFields:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                workload_type_0 = WorkloadFields.from_dict(data)

                return workload_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | WorkloadFields, data)

        workload = _parse_workload(d.pop("workload", UNSET))

        create_job_request = cls(
            template=template,
            args=args,
            command=command,
            env=env,
            image=image,
            master_port=master_port,
            model=model,
            parameters=parameters,
            pins=pins,
            restart=restart,
            retune=retune,
            secret_env=secret_env,
            serve=serve,
            setup=setup,
            stop_grace_s=stop_grace_s,
            template_version=template_version,
            workdir=workdir,
            workload=workload,
        )

        return create_job_request
