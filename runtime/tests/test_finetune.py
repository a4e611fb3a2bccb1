"""Fine-tunes from a pretrained checkpoint, exported and loaded back by Hugging Face and PEFT; the pipeline's
memory under 1F1B; checkpoints that do not fit the model refused on every rank, naming the tensor.

All under real torchrun (CPU, gloo), each scenario one run of a script in tests/scripts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import EXAMPLE, SCRIPTS, torchrun
from support import zoo

FINETUNES = {
    # LoRA with tensor, sequence and pipeline parallelism: column- and row-wise adapters split with their base
    "lora_tp2_pp2_sp": ["--mode", "lora", "--tp", "2", "--pp", "2", "--sp"],
    # LoRA with 2-D FSDP and tensor parallelism; a tied embedding under a pipeline
    "lora_tp2_dp2_zero1": ["--mode", "lora", "--tp", "2", "--dp", "2", "--zero", "1", "--sp"],
    "lora_pp2_dp2_tied": ["--mode", "lora", "--pp", "2", "--dp", "2", "--tied"],
    # a full fine-tune under ZeRO-3, exported in shards (a pipeline's export is the LoRA runs' merged model)
    "full_dp4_zero3_tied": ["--mode", "full", "--dp", "4", "--zero", "3", "--tied"],
}


@pytest.fixture(scope="module", params=list(FINETUNES))
def finetune(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Any]:
    name = request.param
    tmp = tmp_path_factory.mktemp(name)
    run = torchrun(tmp, 4, SCRIPTS / "finetune_export.py", [*FINETUNES[name], "--work", str(tmp)], plan=None)
    assert run.returncode == 0, run.output[-4000:]
    return name, json.loads((tmp / "result.json").read_text())


def test_loss_curve_matches_single_process(finetune: tuple[str, Any]) -> None:
    name, result = finetune
    assert result["loss_err"] < 1e-5, (name, result["losses"], result["expected"])


def test_export_loads_back(finetune: tuple[str, Any]) -> None:
    name, result = finetune
    if name.startswith("lora"):
        # PEFT loads the adapter; its logits are the single-process PEFT model's after the same steps.
        assert {"adapter_config.json", "adapter_model.safetensors", "merged"} <= set(result["files"])
        assert result["adapter_logits_err"] < 1e-5, result
        assert result["merged_logits_err"] < 1e-5, result
        # The base model stayed bit-identical to the checkpoint on every rank.
        assert result["base_changed"] == 0
    else:
        # Sharded (the test asks for 100 kB shards), with the index, the config and the tokenizer files.
        files = set(result["files"])
        assert {"config.json", "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json"} <= files
        assert sum(f.startswith("model-") for f in files) >= 2
        assert result["exported_logits_err"] < 1e-5, result


def test_one_f_one_b_holds_activations_flat_while_gpipe_grows(tmp_path: Path) -> None:
    out = tmp_path / "memory.json"
    run = torchrun(tmp_path, 2, SCRIPTS / "pipeline_memory.py", ["--out", str(out)], plan=None)
    assert run.returncode == 0, run.output[-4000:]
    rows = {(r["schedule"], r["grad_accum"]): r for r in json.loads(out.read_text())}
    one_f = rows[("1f1b", 16)]["peak_saved_bytes"] / rows[("1f1b", 4)]["peak_saved_bytes"]
    gpipe = rows[("gpipe", 16)]["peak_saved_bytes"] / rows[("gpipe", 4)]["peak_saved_bytes"]
    assert one_f < 1.05, rows  # flat: the first stage holds min(pp, m) = 2 micro-batches either way
    assert gpipe > 3.0, rows  # GPipe holds every micro-batch until the backward
    assert rows[("1f1b", 16)]["in_flight"] == 2 and rows[("gpipe", 16)]["in_flight"] == 16
    # The same computations in another order: the same loss.
    for accum in (4, 16):
        assert abs(rows[("1f1b", accum)]["loss"] - rows[("gpipe", accum)]["loss"]) < 1e-6


# --- checkpoints that do not fit the model ---------------------------------------------------------------------


def damaged_checkpoint(directory: Path, damage: str) -> None:
    from safetensors.torch import save_file

    model = zoo.build(zoo.config("llama"))
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if damage == "missing":
        del state["model.layers.2.mlp.up_proj.weight"]
    elif damage == "shape":
        state["model.layers.1.self_attn.k_proj.weight"] = torch.zeros(8, zoo.HIDDEN)
    elif damage == "extra":
        state["model.layers.9.mlp.up_proj.weight"] = torch.zeros(4, 4)
    directory.mkdir()
    save_file(state, str(directory / "model.safetensors"), metadata={"format": "pt"})
    model.config.save_pretrained(directory)


DAMAGES = {
    "missing": r"has no tensor `model\.layers\.2\.mlp\.up_proj\.weight` \(the model needs \[128, 64\]\)",
    "shape": r"tensor `model\.layers\.1\.self_attn\.k_proj\.weight` is \[8, 64\] in the checkpoint .* but \[32, 64\]",
    "extra": r"has tensor `model\.layers\.9\.mlp\.up_proj\.weight`, which the model does not have",
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_checkpoint_that_does_not_fit_names_the_tensor(tmp_path: Path, damage: str) -> None:
    from gpuplane_runtime.models.build import build_meta
    from gpuplane_runtime.weights.loading import check_checkpoint, expected_tensors
    from gpuplane_runtime.weights.sources import Checkpoint

    damaged_checkpoint(tmp_path / "model", damage)
    model = build_meta(zoo.config("llama"))
    problems = check_checkpoint(expected_tensors(model, model.config, None), Checkpoint(tmp_path / "model"), set())
    assert len(problems) == 1 and re.search(DAMAGES[damage], problems[0]), problems


def test_a_checkpoint_that_does_not_fit_fails_every_rank_before_any_read(tmp_path: Path) -> None:
    damaged_checkpoint(tmp_path / "model", "missing")
    run = torchrun(
        tmp_path, 2, EXAMPLE, ["--steps", "1", "--model", str(tmp_path / "model")], plan=FIXTURES_DP2, timeout=180
    )
    assert run.returncode != 0
    # Every rank fails with the same message (the ranks agree before any of them reads a weight).
    found = re.findall(r"CheckpointError: gpuplane_runtime: cannot load the model \(rank 0\): (.*)", run.output)
    assert len(found) == 2, run.output[-4000:]
    assert re.search(DAMAGES["missing"], found[0]), found[0]


FIXTURES_DP2 = Path(__file__).resolve().parent / "fixtures" / "dp2_zero0.json"
