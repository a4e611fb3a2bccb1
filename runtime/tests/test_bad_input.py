"""Bad input fails at start with a message naming the problem and a non-zero exit, never a hang: a missing or
malformed plan, a world size the plan does not fit, a mesh or batch that does not divide, a model the runtime
cannot split, a rank that dies mid-step (its peers give up within the collective timeout)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import EXAMPLE, FAULTS, FIXTURES, torchrun
from torch import nn

import gpuplane_runtime
from gpuplane_runtime import PlanFileError, PlanMismatchError, UnsupportedModelError, parse_plan


def doc(name: str = "tp2_dp2") -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())  # type: ignore[no-any-return]


def changed(name: str, **plan: Any) -> dict[str, Any]:
    d = copy.deepcopy(doc(name))
    d["plan"].update(plan)
    return d


# --- the plan file itself (no processes needed) ---------------------------------------------------------------


def test_every_fixture_parses() -> None:
    for path in sorted(FIXTURES.glob("*.json")):
        plan = parse_plan(json.loads(path.read_text()), str(path))
        assert plan.world_size == plan.tp * plan.pp * plan.dp


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "a plan file is a JSON object"),
        ({**doc(), "version": 2}, "plan file version 2 is not supported"),
        ({k: v for k, v in doc().items() if k != "plan"}, "field `plan`"),
        ({**doc(), "precision": "int4"}, "field `precision` must be one of bf16, fp16, fp8, fp32"),
        ({**doc(), "seq_len": 0}, "field `seq_len` must be at least 1"),
        (changed("tp2_dp2", tp="2"), "field `tp` must be an integer"),
        (changed("tp2_dp2", recompute="some"), "field `recompute` must be one of none, selective, full"),
        (changed("tp2_dp2", workload="inference"), "is not training"),
        (changed("tp2_dp2", global_batch=9), "global_batch 9 is not micro_batch 2 x grad_accum 2 x dp 2"),
        (changed("pp2_dp2", layers_per_stage=[4]), "layers_per_stage has 1 stages but pp is 2"),
        (changed("tp2_dp2", zero_stage=0, offload="optimizer"), "needs ZeRO stage 1 or more"),
    ],
)
def test_malformed_plan_is_refused_naming_the_field(document: Any, message: str) -> None:
    with pytest.raises((PlanFileError, PlanMismatchError)) as err:
        parse_plan(document, "plan.json")
    assert message in str(err.value)
    assert str(err.value).startswith("gpuplane_runtime: ")


def test_sequence_parallel_seq_len_must_divide() -> None:
    with pytest.raises(PlanMismatchError, match="seq_len 33 over tp 2"):
        parse_plan({**doc("tp2_dp2"), "seq_len": 33})


def test_missing_plan_file_names_the_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPLANE_PLAN_FILE", str(tmp_path / "nope.json"))
    with pytest.raises(PlanFileError, match=r"nope\.json' does not exist"):
        gpuplane_runtime.load_plan()
    monkeypatch.delenv("GPUPLANE_PLAN_FILE")
    with pytest.raises(PlanFileError, match="GPUPLANE_PLAN_FILE is not set"):
        gpuplane_runtime.load_plan()
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(PlanFileError, match="is not JSON"):
        gpuplane_runtime.load_plan(tmp_path / "bad.json")


def test_the_jobs_environment_may_override_the_precision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({**doc(), "precision": "bf16"}))
    assert gpuplane_runtime.load_plan(path).precision == "bf16"
    monkeypatch.setenv("GPUPLANE_PRECISION", "fp32")
    assert gpuplane_runtime.load_plan(path).precision == "fp32"
    monkeypatch.setenv("GPUPLANE_PRECISION", "int4")
    with pytest.raises(PlanFileError, match="GPUPLANE_PRECISION='int4' is not one of bf16, fp16, fp8, fp32"):
        gpuplane_runtime.load_plan(path)


# --- models the plan cannot split (checked before any process group: no peer waits) --------------------------


def tiny_llama(**overrides: Any) -> nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = {
        "vocab_size": 256,
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
    }
    cfg.update(overrides)
    return LlamaForCausalLM(LlamaConfig(**cfg))  # type: ignore[no-any-return]


def plan_of(document: dict[str, Any]) -> gpuplane_runtime.RuntimePlan:
    return parse_plan(document, "plan.json")


def adamw(params: Any) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params)


def test_model_without_a_transformers_config_is_refused_under_tensor_parallelism() -> None:
    model = nn.Sequential(nn.Embedding(16, 8), nn.Linear(8, 16))
    with pytest.raises(UnsupportedModelError, match=r"cannot split Sequential: it has no `config`"):
        gpuplane_runtime.parallelize(model, adamw, plan=plan_of(doc("tp2_dp2")))


def test_layer_that_cannot_be_split_is_named() -> None:
    model = tiny_llama()

    class Gated(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Linear(128, 128)

    model.model.layers[2].mlp = Gated()  # type: ignore[index, union-attr]
    with pytest.raises(UnsupportedModelError, match=r"no module `model\.layers\.2\.mlp\.gate_proj`"):
        gpuplane_runtime.parallelize(model, adamw, plan=plan_of(doc("tp2_dp2")))


def test_heads_that_do_not_divide_by_tp_name_the_module() -> None:
    model = tiny_llama(num_key_value_heads=1)
    with pytest.raises(PlanMismatchError, match=r"cannot split `model\.layers\.0\.self_attn\.k_proj` over tp 2"):
        gpuplane_runtime.parallelize(model, adamw, plan=plan_of(doc("tp2_dp2")))


def test_layers_per_stage_must_match_the_model() -> None:
    model = tiny_llama(num_hidden_layers=6)
    with pytest.raises(PlanMismatchError, match=r"add up to 4 layers, but `model.layers` has 6"):
        gpuplane_runtime.parallelize(model, adamw, plan=plan_of(doc("pp2_dp2")))


def test_context_parallel_is_refused_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    d = changed("dp2_zero0", cp=2, dp=1, global_batch=4)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(PlanMismatchError, match="context parallelism cp 2"):
        gpuplane_runtime.parallelize(tiny_llama(), adamw, plan=plan_of(d))


# --- under torchrun: the job fails, its output says why ------------------------------------------------------


def test_missing_plan_file_fails_every_rank(tmp_path: Path) -> None:
    run = torchrun(tmp_path, 2, EXAMPLE, ["--steps", "1"], plan="missing-plan.json", timeout=120)
    assert run.returncode != 0
    assert "plan file 'missing-plan.json' does not exist" in run.output, run.output[-3000:]


def test_world_size_mismatch_fails_before_any_collective(tmp_path: Path) -> None:
    run = torchrun(tmp_path, 2, EXAMPLE, ["--steps", "1"], plan=FIXTURES / "dp4_zero3.json", timeout=120)
    assert run.returncode != 0
    assert "= 4 processes, but this job has WORLD_SIZE=2" in run.output, run.output[-3000:]


def test_rank_dying_mid_step_fails_the_job_within_the_timeout(tmp_path: Path) -> None:
    # Rank 1 exits before step 2; rank 0 is then inside that step's all-reduce. The job must fail, not hang.
    run = torchrun(
        tmp_path,
        2,
        FAULTS,
        ["4"],
        plan=FIXTURES / "dp2_zero0.json",
        env={"GPUPLANE_TEST_DIE_RANK": "1", "GPUPLANE_TEST_DIE_STEP": "1", "GPUPLANE_COLLECTIVE_TIMEOUT_S": "20"},
        timeout=150,
        # torchrun SIGTERMs the survivor at its first look after rank 1's exit. At 1 s, a loaded machine can still
        # have rank 0 in step 2's forward then, and its own error is never printed; 10 s leaves it time to reach
        # the all-reduce and fail there.
        monitor_interval_s=10,
    )
    assert run.returncode != 0, run.output[-3000:]
    assert "rank 1 dies before step 2" in run.output
    assert "collective timeout 20 s" in run.output
    # The survivor's own error names itself, the step and the timeout (gloo sees the closed connection at once).
    assert "rank 0 (pp=0 dp=0 tp=0), step 2: a collective failed" in run.output, run.output[-3000:]
    # torchrun names the failed rank and its exit code.
    assert "exitcode  : 17" in run.output or "exitcode: 17" in run.output, run.output[-3000:]
    assert [m["step"] for m in run.metrics] == [1]


def test_unwritable_metrics_file_warns_once_and_training_goes_on(tmp_path: Path) -> None:
    run = torchrun(
        tmp_path,
        2,
        EXAMPLE,
        ["--steps", "2"],
        plan=FIXTURES / "dp2_zero0.json",
        env={"GPUPLANE_METRICS_FILE": str(tmp_path / "no-such-dir" / "steps.jsonl")},
        timeout=120,
    )
    assert run.returncode == 0, run.output[-3000:]
    assert run.output.count("cannot write step metrics") == 1
    assert "step 2 loss" in run.output


def test_stalled_rank_fails_its_peers_after_the_collective_timeout(tmp_path: Path) -> None:
    # Rank 1 stalls (alive, silent) before step 2; rank 0 waits in the all-reduce for the 5 s timeout, then fails.
    run = torchrun(
        tmp_path,
        2,
        FAULTS,
        ["3"],
        plan=FIXTURES / "dp2_zero0.json",
        env={"GPUPLANE_TEST_HANG_RANK": "1", "GPUPLANE_TEST_HANG_STEP": "1", "GPUPLANE_COLLECTIVE_TIMEOUT_S": "5"},
        # The stalled rank sleeps 600 s: the run ending well before that, with the timeout's message, is the
        # proof that nothing waits for it (no wall-clock bound: the start-up alone varies with the machine's load).
        timeout=500,
    )
    assert run.returncode != 0, run.output[-3000:]
    assert "rank 1 stalls before step 2" in run.output
    assert "step 2: a collective failed; a peer rank died or did not answer within the collective timeout (5 s)" in (
        run.output
    ), run.output[-3000:]


def test_a_node_that_never_joins_fails_the_rendezvous_within_its_bound(tmp_path: Path) -> None:
    """The service renders ``--rdzv-conf=timeout=N`` for multi-node jobs (src/jobs/launch_specs.rs): torchrun then
    gives up on a peer that never arrives after N seconds, with an error the agent reports as the job's reason,
    instead of retrying for its default 10 minutes."""
    import subprocess
    import sys
    import time

    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes=2",
            "--nproc-per-node=1",
            "--node-rank=0",
            "--master-addr=127.0.0.1",
            "--master-port=29977",
            "--rdzv-conf=timeout=5",
            "--no-python",
            "/bin/true",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "DistStoreError: Timed out after" in proc.stdout and "1/2 clients joined" in proc.stdout, proc.stdout[-2000:]
    assert time.monotonic() - started < 60, "bounded by the rendezvous timeout, not torchrun's 600 s default"
