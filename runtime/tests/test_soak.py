"""The sequence-parallel plans (the ones where one rank once died of SIGSEGV) run long under real torchrun
without a crash: every step's metrics line is there and the job exits 0. A longer soak (many runs) is reported
in runtime/README.md; this one runs in CI."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import EXAMPLE, FIXTURES, torchrun

STEPS = 50


@pytest.mark.parametrize("name", ["tp2_dp2", "tp2_pp2"])
def test_sequence_parallel_plans_run_long_without_a_crash(tmp_path: Path, name: str) -> None:
    run = torchrun(tmp_path, 4, EXAMPLE, ["--steps", str(STEPS), "--pool", "0"], plan=FIXTURES / f"{name}.json")
    assert run.returncode == 0, run.output[-4000:]
    assert "Signal" not in run.output and "SIGSEGV" not in run.output
    assert [m["step"] for m in run.metrics] == list(range(1, STEPS + 1))
