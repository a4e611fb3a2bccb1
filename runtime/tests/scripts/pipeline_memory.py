"""Activation memory a pipeline stage holds, per schedule and number of micro-batches.

    torchrun --nproc-per-node 2 pipeline_memory.py --out memory.json

A pp 2 plan over a small Llama, for each schedule (1F1B, GPipe) and each grad_accum (4, 16): one train step with
every tensor autograd saves for the backward counted while it is alive (each storage once, so weights count once
and only activations grow with what is in flight). Rank 0 (the first stage, which holds the most under 1F1B)
writes the peak bytes, the most micro-batches it held at once, and the loss of the step, per run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "support"))
import zoo

import gpuplane_runtime


class SavedBytes:
    """Bytes of the distinct storages autograd holds for the backward, and their peak."""

    def __init__(self) -> None:
        self.live: dict[int, list[int]] = {}
        self.current = 0
        self.peak = 0

    def pack(self, t: torch.Tensor) -> Any:
        storage = t.untyped_storage()
        key = storage.data_ptr()
        entry = self.live.get(key)
        if entry is None:
            self.live[key] = [1, storage.nbytes()]
            self.current += storage.nbytes()
            self.peak = max(self.peak, self.current)
        else:
            entry[0] += 1
        return _Held(self, key, t)

    def unpack(self, held: Any) -> torch.Tensor:
        return held.tensor  # type: ignore[no-any-return]

    def release(self, key: int) -> None:
        entry = self.live[key]
        entry[0] -= 1
        if entry[0] == 0:
            self.current -= entry[1]
            del self.live[key]


class _Held:
    def __init__(self, meter: SavedBytes, key: int, tensor: torch.Tensor) -> None:
        self.meter, self.key, self.tensor = meter, key, tensor

    def __del__(self) -> None:
        self.meter.release(self.key)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--seq", type=int, default=64)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    cfg = zoo.config("llama")
    results = []
    for schedule in ("1f1b", "gpipe"):
        os.environ["GPUPLANE_PIPELINE_SCHEDULE"] = schedule
        for accum in (4, 16):
            document = {
                "version": 1,
                "seq_len": args.seq,
                "precision": "fp32",
                "plan": {
                    "tp": 1, "pp": 2, "dp": 1, "cp": 1, "vp": 1, "micro_batch": 1, "grad_accum": accum,
                    "global_batch": accum, "zero_stage": 0, "sequence_parallel": False, "recompute": "none",
                },
            }  # fmt: skip
            plan = gpuplane_runtime.parse_plan(document, f"{schedule}-{accum}")
            model, _ = gpuplane_runtime.parallelize(
                gpuplane_runtime.from_config(cfg), lambda p: torch.optim.SGD(p, lr=0.01), plan=plan, resume=False
            )
            meter = SavedBytes()
            batch = zoo.tokens(accum, args.seq)
            with torch.autograd.graph.saved_tensors_hooks(meter.pack, meter.unpack):
                loss = model.train_step(batch)
            results.append(
                {
                    "schedule": schedule,
                    "grad_accum": accum,
                    "peak_saved_bytes": meter.peak,
                    "in_flight": model.pipeline_peak_in_flight,
                    "loss": loss,
                }
            )
            model.close()
    if dist.get_rank() == 0:
        Path(args.out).write_text(json.dumps(results))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
