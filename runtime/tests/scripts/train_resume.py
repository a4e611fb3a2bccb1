"""A training script for the checkpoint tests: the example's tiny Llama with an LR schedule, a checkpoint saved
after the steps named in GPUPLANE_TEST_SAVE_AT (comma-separated), a stop notice written by rank 0 after step
GPUPLANE_TEST_NOTICE_AT, resumed by parallelize() from $GPUPLANE_CHECKPOINT_DIR when it holds one. ``--hidden``
makes another model (the bad-input test)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "llama-parallel"))
from train import make_batch

import gpuplane_runtime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--hidden", type=int, default=128)
    args = parser.parse_args()
    save_at = {int(s) for s in os.environ.get("GPUPLANE_TEST_SAVE_AT", "").split(",") if s}
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=256,
        hidden_size=args.hidden,
        intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        attn_implementation="sdpa",
    )
    model, _ = gpuplane_runtime.parallelize(
        LlamaForCausalLM(config),
        lambda p: torch.optim.AdamW(p, lr=4e-3),
        make_scheduler=lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s)),
    )
    # The data position: the next global batch's index (the step, here; a loader's state in general). A
    # checkpoint the runtime saved on a stop notice has no `extra`: the step is the position then.
    position = int(model.checkpoint_extra.get("next_batch", model.step))
    notice_at = int(os.environ.get("GPUPLANE_TEST_NOTICE_AT", "0"))
    if model.topo.rank == 0:
        print(f"test: starting at step {model.step}, batch {position}", flush=True)
    while model.step < args.steps:
        model.train_step(make_batch(position, 0, model.plan.global_batch, model.plan.seq_len, 256))
        position += 1
        if model.step in save_at:
            model.save_checkpoint(extra={"next_batch": position})
        if model.step == notice_at and model.topo.rank == 0:
            # As the agent does: the notice file appears; the next step's all-reduce tells every rank.
            Path(os.environ["GPUPLANE_STOP_NOTICE_FILE"]).write_text('{"reason": "test", "grace_s": 60}')
    model.close()


if __name__ == "__main__":
    main()
