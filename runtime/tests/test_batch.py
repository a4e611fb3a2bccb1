"""Batch generation: shards, outputs, refusals, progress and resuming, with a real (tiny) model on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.batch_runs import part_records, run_replica, write_lines

from gpuplane_runtime.batch import Shard, done_indices, read_inputs


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


def run(model: Path, inputs: Path, out: Path, work: Path, replica: int, replicas: int) -> str:
    argv = ["--input", str(inputs), "--output", str(out), "--model", str(model), "--max-new-tokens", "5"]
    argv += ["--batch-size", "2"]
    return run_replica("gpuplane_runtime.batch", argv, work / f"progress-{replica}.json", replica, replicas)


def test_shards_come_from_torchrun_or_the_launch() -> None:
    assert Shard.from_env({"RANK": "3", "WORLD_SIZE": "4", "NODE_RANK": "0", "NNODES": "1"}) == Shard(3, 4)
    assert Shard.from_env({"NODE_RANK": "1", "NNODES": "2"}) == Shard(1, 2)
    assert Shard.from_env({}) == Shard(0, 1)
    with pytest.raises(ValueError):
        Shard.from_env({"NODE_RANK": "2", "NNODES": "2"})
    assert [i for i in range(7) if Shard(1, 3).takes(i)] == [1, 4]
    assert Shard(1, 3).part_name() == "part-00001-of-00003.jsonl"


def test_two_replicas_answer_every_line_once_and_a_restart_resumes(tiny_model: Path, tmp_path: Path) -> None:
    lines = [{"prompt": "hello"}, {"prompt": "hello"}, {"prompt": "abc"}, "not json", {"text": "x"}, {"prompt": "z"}]
    inputs = write_lines(tmp_path / "in.jsonl", lines)
    out = tmp_path / "out"
    # Replica 1 was stopped after its first answer: its part file has it, and it is not answered again.
    out.mkdir()
    (out / "part-00001-of-00002.jsonl").write_text(json.dumps({"index": 1, "output": "kept"}) + '\n{"index": 3')
    said = run(tiny_model, inputs, out, tmp_path, 0, 2)
    assert "3 inputs, 0 done before, 3 to go" in said
    said = run(tiny_model, inputs, out, tmp_path, 1, 2)
    assert "3 inputs, 1 done before, 2 to go" in said

    answers = part_records(out)
    assert sorted(answers) == list(range(len(lines)))
    assert answers[1]["output"] == "kept", "resumed: not answered again"
    assert "not JSON" in answers[3]["error"] and '"prompt"' in answers[4]["error"]
    assert all(isinstance(answers[i]["output"], str) for i in (0, 2, 5))
    for replica in (0, 1):
        progress = json.loads((tmp_path / f"progress-{replica}.json").read_text())
        assert progress == {"done": 3, "total": 3}
    # Greedy: the same prompt gives the same answer, whichever replica and batch it was in.
    rerun = tmp_path / "again"
    run(tiny_model, inputs, rerun, tmp_path, 0, 1)
    rerun_lines = (rerun / "part-00000-of-00001.jsonl").read_text().splitlines()
    again = {json.loads(x)["index"]: json.loads(x) for x in rerun_lines}
    assert again[0]["output"] == answers[0]["output"] == again[1]["output"]
    assert done_indices(out / "part-00001-of-00002.jsonl") == {1, 3, 5}
    assert [i for i, _, _ in read_inputs(inputs, Shard(0, 2))] == [0, 2, 4]
