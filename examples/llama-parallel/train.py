"""Train (or fine-tune, with a LoRA plan) a Llama-family model with the parallelism gpuplane planned for this job.

Run by gpuplane's runtime template (torchrun sets RANK/WORLD_SIZE, the job's launch files set
GPUPLANE_PLAN_FILE), or by hand:

    GPUPLANE_PLAN_FILE=plan.json torchrun --nproc-per-node 4 train.py --steps 20
    GPUPLANE_PLAN_FILE=plan.json torchrun --nproc-per-node 4 train.py --model /models/llama-3.2-1b --export out/

``--model`` (default ``$GPUPLANE_MODEL``) names a Hugging Face checkpoint (a directory of safetensors with its
``config.json``, or a hub id in the local cache): each rank reads only its part of it. Without one, a small Llama
of the given shape is built with random weights that do not depend on the plan. ``--export`` (default
``$GPUPLANE_EXPORT_DIR``) writes the trained model (or the LoRA adapter) as Hugging Face files at the end.

The data is generated (no downloads): sequences that count up from a random start by a random stride, modulo the
vocabulary, drawn from a small pool so the loss falls within a few steps. Batch ``s`` comes from a generator
seeded with (seed, s), so every plan sees the same global batches in the same order: the loss curve does not
depend on the plan.
"""

from __future__ import annotations

import argparse
import os

import torch
from transformers import LlamaConfig

import gpuplane_runtime


def make_batch(step: int, seed: int, batch: int, seq_len: int, vocab: int, pool: int = 16) -> torch.Tensor:
    """Global batch ``step``: [batch, seq_len] token ids, the same on every rank and under every plan.

    Sequences count up from a random start by a random stride (modulo the vocabulary). With ``pool`` > 0 each
    batch is drawn from a fixed pool of that many sequences, so a tiny model's loss falls within a few steps;
    with 0 every batch is fresh."""
    gen = torch.Generator().manual_seed(seed)
    rows = pool if pool > 0 else batch
    if pool == 0:
        gen.manual_seed(seed * 1_000_003 + step)
    start = torch.randint(0, vocab, (rows, 1), generator=gen)
    stride = torch.randint(1, 5, (rows, 1), generator=gen)
    sequences = (start + stride * torch.arange(seq_len).unsqueeze(0)) % vocab
    if pool == 0:
        return sequences
    pick = torch.randint(0, pool, (batch,), generator=torch.Generator().manual_seed(seed * 1_000_003 + step))
    return sequences[pick]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--ffn", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--pool", type=int, default=16, help="sequences in the data pool (0: fresh every step)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--checkpoint-dir", default=None, help="where checkpoints go and resume from (default $GPUPLANE_CHECKPOINT_DIR)"
    )
    parser.add_argument("--save-every", type=int, default=0, help="save a checkpoint every N steps (0: never)")
    parser.add_argument("--model", default=os.environ.get("GPUPLANE_MODEL"), help="a Hugging Face checkpoint")
    parser.add_argument("--export", default=os.environ.get("GPUPLANE_EXPORT_DIR"), help="export the result here")
    parser.add_argument("--lora-adapter", default=None, help="a PEFT adapter to start a LoRA plan from")
    args = parser.parse_args()

    source: gpuplane_runtime.Pretrained | gpuplane_runtime.FromConfig
    if args.model:
        source = gpuplane_runtime.pretrained(args.model)
    else:
        config = LlamaConfig(
            vocab_size=args.vocab,
            hidden_size=args.hidden,
            intermediate_size=args.ffn,
            num_hidden_layers=args.layers,
            num_attention_heads=args.heads,
            num_key_value_heads=args.kv_heads,
            max_position_embeddings=4096,
            attn_implementation="sdpa",
        )
        source = gpuplane_runtime.from_config(config, seed=args.seed)

    # The runtime builds the model on the meta device, keeps this rank's part and fills only that. train_step runs
    # the optimizer; it is returned for what a script adds. When the checkpoint directory holds a checkpoint
    # (saved under this plan or any other), parallelize loads it: model.step is where to go on.
    model, _optimizer = gpuplane_runtime.parallelize(
        source,
        lambda params: torch.optim.AdamW(params, lr=args.lr),
        checkpoint_dir=args.checkpoint_dir,
        lora_adapter=args.lora_adapter,
    )
    plan = model.plan
    vocab = int(model.config.vocab_size)
    for step in range(model.step, args.steps):  # batch `step` is the data position: a resumed job goes on from it
        batch = make_batch(step, args.seed, plan.global_batch, plan.seq_len, vocab, args.pool)
        loss = model.train_step(batch)
        if model.topo.rank == 0:
            print(f"step {step + 1} loss {loss:.6f}", flush=True)
        if args.save_every and model.step % args.save_every == 0:
            model.save_checkpoint()
    # Where every rank sat, said last by rank 0 (so it survives in the job's output tail).
    placed: list[dict[str, int] | None] = [None] * model.topo.world_size
    torch.distributed.all_gather_object(placed, {"rank": model.topo.rank, **model.topo.coordinates()})
    # And which decoder layers each rank's stage holds (the plan's layers_per_stage).
    held: list[tuple[int, int] | None] = [None] * model.topo.world_size
    layers = model.decoder_layers
    torch.distributed.all_gather_object(held, (layers.start, len(layers)) if layers is not None else (0, 0))
    if model.topo.rank == 0:
        for coords, span in zip(placed, held, strict=True):
            assert coords is not None and span is not None
            where = " ".join(f"{k}={v}" for k, v in coords.items() if k != "rank")
            print(f"mesh of rank {coords['rank']}/{model.topo.world_size}: {where}", flush=True)
            print(
                f"layers of rank {coords['rank']}/{model.topo.world_size}: first={span[0]} count={span[1]}", flush=True
            )
    if args.export:
        model.export(args.export)
    model.close()


if __name__ == "__main__":
    main()
