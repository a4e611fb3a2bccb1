"""Checkpoints survive a change of plan: a tiny Llama trained under one plan (real torchrun, 4 processes, CPU,
gloo, fp32) saves through torch.distributed.checkpoint; a new job under another plan resumes from it with one
call (parallelize finds $GPUPLANE_CHECKPOINT_DIR) and continues from the same step, with the same data position,
learning rate schedule and optimizer state: its losses equal the uninterrupted run's. A checkpoint of another
model fails on every rank with a message naming the parameter, never a hang."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, TESTS, Run, torchrun

SCRIPT = TESTS / "scripts" / "train_resume.py"
STEPS = 5
TOLERANCE = 2e-3


def _run(
    tmp: Path,
    plan: str,
    ckpt: Path,
    metrics: str,
    *,
    save_at: str = "",
    args: list[str] | None = None,
    notice_at: int = 0,
) -> Run:
    nproc = 2 if plan == "dp2_zero0" else 4
    env = {"GPUPLANE_CHECKPOINT_DIR": str(ckpt), "GPUPLANE_METRICS_FILE": metrics, "GPUPLANE_TEST_SAVE_AT": save_at}
    if notice_at:
        env |= {"GPUPLANE_STOP_NOTICE_FILE": str(tmp / f"notice-{metrics}"), "GPUPLANE_TEST_NOTICE_AT": str(notice_at)}
    return torchrun(tmp, nproc, SCRIPT, ["--steps", str(STEPS), *(args or [])], plan=FIXTURES / f"{plan}.json", env=env)


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


def _losses(run: Run) -> dict[int, float]:
    return {int(m["step"]): float(m["loss"]) for m in run.metrics}  # type: ignore[call-overload, arg-type]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run | Path]:
    tmp = tmp_path_factory.mktemp("checkpoints")
    out: dict[str, Run | Path] = {"tmp": tmp}
    # Plan A uninterrupted, saving after step 2; plan B resumes from that checkpoint.
    out["tp2_dp2"] = _run(tmp, "tp2_dp2", tmp / "ckpt_a", "tp2_dp2.jsonl", save_at="2")
    # A copy of plan A's checkpoint with one shard's data overwritten, resumed under plan B.
    shutil.copytree(tmp / "ckpt_a", tmp / "ckpt_corrupt")
    shard = sorted((tmp / "ckpt_corrupt" / "step-00000002").glob("*.distcp"))[0]
    data = bytearray(shard.read_bytes())
    data[len(data) // 4 :] = b"\x00" * (len(data) - len(data) // 4)
    shard.write_bytes(bytes(data))
    out["corrupt_before"] = _digests(tmp / "ckpt_corrupt")  # type: ignore[assignment]
    out["corrupt"] = _run(tmp, "dp4_zero3", tmp / "ckpt_corrupt", "corrupt.jsonl")
    out["tp2_dp2->dp4_zero3"] = _run(tmp, "dp4_zero3", tmp / "ckpt_a", "resumed_dp4.jsonl")
    # A pipeline plan (each stage saves only its layers) saving after step 3, resumed under TP x PP.
    out["pp2_dp2"] = _run(tmp, "pp2_dp2", tmp / "ckpt_b", "pp2_dp2.jsonl", save_at="3")
    out["pp2_dp2->tp2_pp2"] = _run(tmp, "tp2_pp2", tmp / "ckpt_b", "resumed_tp2pp2.jsonl")
    # A stop notice after step 2 under tp2_dp2: every rank stops after step 3 with a checkpoint; dp4 resumes.
    out["noticed"] = _run(tmp, "tp2_dp2", tmp / "ckpt_c", "noticed.jsonl", notice_at=2)
    out["noticed->dp4_zero3"] = _run(tmp, "dp4_zero3", tmp / "ckpt_c", "after_notice.jsonl")
    # Another model (hidden 64, not 128) pointed at plan A's checkpoint.
    out["other_model"] = _run(tmp, "dp2_zero0", tmp / "ckpt_a", "other.jsonl", args=["--hidden", "64"])
    return out


def _ok(run: Run | Path) -> Run:
    assert isinstance(run, Run)
    assert run.returncode == 0, run.output[-4000:]
    return run


@pytest.mark.parametrize(
    ("source", "resumed", "saved_at"), [("tp2_dp2", "tp2_dp2->dp4_zero3", 2), ("pp2_dp2", "pp2_dp2->tp2_pp2", 3)]
)
def test_resume_under_another_plan_continues_the_same_training(
    runs: dict[str, Run | Path], source: str, resumed: str, saved_at: int
) -> None:
    before, after = _ok(runs[source]), _ok(runs[resumed])
    assert "test: starting at step 0, batch 0" in before.output
    # The step counter and the data position continue: no step lost or repeated.
    assert f"test: starting at step {saved_at}, batch {saved_at}" in after.output, after.output[-3000:]
    assert "resumed from checkpoint" in after.output and f"step-{saved_at:08d}" in after.output
    reference = _losses(runs["tp2_dp2"])  # type: ignore[arg-type]
    assert sorted(reference) == list(range(1, STEPS + 1))
    resumed_losses = _losses(after)
    assert sorted(resumed_losses) == list(range(saved_at + 1, STEPS + 1)), after.output[-3000:]
    for step, loss in resumed_losses.items():
        assert abs(loss - reference[step]) < TOLERANCE, (step, resumed_losses, reference)
    # The uninterrupted runs agree with each other although they saved after different steps: saving changes
    # nothing in the training.
    for step, loss in _losses(before).items():
        assert abs(loss - reference[step]) < TOLERANCE, (source, step, loss, reference)


def test_checkpoint_is_keyed_by_the_full_models_names(runs: dict[str, Run | Path]) -> None:
    from torch.distributed.checkpoint.filesystem import FileSystemReader

    _ok(runs["pp2_dp2"])
    tmp = runs["tmp"]
    assert isinstance(tmp, Path)
    root = tmp / "ckpt_b"
    assert (root / "latest").read_text().strip() == "step-00000003"
    stored = FileSystemReader(str(root / "step-00000003")).read_metadata().state_dict_metadata
    # Stage 1 held layers 2 and 3 as its layers 0 and 1; the checkpoint names them as the full model does.
    for layer in range(4):
        assert f"model.model.layers.{layer}.mlp.down_proj.weight" in stored
        assert f"optim.state.model.layers.{layer}.self_attn.q_proj.weight.exp_avg" in stored
    assert getattr(stored["model.lm_head.weight"], "size", None) == (256, 128)
    assert getattr(stored["model.model.embed_tokens.weight"], "size", None) == (256, 128)


def test_checkpoint_of_another_model_fails_clearly(runs: dict[str, Run | Path]) -> None:
    run = runs["other_model"]
    assert isinstance(run, Run)
    assert run.returncode != 0
    assert "gpuplane_runtime: cannot load the checkpoint" in run.output, run.output[-4000:]
    assert "model.embed_tokens.weight` has shape [256, 128] in the checkpoint" in run.output, run.output[-4000:]
    assert "[256, 64] in this model" in run.output
    assert "collective timeout" not in run.output.split("cannot load the checkpoint")[1][:400]
    assert run.metrics == []


def test_a_corrupt_checkpoint_fails_every_rank_clearly_and_is_left_as_it_was(runs: dict[str, Run | Path]) -> None:
    run = runs["corrupt"]
    assert isinstance(run, Run)
    assert run.returncode != 0, run.output[-4000:]
    assert "gpuplane_runtime: cannot load the checkpoint in" in run.output, run.output[-4000:]
    assert "its data does not read back" in run.output and "it is left as it was" in run.output
    # Every rank failed on the same error, none waited out the collective timeout on a peer.
    assert run.output.count("its data does not read back") >= 4, run.output[-4000:]
    assert "ran past" not in run.output and "timed out" not in run.output.lower(), run.output[-4000:]
    assert run.metrics == [], "no step ran"
    tmp = runs["tmp"]
    assert isinstance(tmp, Path)
    # Nothing was written, removed or moved: the next try (a fixed shard, another plan) finds the same files.
    assert _digests(tmp / "ckpt_corrupt") == runs["corrupt_before"]
    assert (tmp / "ckpt_corrupt" / "latest").read_text().strip() == "step-00000002"


def test_a_stop_notice_checkpoints_every_rank_at_one_step_and_the_job_resumes_under_another_plan(
    runs: dict[str, Run | Path],
) -> None:
    noticed, resumed, whole = _ok(runs["noticed"]), _ok(runs["noticed->dp4_zero3"]), _ok(runs["tp2_dp2"])
    # The notice appeared after step 2; the step-3 all-reduce carried it to every rank: all stopped after step 3.
    assert [m["step"] for m in noticed.metrics] == [1, 2, 3], noticed.output[-3000:]
    assert "stop notice (test, 60 s of grace): checkpointing at step 3" in noticed.output
    assert "test: starting at step 3, batch 3" in resumed.output, resumed.output[-3000:]
    assert [m["step"] for m in resumed.metrics] == [4, 5]
    # The same training: the resumed steps' losses are the uninterrupted run's.
    assert all(abs(_losses(resumed)[s] - _losses(whole)[s]) <= TOLERANCE for s in (4, 5)), (
        _losses(resumed),
        _losses(whole),
    )
