"""Check rendered framework files with the frameworks' own parsers.

    python check-framework-files.py DIR

DIR holds one sub-directory per rendered launch spec, each with the spec's files as gpuplane wrote them and a
`world.json` ({"dp": <data-parallel degree>}). For every file a framework reads:

- `ds_config.json`: DeepSpeed's `DeepSpeedConfig` (its batch identity train_batch_size = micro x accumulation x
  data-parallel world, the ZeRO and precision sections), with the data-parallel world the plan gives;
- `accelerate_config.json`: what `accelerate launch --config_file` does before it starts a process: its config
  loader (unknown keys, a bad distributed type or precision are errors there), its launch validation, and the
  FSDP environment it builds for the processes;
- `gpuplane_plan.json`: gpuplane_runtime's own parser.

`megatron_args.txt` is not checked here: Megatron-LM's argument parser (megatron/training/arguments.py) is not in
the megatron-core wheel on PyPI, only in the Megatron-LM repository. Prints one `ok <file>` line per file; exits
non-zero on the first file a framework refuses.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


class DataParallelOnly:
    """The `mpu` DeepSpeed asks for the data-parallel world when no process group runs."""

    def __init__(self, dp: int) -> None:
        self.dp = dp

    def get_data_parallel_world_size(self) -> int:
        return self.dp

    def get_data_parallel_rank(self) -> int:
        return 0

    def get_model_parallel_world_size(self) -> int:
        return 1

    def get_model_parallel_rank(self) -> int:
        return 0

    def get_tensor_model_parallel_world_size(self) -> int:
        return 1

    def get_pipeline_model_parallel_world_size(self) -> int:
        return 1

    def get_sequence_parallel_world_size(self) -> int:
        return 1

    def get_sequence_data_parallel_world_size(self) -> int:
        return self.dp


def one_process_group() -> None:
    """DeepSpeed asks its communication layer for the rank (and reads the world from the `mpu` only then): a
    process group of one, on loopback, as `deepspeed.init_distributed` makes it."""
    import os
    import socket

    import deepspeed

    if deepspeed.comm.is_initialized():
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    # On the CPU, DeepSpeed's communication layer JIT-compiles a shared-memory op (ninja, a C++ toolchain); reading
    # a config needs no collective, so that op is not built.
    import importlib

    # (`import deepspeed.comm.torch` would give the torch package: deepspeed.comm has an attribute of that name.)
    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
    deepspeed.init_distributed(dist_backend="gloo")


def check_deepspeed(path: Path, world: dict[str, Any]) -> None:
    from deepspeed.runtime.config import DeepSpeedConfig

    one_process_group()
    config = DeepSpeedConfig(str(path), mpu=DataParallelOnly(int(world["dp"])))
    assert config.train_batch_size == json.loads(path.read_text())["train_batch_size"]


def check_accelerate(path: Path, world: dict[str, Any]) -> None:
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env

    # What `accelerate launch --config_file PATH train.py` does before it starts anything: read the file, merge
    # it into the launch arguments and validate them, then build the processes' environment.
    args = launch_command_parser().parse_args(["--config_file", str(path), "train.py"])
    validated = _validate_launch_command(args)
    args = validated[0] if isinstance(validated, tuple) else args
    assert args.use_fsdp, "accelerate did not read an FSDP launch"
    config = json.loads(path.read_text())
    assert (args.num_machines, args.machine_rank) == (config["num_machines"], config["machine_rank"])
    env = prepare_multi_gpu_env(args)
    assert env.get("ACCELERATE_USE_FSDP") == "true", env
    assert env.get("FSDP_SHARDING_STRATEGY") == config["fsdp_config"]["fsdp_sharding_strategy"], env


def check_plan(path: Path, world: dict[str, Any]) -> None:
    import gpuplane_runtime

    gpuplane_runtime.load_plan(path)


CHECKS = {
    "ds_config.json": check_deepspeed,
    "accelerate_config.json": check_accelerate,
    "gpuplane_plan.json": check_plan,
}


def main() -> None:
    root = Path(sys.argv[1])
    checked = 0
    for spec in sorted(p for p in root.iterdir() if p.is_dir()):
        world = json.loads((spec / "world.json").read_text())
        for name, check in CHECKS.items():
            path = spec / name
            if path.exists():
                try:
                    check(path, world)
                except Exception as err:  # noqa: BLE001 - any refusal by the framework is the finding
                    print(f"refused {spec.name}/{name}: {type(err).__name__}: {err}", flush=True)
                    sys.exit(1)
                print(f"ok {spec.name}/{name}", flush=True)
                checked += 1
    if checked == 0:
        print("no framework file found", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
