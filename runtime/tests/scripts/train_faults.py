"""A training script for the failure tests: the example's tiny Llama, and a rank that dies
(GPUPLANE_TEST_DIE_RANK / GPUPLANE_TEST_DIE_STEP) or stalls (GPUPLANE_TEST_HANG_RANK / GPUPLANE_TEST_HANG_STEP)
before a step, leaving its peers inside that step's collectives."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "llama-parallel"))
from train import make_batch

import gpuplane_runtime


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    die_rank = int(os.environ.get("GPUPLANE_TEST_DIE_RANK", "-1"))
    die_step = int(os.environ.get("GPUPLANE_TEST_DIE_STEP", "-1"))
    hang_rank = int(os.environ.get("GPUPLANE_TEST_HANG_RANK", "-1"))
    hang_step = int(os.environ.get("GPUPLANE_TEST_HANG_STEP", "-1"))
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=256,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        attn_implementation="sdpa",
    )
    model, _ = gpuplane_runtime.parallelize(LlamaForCausalLM(config), lambda p: torch.optim.AdamW(p, lr=1e-2))
    for step in range(steps):
        if model.topo.rank == die_rank and step == die_step:
            print(f"test: rank {die_rank} dies before step {step + 1}", file=sys.stderr, flush=True)
            os._exit(17)
        if model.topo.rank == hang_rank and step == hang_step:
            print(f"test: rank {hang_rank} stalls before step {step + 1}", file=sys.stderr, flush=True)
            time.sleep(600)
        model.train_step(make_batch(step, 0, model.plan.global_batch, model.plan.seq_len, 256))
    model.close()


if __name__ == "__main__":
    main()
