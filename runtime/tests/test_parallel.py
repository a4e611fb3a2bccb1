"""The example trains a tiny Llama under real torchrun (4 processes, CPU, gloo) with each plan the planner made
for it; every rank sits where the plan puts it, the loss falls, and the loss curve is the same under every plan."""

from __future__ import annotations

import json

import pytest
from conftest import EXAMPLE, FIXTURES, Run, torchrun

STEPS = 8
ARGS = ["--steps", str(STEPS)]
PLANS = {"dp4_zero3": 4, "tp2_dp2": 4, "pp2_dp2": 4, "tp2_pp2": 4, "dp2_zero0": 2}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    out = {}
    for name, nproc in PLANS.items():
        tmp = tmp_path_factory.mktemp(name)
        out[name] = torchrun(tmp, nproc, EXAMPLE, ARGS, plan=FIXTURES / f"{name}.json")
    return out


def plan_of(name: str) -> dict[str, int]:
    plan = json.loads((FIXTURES / f"{name}.json").read_text())["plan"]
    return {k: int(plan[k]) for k in ("tp", "pp", "dp", "global_batch")}


@pytest.mark.parametrize("name", list(PLANS))
def test_plan_runs_and_places_every_rank(runs: dict[str, Run], name: str) -> None:
    run = runs[name]
    assert run.returncode == 0, run.output[-4000:]
    p = plan_of(name)
    world = p["tp"] * p["pp"] * p["dp"]
    mesh = run.mesh()
    assert sorted(mesh) == list(range(world)), run.output[-4000:]
    for rank, coords in mesh.items():
        # tp varies fastest, then dp, then pp (Megatron's order: a tensor-parallel group shares a node).
        expected = {"pp": rank // (p["dp"] * p["tp"]), "dp": (rank // p["tp"]) % p["dp"], "cp": 0, "tp": rank % p["tp"]}
        assert coords == expected, (name, rank, coords)


@pytest.mark.parametrize("name", list(PLANS))
def test_metrics_file_has_one_line_per_step(runs: dict[str, Run], name: str) -> None:
    run = runs[name]
    assert [m["step"] for m in run.metrics] == list(range(1, STEPS + 1)), run.output[-2000:]
    seq_len = 32
    times = []
    for m in run.metrics:
        assert set(m) == {"step", "step_time_s", "tokens", "loss", "peak_memory_bytes", "time"}
        assert m["tokens"] == plan_of(name)["global_batch"] * seq_len
        assert isinstance(m["step_time_s"], float) and 0 < m["step_time_s"] < 60
        assert isinstance(m["peak_memory_bytes"], int) and m["peak_memory_bytes"] > 0
        assert isinstance(m["loss"], float)
        times.append(m["time"])
    assert times == sorted(times)


@pytest.mark.parametrize("name", list(PLANS))
def test_loss_falls(runs: dict[str, Run], name: str) -> None:
    losses = [float(m["loss"]) for m in runs[name].metrics]  # type: ignore[arg-type]
    assert len(losses) == STEPS
    assert losses[-1] < losses[0] - 0.4, losses


def test_loss_curve_is_the_same_under_every_plan(runs: dict[str, Run]) -> None:
    curves = {name: [float(m["loss"]) for m in run.metrics] for name, run in runs.items()}  # type: ignore[arg-type]
    reference = curves["dp4_zero3"]
    for name, curve in curves.items():
        assert len(curve) == STEPS, name
        worst = max(abs(a - b) for a, b in zip(curve, reference, strict=True))
        assert worst < 2e-3, (name, curve, reference)


def test_fixtures_come_from_the_planner() -> None:
    # generate.sh wraps the planner's output whole: its predictions and explanation are there.
    for name in PLANS:
        doc = json.loads((FIXTURES / f"{name}.json").read_text())
        assert doc["version"] == 1 and doc["seq_len"] == 32
        for key in ("step_time_s", "tokens_per_s", "memory_per_gpu_bytes", "explanation", "layers_per_stage"):
            assert key in doc["plan"], (name, key)
