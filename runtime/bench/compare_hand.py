"""Benchmark: the runtime's per-step time against the same parallelism wired by hand in plain PyTorch, side by
side in one run (steps alternate between the two, so both see the same machine load).

    torchrun --standalone --nproc-per-node 4 runtime/bench/compare_hand.py [--steps 20] [--hidden 256] [--seq 128]

Two plans, each on all ranks: dp 4 with ZeRO-3 (FSDP2 fully_shard per layer), and tp 2 x dp 2 with ZeRO-1
(DTensor tensor parallelism + FSDP2 over dp). The hand-wired version is what a PyTorch user writes from the
tutorials: init_device_mesh, parallelize_module with the same styles, fully_shard, the Hugging Face model's own
forward, a loop over micro-batches. Rank 0 prints a Markdown table: median step time of each, the difference, and
the largest loss difference between the two (they compute the same thing, so it is float noise).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from transformers import LlamaConfig, LlamaForCausalLM

import gpuplane_runtime

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "llama-parallel"))
from train import make_batch


def plan_doc(tp: int, dp: int, zero: int, micro_batch: int, grad_accum: int, seq: int) -> dict[str, Any]:
    plan = {
        "workload": "train",
        "tp": tp,
        "pp": 1,
        "dp": dp,
        "cp": 1,
        "ep": 1,
        "layers_per_stage": [],
        "vp": 1,
        "micro_batch": micro_batch,
        "grad_accum": grad_accum,
        "global_batch": micro_batch * grad_accum * dp,
        "zero_stage": zero,
        "sequence_parallel": False,
        "recompute": "none",
        "offload": "none",
    }
    return {"version": 1, "plan": plan, "model": None, "seq_len": seq, "precision": "fp32"}


def build(args: argparse.Namespace) -> LlamaForCausalLM:
    torch.manual_seed(0)
    return LlamaForCausalLM(
        LlamaConfig(
            vocab_size=args.vocab,
            hidden_size=args.hidden,
            intermediate_size=args.hidden * 2,
            num_hidden_layers=args.layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            attn_implementation="sdpa",
        )
    )


def by_hand(model: LlamaForCausalLM, tp: int, dp: int, zero: int) -> nn.Module:
    """The same parallelism as the runtime applies, written out as in PyTorch's tutorials."""
    mesh = init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp"))
    if tp > 1:
        parallelize_module(
            model,
            mesh["tp"],
            {
                "model.embed_tokens": RowwiseParallel(input_layouts=Replicate()),
                "lm_head": ColwiseParallel(output_layouts=Replicate()),
            },
        )
        for layer in model.model.layers:
            parallelize_module(
                layer,
                mesh["tp"],
                {
                    "self_attn.q_proj": ColwiseParallel(),
                    "self_attn.k_proj": ColwiseParallel(),
                    "self_attn.v_proj": ColwiseParallel(),
                    "self_attn.o_proj": RowwiseParallel(),
                    "mlp.gate_proj": ColwiseParallel(),
                    "mlp.up_proj": ColwiseParallel(),
                    "mlp.down_proj": RowwiseParallel(),
                },
            )
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh["dp"], reshard_after_forward=zero >= 3)
    fully_shard(model, mesh=mesh["dp"], reshard_after_forward=zero >= 3)
    return model


def hand_step(
    model: nn.Module, opt: torch.optim.Optimizer, batch: torch.Tensor, dp_rank: int, mb: int, ga: int
) -> float:
    local = batch[dp_rank * mb * ga : (dp_rank + 1) * mb * ga]
    total = 0.0
    for ids in local.split(mb):
        logits = model(ids).logits
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(), ids[:, 1:].reshape(-1))
        (loss / ga).backward()
        total += float(loss.detach())
    opt.step()
    opt.zero_grad(set_to_none=True)
    t = torch.tensor([total], dtype=torch.float64)
    dist.all_reduce(t)
    return float(t.item()) / (dist.get_world_size() * ga)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=1024)
    parser.add_argument("--seq", type=int, default=128)
    args = parser.parse_args()
    rows = []
    for name, tp, dp, zero, mb, ga in [("dp 4, ZeRO-3", 1, 4, 3, 1, 2), ("tp 2 x dp 2, ZeRO-1", 2, 2, 1, 2, 2)]:
        plan = gpuplane_runtime.parse_plan(plan_doc(tp, dp, zero, mb, ga, args.seq), name)
        rt, _ = gpuplane_runtime.parallelize(
            build(args), lambda p: torch.optim.AdamW(p, lr=1e-3), plan=plan, metrics_file="/dev/null"
        )
        hand = by_hand(build(args), tp, dp, zero)
        hand_opt = torch.optim.AdamW(hand.parameters(), lr=1e-3)
        dp_rank = dist.get_rank() // tp
        t_rt: list[float] = []
        t_hand: list[float] = []
        worst = 0.0
        for step in range(args.warmup + args.steps):
            batch = make_batch(step, 0, plan.global_batch, args.seq, args.vocab)
            order = [0, 1] if step % 2 == 0 else [1, 0]  # alternate who goes first
            losses = [0.0, 0.0]
            for which in order:
                dist.barrier()
                started = time.perf_counter()
                if which == 0:
                    losses[0] = rt.train_step(batch)
                else:
                    losses[1] = hand_step(hand, hand_opt, batch, dp_rank // 1 if tp == 1 else dp_rank, mb, ga)
                elapsed = time.perf_counter() - started
                if step >= args.warmup:
                    (t_rt if which == 0 else t_hand).append(elapsed)
            worst = max(worst, abs(losses[0] - losses[1]))
        a, b = statistics.median(t_rt), statistics.median(t_hand)
        rows.append((name, a, b, worst))
        rt.close()
    if dist.get_rank() == 0:
        print(
            f"\n{args.layers} layers, hidden {args.hidden}, vocab {args.vocab}, seq {args.seq}, fp32, "
            f"{dist.get_world_size()} CPU processes (gloo), median of {args.steps} steps after {args.warmup} warm-up\n"
        )
        print("| plan | runtime s/step | by hand s/step | runtime vs hand | max loss difference |")
        print("| --- | --- | --- | --- | --- |")
        for name, a, b, worst in rows:
            print(f"| {name} | {a:.4f} | {b:.4f} | {100 * (a - b) / b:+.1f}% | {worst:.1e} |")


if __name__ == "__main__":
    main()
