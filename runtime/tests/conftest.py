"""Helpers: run a script under a real ``torchrun`` (CPU, gloo) with a plan file, collect its output and metrics."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent.parent
FIXTURES = TESTS / "fixtures"
EXAMPLE = REPO / "examples" / "llama-parallel" / "train.py"
SCRIPTS = TESTS / "scripts"
FAULTS = SCRIPTS / "train_faults.py"
SRC = TESTS.parent / "src"
# The checkout's source is what is tested, in this process and in every rank torchrun starts.
sys.path.insert(0, str(SRC))
MESH_LINE = re.compile(r"gpuplane_runtime: rank (\d+)/(\d+) mesh pp=(\d+) dp=(\d+) cp=(\d+) tp=(\d+)")


@dataclass
class Run:
    returncode: int
    output: str
    metrics: list[dict[str, object]]
    seconds: float

    def mesh(self) -> dict[int, dict[str, int]]:
        """Each rank's mesh coordinates, as the runtime printed them."""
        found: dict[int, dict[str, int]] = {}
        for m in MESH_LINE.finditer(self.output):
            rank = int(m.group(1))
            found[rank] = {"pp": int(m.group(3)), "dp": int(m.group(4)), "cp": int(m.group(5)), "tp": int(m.group(6))}
        return found


def torchrun(
    tmp: Path,
    nproc: int,
    script: Path,
    args: list[str],
    *,
    plan: Path | str | None,
    env: dict[str, str] | None = None,
    timeout: float = 240,
    monitor_interval_s: int = 1,
) -> Run:
    import time

    full_env = {k: v for k, v in os.environ.items() if not k.startswith("GPUPLANE_")}
    full_env.update(
        {
            "OMP_NUM_THREADS": "1",
            "GPUPLANE_COLLECTIVE_TIMEOUT_S": "30",
            "PYTHONUNBUFFERED": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONPATH": os.pathsep.join([str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])]),
        }
    )
    if plan is not None:
        full_env["GPUPLANE_PLAN_FILE"] = str(plan)
    full_env.update(env or {})
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        f"--monitor-interval={monitor_interval_s}",
        str(script),
        *args,
    ]
    started = time.monotonic()
    proc = subprocess.run(
        cmd, cwd=tmp, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout
    )
    metrics_path = tmp / full_env.get("GPUPLANE_METRICS_FILE", "gpuplane_steps.jsonl")
    metrics = []
    if metrics_path.exists():
        metrics = [json.loads(line) for line in metrics_path.read_text().splitlines() if line.strip()]
    return Run(proc.returncode, proc.stdout, metrics, time.monotonic() - started)


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES
