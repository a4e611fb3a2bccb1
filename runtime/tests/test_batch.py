"""Batch generation: shards, outputs, refusals, progress and resuming, with a real (tiny) model on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuplane_runtime.batch import Shard, done_indices, read_inputs

SRC = Path(__file__).resolve().parent.parent / "src"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out = tmp_path_factory.mktemp("model")
    vocab = {c: i for i, c in enumerate(["<unk>", "<s>", "</s>"] + [chr(c) for c in range(32, 127)])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        model_input_names=["input_ids", "attention_mask"],
    )
    fast.save_pretrained(out)
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    LlamaForCausalLM(config).save_pretrained(out)
    return out


def run_replica(model: Path, inputs: Path, out: Path, work: Path, replica: int, replicas: int) -> str:
    env = dict(os.environ, NODE_RANK=str(replica), NNODES=str(replicas), PYTHONPATH=str(SRC))
    env.pop("RANK", None)
    env.pop("WORLD_SIZE", None)
    env["GPUPLANE_PROGRESS_FILE"] = str(work / f"progress-{replica}.json")
    argv = [sys.executable, "-m", "gpuplane_runtime.batch", "--input", str(inputs), "--output", str(out)]
    argv += ["--model", str(model), "--max-new-tokens", "5", "--batch-size", "2"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_shards_come_from_torchrun_or_the_launch() -> None:
    assert Shard.from_env({"RANK": "3", "WORLD_SIZE": "4", "NODE_RANK": "0", "NNODES": "1"}) == Shard(3, 4)
    assert Shard.from_env({"NODE_RANK": "1", "NNODES": "2"}) == Shard(1, 2)
    assert Shard.from_env({}) == Shard(0, 1)
    with pytest.raises(ValueError):
        Shard.from_env({"NODE_RANK": "2", "NNODES": "2"})
    assert [i for i in range(7) if Shard(1, 3).takes(i)] == [1, 4]
    assert Shard(1, 3).part_name() == "part-00001-of-00003.jsonl"


def test_two_replicas_answer_every_line_once_and_a_restart_resumes(tiny_model: Path, tmp_path: Path) -> None:
    inputs = tmp_path / "in.jsonl"
    lines = [{"prompt": "hello"}, {"prompt": "hello"}, {"prompt": "abc"}, "not json", {"text": "x"}, {"prompt": "z"}]
    inputs.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    out = tmp_path / "out"
    # Replica 1 was stopped after its first answer: its part file has it, and it is not answered again.
    out.mkdir()
    (out / "part-00001-of-00002.jsonl").write_text(json.dumps({"index": 1, "output": "kept"}) + '\n{"index": 3')
    said = run_replica(tiny_model, inputs, out, tmp_path, 0, 2)
    assert "3 inputs, 0 done before, 3 to go" in said
    said = run_replica(tiny_model, inputs, out, tmp_path, 1, 2)
    assert "3 inputs, 1 done before, 2 to go" in said

    answers: dict[int, dict[str, str]] = {}
    for part in sorted(out.glob("part-*.jsonl")):
        for line in part.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # the line cut off by the "crash"
            assert record["index"] not in answers, f"index {record['index']} answered twice"
            answers[record["index"]] = record
    assert sorted(answers) == list(range(len(lines)))
    assert answers[1]["output"] == "kept", "resumed: not answered again"
    assert "not JSON" in answers[3]["error"] and '"prompt"' in answers[4]["error"]
    assert all(isinstance(answers[i]["output"], str) for i in (0, 2, 5))
    for replica in (0, 1):
        progress = json.loads((tmp_path / f"progress-{replica}.json").read_text())
        assert progress == {"done": 3, "total": 3}
    # Greedy: the same prompt gives the same answer, whichever replica and batch it was in.
    rerun = tmp_path / "again"
    run_replica(tiny_model, inputs, rerun, tmp_path, 0, 1)
    rerun_lines = (rerun / "part-00000-of-00001.jsonl").read_text().splitlines()
    again = {json.loads(x)["index"]: json.loads(x) for x in rerun_lines}
    assert again[0]["output"] == answers[0]["output"] == again[1]["output"]
    assert done_indices(out / "part-00001-of-00002.jsonl") == {1, 3, 5}
    assert [i for i, _, _ in read_inputs(inputs, Shard(0, 2))] == [0, 2, 4]
