"""Batch generation: a JSONL file of prompts through data-parallel replicas of a causal language model.

Run on every node of a job (``python -m gpuplane_runtime.batch --input IN.jsonl --output OUT_DIR --model M``),
each replica takes its share of the lines (line ``i`` goes to replica ``i % replicas``: ``RANK``/``WORLD_SIZE``
under torchrun, else the launch's ``NODE_RANK``/``NNODES``), generates greedily in batches, and appends one line
per input to ``OUT_DIR/part-RRRRR-of-WWWWW.jsonl``: ``{"index": i, "output": "..."}`` (or ``"error"`` for a line
that is not a JSON object with a ``prompt`` string). Lines already in its part file are skipped, so a restarted
job resumes where it stopped. After each batch it writes its progress (``{"done": n, "total": m}``, atomically)
to ``GPUPLANE_PROGRESS_FILE``, which the node's agent reads and the job's status shows, summed over its parts.
The sharding, reading, resuming and progress (``start_replica``, ``Replica.run``) serve ``gpuplane_runtime.images``
as well.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

PROGRESS_FILE_ENV = "GPUPLANE_PROGRESS_FILE"
DEFAULT_PROGRESS_FILE = "gpuplane_progress.json"
T = TypeVar("T")


@dataclass(frozen=True)
class Shard:
    """Which share of the input this replica takes."""

    replica: int
    replicas: int

    @staticmethod
    def from_env(env: dict[str, str] | None = None) -> Shard:
        env = dict(os.environ) if env is None else env
        if "RANK" in env and "WORLD_SIZE" in env:
            replica, replicas = int(env["RANK"]), int(env["WORLD_SIZE"])
        else:
            replica, replicas = int(env.get("NODE_RANK", "0")), int(env.get("NNODES", "1"))
        if not 0 <= replica < replicas:
            raise ValueError(f"replica {replica} of {replicas}: the launch's ranks are inconsistent")
        return Shard(replica, replicas)

    def takes(self, index: int) -> bool:
        return index % self.replicas == self.replica

    def part_name(self) -> str:
        return f"part-{self.replica:05d}-of-{self.replicas:05d}.jsonl"


class Refused(ValueError):
    """An input line this job cannot take; the message says why, and becomes the line's ``"error"``."""


def prompt_of(record: Any, index: int) -> str:
    """The ``prompt`` string of a line's JSON value."""
    prompt = record.get("prompt") if isinstance(record, dict) else None
    if not isinstance(prompt, str):
        raise Refused(f'line {index + 1} has no "prompt" string')
    return prompt


def read_lines(path: Path, shard: Shard, parse: Callable[[Any, int], T]) -> list[tuple[int, T | None, str | None]]:
    """This replica's lines, each parsed: (index, what ``parse`` made of it, or None and why the line is refused)."""
    taken: list[tuple[int, T | None, str | None]] = []
    with path.open(encoding="utf-8") as lines:
        for index, line in enumerate(lines):
            if not shard.takes(index):
                continue
            try:
                taken.append((index, parse(json.loads(line), index), None))
            except json.JSONDecodeError as err:
                taken.append((index, None, f"line {index + 1} is not JSON: {err.msg}"))
            except Refused as err:
                taken.append((index, None, str(err)))
    return taken


def read_inputs(path: Path, shard: Shard) -> list[tuple[int, str | None, str | None]]:
    """This replica's lines: (index, prompt, or None and why the line is refused)."""
    return read_lines(path, shard, prompt_of)


def done_indices(part: Path) -> set[int]:
    """Indices already answered in a part file (a line cut off by a crash is ignored and answered again)."""
    done: set[int] = set()
    if not part.exists():
        return done
    with part.open(encoding="utf-8") as lines:
        for line in lines:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and isinstance(record.get("index"), int):
                done.add(record["index"])
    return done


def write_progress(path: Path, done: int, total: int) -> None:
    """``{"done", "total"}``, replaced atomically (the agent never reads half a file)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"done": done, "total": total}), encoding="utf-8")
    os.replace(tmp, path)


def batch_arguments(prog: str, description: str | None) -> argparse.ArgumentParser:
    """The options every batch module has: ``--input``, ``--output``, ``--model`` and ``--batch-size``."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--input", required=True, type=Path, help='JSONL: one {"prompt": ...} per line')
    parser.add_argument("--output", required=True, type=Path, help="directory for the part files")
    parser.add_argument("--model", default=os.environ.get("GPUPLANE_MODEL"), help="checkpoint directory or hub id")
    parser.add_argument("--batch-size", type=int, default=8)
    return parser


def check_batch_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if not args.model:
        parser.error("--model (or GPUPLANE_MODEL) names the model")
    if args.batch_size < 1:
        parser.error("--batch-size is at least 1")


@dataclass
class Replica(Generic[T]):
    """One replica's share of a batch job: its lines, its part file, and its progress file."""

    program: str
    shard: Shard
    inputs: list[tuple[int, T | None, str | None]]
    part: Path
    progress: Path
    todo: list[tuple[int, T | None, str | None]]

    @property
    def done(self) -> int:
        return len(self.inputs) - len(self.todo)

    def run(self, batch_size: int, answer: Callable[[list[tuple[int, T]]], dict[int, dict[str, Any]]]) -> None:
        """Answer what is left in batches: ``answer`` gives each taken line's record (without its index), and the
        part file gets one line per input, refusals included, before the progress counts them."""
        done = self.done
        # A line cut off by a crash is left as it is (never read as an answer): what follows starts on its own line.
        part = self.part
        cut_off = part.exists() and part.stat().st_size > 0 and not part.read_bytes().endswith(b"\n")
        with part.open("a", encoding="utf-8") as out:
            if cut_off:
                out.write("\n")
            for start in range(0, len(self.todo), batch_size):
                batch = self.todo[start : start + batch_size]
                taken = [(index, item) for index, item, _ in batch if item is not None]
                answers = answer(taken) if taken else {}
                for index, item, error in batch:
                    record = answers[index] if item is not None else {"error": error or "refused"}
                    out.write(json.dumps({"index": index, **record}) + "\n")
                out.flush()
                done += len(batch)
                write_progress(self.progress, done, len(self.inputs))
        print(f"{self.program}: replica {self.shard.replica}/{self.shard.replicas}: wrote {part}", flush=True)


def start_replica(program: str, input_path: Path, output: Path, parse: Callable[[Any, int], T]) -> Replica[T]:
    """This replica's share (from the launch's ranks), what its part file already answers, its first progress."""
    shard = Shard.from_env()
    inputs = read_lines(input_path, shard, parse)
    output.mkdir(parents=True, exist_ok=True)
    part = output / shard.part_name()
    already = done_indices(part)
    todo = [item for item in inputs if item[0] not in already]
    progress = Path(os.environ.get(PROGRESS_FILE_ENV) or DEFAULT_PROGRESS_FILE)
    replica = Replica(program, shard, inputs, part, progress, todo)
    write_progress(replica.progress, replica.done, len(inputs))
    print(
        f"{program}: replica {shard.replica}/{shard.replicas}: {len(inputs)} inputs, "
        f"{replica.done} done before, {len(todo)} to go",
        flush=True,
    )
    return replica


def main(argv: list[str] | None = None) -> int:
    parser = batch_arguments("python -m gpuplane_runtime.batch", __doc__)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    args = parser.parse_args(argv)
    check_batch_arguments(parser, args)
    if args.max_new_tokens < 1:
        parser.error("--max-new-tokens is at least 1")

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    replica = start_replica("gpuplane_runtime.batch", args.input, args.output, prompt_of)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(args.model)  # type: ignore[no-untyped-call]
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(args.model)
    model = model.to(device).eval()  # type: ignore[arg-type]

    def answer(prompts: list[tuple[int, str]]) -> dict[int, dict[str, Any]]:
        encoded = tokenizer([p for _, p in prompts], return_tensors="pt", padding=True).to(device)
        with torch.no_grad():
            generated = model.generate(
                **encoded,
                max_new_tokens=args.max_new_tokens,
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id,
            )
        new = generated[:, encoded["input_ids"].shape[1] :]
        texts = tokenizer.batch_decode(new, skip_special_tokens=True)
        return {index: {"output": text} for (index, _), text in zip(prompts, texts, strict=True)}

    replica.run(args.batch_size, answer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
