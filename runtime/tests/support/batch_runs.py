"""Helpers for the batch modules' tests (gpuplane_runtime.batch and .images): input files, runs as a replica of a
job through ``python -m``, and the records of the part files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parent.parent.parent / "src"


def write_lines(path: Path, lines: list[Any]) -> Path:
    """A JSONL input: each line JSON, or as it is when it is a string (a line that is not JSON)."""
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return path


def run_replica(module: str, argv: list[str], progress: Path, replica: int, replicas: int) -> str:
    """``python -m MODULE ARGV`` as replica ``replica`` of ``replicas`` (the launch's NODE_RANK/NNODES, no hub, one
    thread); its stdout, once it exited 0."""
    env = dict(os.environ, NODE_RANK=str(replica), NNODES=str(replicas), PYTHONPATH=str(SRC), HF_HUB_OFFLINE="1")
    env["OMP_NUM_THREADS"] = "1"  # tiny models: threads only fight over a busy machine's cores
    env.pop("RANK", None)
    env.pop("WORLD_SIZE", None)
    env["GPUPLANE_PROGRESS_FILE"] = str(progress)
    done = subprocess.run([sys.executable, "-m", module, *argv], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def part_records(out: Path) -> dict[int, dict[str, Any]]:
    """Every part file's records by index (a line cut off by a "crash" skipped), each index answered once."""
    found: dict[int, dict[str, Any]] = {}
    for part in sorted(out.glob("part-*.jsonl")):
        for line in part.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            assert record["index"] not in found, f"index {record['index']} answered twice"
            found[record["index"]] = record
    return found
