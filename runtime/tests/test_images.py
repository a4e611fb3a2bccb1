"""Batch image generation: shards, images, seeds, refusals, resuming and progress, with a real (tiny) Stable
Diffusion pipeline made here and run on the CPU."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.batch_runs import part_records, run_replica, write_lines
from support.tiny_diffusion import make_tiny_pipeline

from gpuplane_runtime import images
from gpuplane_runtime.batch import Refused, Shard, read_lines

LINES: list[Any] = [
    {"prompt": "a red cat"},
    {"prompt": "a red cat"},  # seed 0 + 1
    {"prompt": "a blue dog", "negative_prompt": "blurry", "seed": 7},
    "not json",
    {"text": "no prompt"},
    {"prompt": "a red cat", "seed": 1},  # the same prompt and seed as line 1: the same image
    {"prompt": "zz qq", "seed": 1},  # line 1's seed, another prompt
    {"prompt": "a green fox", "seed": -1},
]
IMAGES = [0, 1, 2, 5, 6]
STEPS = ["--num-inference-steps", "2"]


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny models: torch's threads would only fight over a busy machine's cores (this module's runs are in-process)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_pipeline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_pipeline(tmp_path_factory.mktemp("pipeline") / "model")


def args(model: Path, inputs: Path, out: Path, batch_size: int) -> list[str]:
    return ["--input", str(inputs), "--output", str(out), "--model", str(model), "--batch-size", str(batch_size)]


def run_here(monkeypatch: pytest.MonkeyPatch, argv: list[str], progress: Path, replica: int, replicas: int) -> None:
    """The module in this process (torch and diffusers imported once), as replica ``replica`` of ``replicas``."""
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setenv("NODE_RANK", str(replica))
    monkeypatch.setenv("NNODES", str(replicas))
    monkeypatch.setenv("GPUPLANE_PROGRESS_FILE", str(progress))
    assert images.main(argv) == 0


def pixels(out: Path, record: dict[str, Any]) -> np.ndarray[Any, np.dtype[np.int16]]:
    from PIL import Image

    with Image.open(out / record["image"]) as image:
        assert image.format == "PNG" and image.size == (32, 32)
        return np.asarray(image.convert("RGB"), dtype=np.int16)


def test_lines_are_refused_with_a_reason(tmp_path: Path) -> None:
    inputs = write_lines(
        tmp_path / "in.jsonl", [*LINES, {"prompt": "x", "negative_prompt": 3}, {"prompt": "x", "seed": True}]
    )
    taken = read_lines(inputs, Shard(0, 1), images.image_prompt_of)
    assert [i for i, item, _ in taken if item is not None] == IMAGES
    assert taken[2][1] == images.ImagePrompt("a blue dog", "blurry", 7)
    errors = {i: error for i, _, error in taken if error is not None}
    assert "not JSON" in errors[3] and '"prompt"' in errors[4] and '"seed"' in errors[7]
    assert '"negative_prompt"' in errors[8] and '"seed"' in errors[9]
    with pytest.raises(Refused):
        images.image_prompt_of({"prompt": "x", "seed": 2**64}, 0)


def test_two_replicas_draw_every_image_once_as_one_would_and_a_restart_resumes(
    tiny_pipeline: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = write_lines(tmp_path / "in.jsonl", LINES)
    out = tmp_path / "out"
    # Replica 0 through the command line, in a process of its own.
    argv = [*args(tiny_pipeline, inputs, out, 2), *STEPS]
    said = run_replica("gpuplane_runtime.images", argv, tmp_path / "progress-0.json", 0, 2)
    assert "replica 0/2: 4 inputs, 0 done before, 4 to go" in said
    run_here(monkeypatch, [*args(tiny_pipeline, inputs, out, 2), *STEPS], tmp_path / "progress-1.json", 1, 2)
    assert "replica 1/2: 4 inputs, 0 done before, 4 to go" in capsys.readouterr().out

    answers = part_records(out)
    assert sorted(answers) == list(range(len(LINES)))
    assert "not JSON" in answers[3]["error"] and '"prompt"' in answers[4]["error"] and '"seed"' in answers[7]["error"]
    assert {i: answers[i]["seed"] for i in IMAGES} == {0: 0, 1: 1, 2: 7, 5: 1, 6: 1}
    assert {i: answers[i]["image"] for i in IMAGES} == {i: f"images/{i:08d}.png" for i in IMAGES}
    assert sorted(p.name for p in (out / "images").iterdir()) == [f"{i:08d}.png" for i in IMAGES], "no temp files"
    for replica in (0, 1):
        assert json.loads((tmp_path / f"progress-{replica}.json").read_text()) == {"done": 4, "total": 4}

    drawn = {i: pixels(out, answers[i]) for i in IMAGES}
    # The same prompt and seed (lines 1 and 5, on two replicas) give the same image; another seed or another
    # prompt do not.
    assert np.abs(drawn[1] - drawn[5]).max() <= 2
    assert np.abs(drawn[0] - drawn[1]).mean() > 1, "another seed, the same image"
    assert np.abs(drawn[1] - drawn[6]).mean() > 1, "another prompt, the same image"

    # One replica, in other batches, draws the same images.
    alone = tmp_path / "alone"
    run_here(monkeypatch, [*args(tiny_pipeline, inputs, alone, 3), *STEPS], tmp_path / "progress.json", 0, 1)
    again = part_records(alone)
    assert {i: again[i]["seed"] for i in IMAGES} == {i: answers[i]["seed"] for i in IMAGES}
    for i in IMAGES:
        assert np.abs(pixels(alone, again[i]) - drawn[i]).max() <= 2, f"image {i} depends on its replica or batch"

    # Replica 1 "crashed" after recording line 1, halfway through writing line 3's record: a restart keeps line 1
    # (its image untouched) and writes lines 3, 5 and 7 again.
    part = out / "part-00001-of-00002.jsonl"
    kept, cut, *_ = part.read_text().splitlines()
    part.write_text(kept + "\n" + cut[: len(cut) // 2])
    first = (out / "images/00000001.png").stat().st_mtime_ns
    capsys.readouterr()
    run_here(monkeypatch, [*args(tiny_pipeline, inputs, out, 2), *STEPS], tmp_path / "progress-1.json", 1, 2)
    assert "replica 1/2: 4 inputs, 1 done before, 3 to go" in capsys.readouterr().out
    assert part_records(out) == answers
    assert (out / "images/00000001.png").stat().st_mtime_ns == first
    assert np.abs(pixels(out, answers[5]) - drawn[5]).max() <= 2
    assert json.loads((tmp_path / "progress-1.json").read_text()) == {"done": 4, "total": 4}


def test_a_missing_model_or_diffusers_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = write_lines(tmp_path / "in.jsonl", LINES[:2])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    argv = args(tmp_path / "no-such-model", inputs, tmp_path / "out", 2)
    with pytest.raises(SystemExit) as exited:
        run_here(monkeypatch, argv, tmp_path / "progress.json", 0, 1)
    message = exited.value.code
    assert isinstance(message, str) and "\n" not in message, message
    assert message.startswith(
        f"gpuplane_runtime.images: cannot load a diffusion pipeline from {tmp_path}/no-such-model"
    )
    assert json.loads((tmp_path / "progress.json").read_text()) == {"done": 0, "total": 2}

    monkeypatch.setitem(sys.modules, "diffusers", None)  # what `import diffusers` finds when it is not installed
    with pytest.raises(SystemExit) as exited:
        run_here(monkeypatch, argv, tmp_path / "progress.json", 0, 1)
    assert isinstance(exited.value.code, str)
    assert exited.value.code.startswith("gpuplane_runtime.images: diffusers is not installed")
    assert "\n" not in exited.value.code
