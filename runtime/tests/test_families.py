"""Every decoder family the runtime splits computes what its own single-process forward computes, under every
kind of plan, loaded sharded from a Hugging Face checkpoint; the others are refused at start, naming why.

Each plan runs once under real torchrun (4 processes, CPU, gloo) over every family, tied and untied
(tests/scripts/exactness.py): the losses of three SGD steps and every rank's parameter shards after them match a
single-process reference in fp32 (SGD, unlike AdamW, passes a gradient off by a constant factor through), the
logits before training match where the plan has no pipeline, and every parameter box several ranks hold is
bit-identical on all of them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import SCRIPTS, torchrun
from support import zoo

from gpuplane_runtime import PlanMismatchError, UnsupportedModelError
from gpuplane_runtime.models import families

PLANS = {
    # data parallelism alone: FSDP2, ZeRO-3
    "dp4_zero3": ["--dp", "4", "--zero", "3"],
    # tensor + sequence parallelism with 2-D FSDP (ZeRO-1)
    "tp2_dp2_sp": ["--tp", "2", "--dp", "2", "--zero", "1", "--sp"],
    # pipeline (1F1B, 4 micro-batches) with tensor and sequence parallelism
    "tp2_pp2_sp": ["--tp", "2", "--pp", "2", "--sp", "--micro", "1", "--accum", "4"],
    # interleaved 1F1B (2 virtual stages per rank) with FSDP
    "pp2_vp2_dp2": ["--pp", "2", "--vp", "2", "--dp", "2", "--zero", "1", "--micro", "1", "--accum", "4"],
}


@pytest.fixture(scope="module", params=list(PLANS))
def results(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[Any]]:
    name = request.param
    tmp = tmp_path_factory.mktemp(name)
    out = tmp / "results.jsonl"
    run = torchrun(tmp, 4, SCRIPTS / "exactness.py", [*PLANS[name], "--out", str(out)], plan=None, timeout=600)
    assert run.returncode == 0, run.output[-4000:]
    return name, [json.loads(line) for line in out.read_text().splitlines()]


def test_every_family_tied_and_untied_matches_its_own_forward(results: tuple[str, list[Any]]) -> None:
    name, rows = results
    assert {(r["family"], r["tied"]) for r in rows} == {(f, t) for f in zoo.FAMILIES for t in (False, True)}
    for r in rows:
        where = (name, r["family"], "tied" if r["tied"] else "untied")
        assert r["loss_err"] < 1e-5, (where, r)
        assert r["param_err"] < 2e-5, (where, r)
        if r["logits_err"] is not None:
            assert r["logits_err"] < 2e-5, (where, r)
        assert r["peers_identical"], where


def test_pipelines_hold_what_the_planner_counts(results: tuple[str, list[Any]]) -> None:
    name, rows = results
    # Rank 0 is the first stage, which holds the most: 1F1B min(pp, m) = 2 of 4 micro-batches; interleaved
    # (p 2, v 2): 2 (p - 1) + (v - 1) p + 1 = 5 chunk-passes, i.e. p + (p - 1) / v = 2.5 stages' worth.
    expected = {"tp2_pp2_sp": 2, "pp2_vp2_dp2": 5}.get(name, 0)
    assert {r["in_flight"] for r in rows} == {expected}


# --- refused at start, before any process group (checks that need no other rank) -------------------------------


def config_of(model_type: str, **extra: Any) -> Any:
    import transformers as tf

    classes = {"gpt2": tf.GPT2Config, "gpt_neox": tf.GPTNeoXConfig, "opt": tf.OPTConfig, "mixtral": tf.MixtralConfig}
    return classes[model_type](**extra)


@pytest.mark.parametrize("model_type", ["gpt2", "gpt_neox", "opt"])
def test_families_it_does_not_know_are_refused_when_split(model_type: str) -> None:
    cfg = config_of(model_type)
    with pytest.raises(UnsupportedModelError, match=f"cannot split a '{model_type}' model .tp 2, pp 1."):
        families.check_supported(cfg, tp=2, pp=1, lora=False)
    with pytest.raises(UnsupportedModelError, match="run with data parallelism alone"):
        families.check_supported(cfg, tp=1, pp=2, lora=False)
    # Data parallelism alone runs the model's own forward: exact by construction.
    assert families.check_supported(cfg, tp=1, pp=1, lora=False) is None


def test_mixtures_of_experts_are_refused_under_every_plan() -> None:
    cfg = config_of("mixtral", num_local_experts=8)
    for tp, pp in ((1, 1), (2, 1), (1, 2)):
        with pytest.raises(UnsupportedModelError, match=r"mixture-of-experts.*megatron"):
            families.check_supported(cfg, tp=tp, pp=pp, lora=False)


def test_what_a_family_cannot_apply_is_named() -> None:
    gemma3 = zoo.config("gemma3")
    gemma3.use_bidirectional_attention = True
    with pytest.raises(UnsupportedModelError, match="bidirectional attention"):
        families.check_supported(gemma3, tp=1, pp=2, lora=False)
    with pytest.raises(UnsupportedModelError, match=r"LoRA on phi3: .*fused \(self_attn.qkv_proj, mlp.gate_up_proj\)"):
        families.check_supported(zoo.config("phi3"), tp=1, pp=1, lora=True)


def test_a_plan_made_for_another_model_is_refused() -> None:
    cfg = zoo.config("llama")
    families.check_arch(cfg, {"layers": zoo.LAYERS, "hidden": zoo.HIDDEN, "vocab": zoo.VOCAB}, "custom")
    with pytest.raises(PlanMismatchError, match=r"made for another model \(llama3-8b\): its `layers` is 32"):
        families.check_arch(cfg, {"layers": 32, "hidden": zoo.HIDDEN}, "llama3-8b")


def test_every_family_in_the_zoo_is_supported() -> None:
    for family in zoo.FAMILIES:
        found = families.check_supported(zoo.config(family), tp=2, pp=2, lora=family != "phi3")
        assert found is not None and found.name == family


def test_the_capabilities_the_service_reads_are_the_runtimes() -> None:
    # src/jobs reads models/capabilities.json to plan only what the runtime applies.
    capabilities = json.loads((Path(families.__file__).parent / "capabilities.json").read_text())
    assert capabilities["split_families"] == sorted(t for f in families.FAMILIES for t in f.model_types)
    assert capabilities["lora_refused_families"] == sorted(
        t for f in families.FAMILIES if not f.lora for t in f.model_types
    )
    assert capabilities["mixture_of_experts"] is False and capabilities["context_parallel"] is False
