"""Host memory of loading a pretrained checkpoint on 4 ranks: sharded (each rank reads only its part) against the
whole model on every rank (``from_pretrained``, then the plan keeps a part), side by side in one run.

    venv=$(scripts/runtime-venv.sh | tail -n1)
    "$venv/bin/python" runtime/bench/load_memory.py          # ~1.1 GB, writes docs/benchmarks/runtime-load.md
    "$venv/bin/python" runtime/bench/load_memory.py --short  # ~40 MB, tp2 x pp2 only (CI: the bench still runs)

The checkpoint is generated: a Llama of 16 layers (hidden 1024, FFN 2816, 16 heads, vocabulary 32,000, untied),
fp32, in safetensors files of at most 400 MB with their index. Each plan runs under torchrun on 4 processes
(CPU, gloo). Each rank resets its peak resident set just before loading (``/proc/self/clear_refs``) and reads it
after (``VmHWM``): the growth is what loading cost that rank. Its *share* is the bytes of the parameters it keeps.
The target: growth <= 1.5 x share + 64 MB on every rank.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE.parent / "src"))

PLANS = {"dp4 ZeRO-3": (1, 1, 4, 3), "tp4": (4, 1, 1, 0), "pp4": (1, 4, 1, 0), "tp2 x pp2": (2, 2, 1, 0)}
MB = 1 << 20


def model_config(short: bool) -> dict[str, object]:
    if short:
        return dict(hidden_size=256, intermediate_size=704, num_hidden_layers=8, num_attention_heads=8,
                    num_key_value_heads=8, vocab_size=8000)  # fmt: skip
    return dict(hidden_size=1024, intermediate_size=2816, num_hidden_layers=16, num_attention_heads=16,
                num_key_value_heads=16, vocab_size=32000)  # fmt: skip


def write_checkpoint(directory: Path, short: bool) -> int:
    """Random fp32 weights, tensor by tensor, in files of at most 400 MB (10 MB short) and their index."""
    import torch
    from transformers import LlamaConfig

    from gpuplane_runtime.models.build import build_meta
    from gpuplane_runtime.weights.safetensors_io import SafetensorsWriter

    config = LlamaConfig(**model_config(short), tie_word_embeddings=False)
    meta = build_meta(config)
    tensors = [(name, torch.float32, tuple(p.shape)) for name, p in meta.named_parameters()]
    limit = (10 if short else 400) * MB
    files: list[list[tuple[str, torch.dtype, tuple[int, ...]]]] = [[]]
    size = 0
    for t in tensors:
        n = 4
        for d in t[2]:
            n *= d
        if files[-1] and size + n > limit:
            files.append([])
            size = 0
        files[-1].append(t)
        size += n
    weight_map = {}
    gen = torch.Generator().manual_seed(0)
    total = 0
    for i, members in enumerate(files):
        name = f"model-{i + 1:05d}-of-{len(files):05d}.safetensors"
        writer = SafetensorsWriter(directory / name, members, {"format": "pt"})
        for tname, _, shape in members:
            writer.write(tname, torch.randn(shape, generator=gen) * 0.02)
            weight_map[tname] = name
        writer.close()
        total += writer.total_bytes
    (directory / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map})
    )
    config.save_pretrained(directory)
    return total


WORKER = r"""
import json, os, sys, resource
import torch, torch.distributed as dist
sys.path.insert(0, os.environ["BENCH_SRC"])
import gpuplane_runtime
from gpuplane_runtime.weights.loading import local_box

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith(("VmHWM", "VmRSS")):
            yield line.split()[0][:-1], int(line.split()[1]) * 1024

dist.init_process_group("gloo")
tp, pp, dp, zero = (int(x) for x in os.environ["BENCH_PLAN"].split(","))
doc = {"version": 1, "seq_len": 64, "precision": "fp32", "plan": {"tp": tp, "pp": pp, "dp": dp, "cp": 1, "vp": 1,
       "micro_batch": 1, "grad_accum": max(pp, 1), "global_batch": dp * max(pp, 1), "zero_stage": zero,
       "sequence_parallel": False, "recompute": "none"}}
plan = gpuplane_runtime.parse_plan(doc, "bench")
path = os.environ["BENCH_CKPT"]
mode = os.environ["BENCH_MODE"]
# Both paths import transformers' model classes (~110 MB of Python modules, once per process, in any job that
# trains a transformers model) before the measurement: what is measured is the load.
from transformers import AutoModelForCausalLM
import transformers.masking_utils
dist.barrier()
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
before = dict(hwm())["VmRSS"]
if mode == "sharded":
    source = gpuplane_runtime.pretrained(path)
else:
    source = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
model, _ = gpuplane_runtime.parallelize(source, lambda p: torch.optim.SGD(p, lr=0.0), plan=plan, resume=False)
del source
# Read every parameter this rank keeps: from_pretrained maps the files and pages in what is read, so a
# parameter counts once it is used, on both paths alike.
share = 0
seen = set()
with torch.no_grad():
    for chunk, _ in model.named_chunks():
        for p in chunk.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                local, _ = local_box(p)
                share += local.numel() * local.element_size()
                local.sum()
peak = dict(hwm())["VmHWM"]
row = {"rank": dist.get_rank(), "growth": peak - before, "share": share}
rows = [None] * dist.get_world_size()
dist.all_gather_object(rows, row)
if dist.get_rank() == 0:
    print("BENCH " + json.dumps(rows), flush=True)
dist.destroy_process_group()
"""


def run(plan: tuple[int, int, int, int], ckpt: Path, mode: str, work: Path) -> list[dict[str, int]]:
    script = work / "worker.py"
    script.write_text(WORKER)
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "BENCH_SRC": str(HERE.parent / "src"),
        "BENCH_PLAN": ",".join(map(str, plan)),
        "BENCH_CKPT": str(ckpt),
        "BENCH_MODE": mode,
    }
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=4", str(script)]
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=1200)
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH "):
            return json.loads(line[len("BENCH ") :])  # type: ignore[no-any-return]
    raise SystemExit(f"{mode} {plan} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--short", action="store_true", help="a ~40 MB checkpoint; no page is written")
    parser.add_argument("--page", default=str(REPO / "docs" / "benchmarks" / "runtime-load.md"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ckpt = work / "ckpt"
        ckpt.mkdir()
        total = write_checkpoint(ckpt, args.short)
        files = len(list(ckpt.glob("*.safetensors")))
        print(f"checkpoint: {total / MB:.0f} MB in {files} files", flush=True)
        lines = []
        all_met = True
        for name, plan in PLANS.items():
            if args.short and name != "tp2 x pp2":
                continue
            started = time.monotonic()
            sharded = run(plan, ckpt, "sharded", work)
            whole = run(plan, ckpt, "whole", work)
            seconds = time.monotonic() - started
            for s, w in zip(sharded, whole, strict=True):
                limit = 1.5 * s["share"] + 64 * MB
                met = s["growth"] <= limit
                all_met &= met
                lines.append(
                    f"| {name} | {s['rank']} | {s['share'] / MB:.0f} | {s['growth'] / MB:.0f} | "
                    f"{s['growth'] / max(s['share'], 1):.2f} | {limit / MB:.0f} | {'yes' if met else 'no'} | "
                    f"{w['growth'] / MB:.0f} |"
                )
            print(f"{name}: {seconds:.0f} s", flush=True)
            print("\n".join(lines[-4:]), flush=True)
    header = (
        "| plan | rank | share (MB) | growth, sharded (MB) | growth / share | target (MB) | met | "
        "growth, whole model per rank (MB) |\n|---|---:|---:|---:|---:|---:|---|---:|"
    )
    table = header + "\n" + "\n".join(lines)
    print(table)
    if args.short:
        return
    page = f"""# Loading a pretrained checkpoint: host memory per rank

Written by `runtime/bench/load_memory.py` (see its docstring for the method). Checkpoint: a generated Llama,
{total / MB:.0f} MB of fp32 weights in {files} safetensors files with their index; 4 ranks under torchrun on this
project's 2-core machine (CPU, gloo). *Share*: the bytes of the parameters a rank keeps. *Growth*: its peak
resident set during the load minus its resident set just before (after the imports both paths make:
transformers' model classes cost ~110 MB of Python modules once per process, in any job).
Target: growth <= 1.5 x share + 64 MB.

The sharded path (`gpuplane_runtime.pretrained`) builds the model on the meta device, splits it, allocates only
this rank's shards and reads only their bytes (`pread`, 16 MB at a time). The other column is the path a tenant
had before: `AutoModelForCausalLM.from_pretrained` on every rank, then `parallelize` keeps a part. Both then read
every parameter the rank keeps, so what is counted is what the rank holds to train: `from_pretrained` maps the
files, and a pipeline stage whose parameters stay on the CPU pages in only what it reads (its own layers), while
tensor and data parallelism copy the whole model into each rank's shards first.

{table}

Every rank meets the target: {"yes" if all_met else "no"}.
"""
    Path(args.page).write_text(page)
    print(f"wrote {args.page}")


if __name__ == "__main__":
    main()
