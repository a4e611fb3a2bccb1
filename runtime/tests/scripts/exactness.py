"""Every decoder family, tied and untied, under one plan, against a single-process reference (fp32, SGD).

Run under torchrun with the plan's world size:

    torchrun --nproc-per-node 4 exactness.py --tp 2 --pp 1 --dp 2 --zero 1 --sp --out results.jsonl

For each family and tie: rank 0 saves the reference model as a sharded Hugging Face checkpoint; every rank loads
it sharded under the plan (``gpuplane_runtime.pretrained``) and trains ``--steps`` SGD steps; every rank also runs
the same steps on the whole model in one process. Rank 0 writes one JSON line per model: the worst relative
error of the losses and of the parameters (each rank's own shards against the reference's same box), the logits'
error before training (plans without a pipeline), and whether every parameter box that several ranks hold is
bit-identical on all of them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "support"))
import zoo

import gpuplane_runtime
from gpuplane_runtime import parse_plan
from gpuplane_runtime.weights.loading import local_box
from gpuplane_runtime.weights.names import checkpoint_source


def plan_document(args: argparse.Namespace) -> dict[str, object]:
    return {
        "version": 1,
        "seq_len": args.seq,
        "precision": "fp32",
        "plan": {
            "tp": args.tp,
            "pp": args.pp,
            "dp": args.dp,
            "cp": 1,
            "vp": args.vp,
            "micro_batch": args.micro,
            "grad_accum": args.accum,
            "global_batch": args.micro * args.accum * args.dp,
            "zero_stage": args.zero,
            "sequence_parallel": args.sp,
            "recompute": args.recompute,
            "workload": "train",
        },
    }


def reference_losses(model: torch.nn.Module, batches: list[torch.Tensor], lr: float) -> list[float]:
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for batch in batches:
        logits = model(batch).logits
        loss = gpuplane_runtime.causal_lm_loss(logits, batch)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss))
    return losses


def fresh_dtensor_caches() -> None:
    """A job builds one model per process; this script builds many. torch 2.9's DTensor caches redistribution
    plans by placement equality, and the vocabulary-parallel embedding's mask placement of one model then stands
    in for the next model's: start each model with empty caches, as a new process would."""
    from torch.distributed.tensor import DTensor, _redistribute

    _redistribute._gen_transform_infos.cache_clear()
    DTensor._op_dispatcher.sharding_propagator.propagate_op_sharding.cache.cache_clear()


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    scale = float(b.abs().max()) or 1.0
    return float((a.float() - b.float()).abs().max()) / scale


def main() -> None:
    parser = argparse.ArgumentParser()
    for name, default in (("tp", 1), ("pp", 1), ("dp", 1), ("vp", 1), ("zero", 0), ("micro", 2), ("accum", 2)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--sp", action="store_true")
    parser.add_argument("--no-logits", action="store_true")
    parser.add_argument("--grad-logits", action="store_true")
    parser.add_argument("--recompute", default="none")
    parser.add_argument("--seq", type=int, default=16)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--families", default=",".join(zoo.FAMILIES))
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    plan = parse_plan(plan_document(args), "exactness")
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    results = []
    shared = Path(args.out).parent
    for family in args.families.split(","):
        for tied in (False, True):
            cfg = zoo.config(family, tied=tied)
            directory = shared / f"ckpt-{family}-{int(tied)}"
            if rank == 0 and not directory.exists():
                tmp = Path(tempfile.mkdtemp(dir=shared))
                zoo.build(cfg).save_pretrained(tmp, max_shard_size="40KB")
                tmp.rename(directory)
            dist.barrier()
            reference = zoo.build(cfg)
            batches = [zoo.tokens(plan.global_batch, args.seq, step) for step in range(args.steps)]
            ref_logits = reference(batches[0]).logits.detach()
            model, _ = gpuplane_runtime.parallelize(
                gpuplane_runtime.pretrained(directory),
                lambda params: torch.optim.SGD(params, lr=args.lr),
                plan=plan,
                resume=False,
            )
            logits_err = None
            if plan.pp == 1 and not args.no_logits:
                local = model.local_batch(batches[0])
                if args.grad_logits:
                    out = model(local).detach()
                else:
                    with torch.no_grad():
                        out = model(local)
                rows = slice(model.dp_rank * model.local_batch_size, (model.dp_rank + 1) * model.local_batch_size)
                logits_err = rel(out, ref_logits[rows])
            losses = [model.train_step(b) for b in batches]
            expected = reference_losses(reference, batches, args.lr)
            loss_err = max(abs(a - b) / abs(b) for a, b in zip(losses, expected, strict=True))
            ref_params = dict(reference.named_parameters())
            fused = {
                f.module: tuple(zip(f.parts, f.sizes(cfg), strict=True))
                for f in (model.family.fused if model.family else ())
            }
            param_err = 0.0
            boxes = []
            for chunk, first in model.named_chunks():
                seen: set[int] = set()
                for fqn, param in chunk.named_parameters():
                    if id(param) in seen:
                        continue
                    seen.add(id(param))
                    original = gpuplane_runtime.weights.names.original_name(fqn, first)
                    src = checkpoint_source(original, cfg, fused)
                    whole = ref_params[src.name].detach()
                    piece, offsets = local_box(param)
                    box = tuple(
                        slice(o + (src.row_offset if i == 0 else 0), o + (src.row_offset if i == 0 else 0) + n)
                        for i, (o, n) in enumerate(zip(offsets, piece.shape, strict=True))
                    )
                    param_err = max(param_err, rel(piece, whole[box]))
                    digest = hashlib.sha256(piece.detach().contiguous().numpy().tobytes()).hexdigest()
                    boxes.append((src.name, src.row_offset, offsets, tuple(piece.shape), digest))
            everyone: list[list[tuple[object, ...]] | None] = [None] * dist.get_world_size()
            dist.all_gather_object(everyone, boxes)
            held: dict[tuple[object, ...], set[str]] = {}
            for entries in everyone:
                for name, row, offsets, shape, digest in entries or []:
                    held.setdefault((name, row, offsets, shape), set()).add(digest)
            identical = all(len(d) == 1 for d in held.values())
            results.append(
                {
                    "family": family,
                    "tied": tied,
                    "loss_err": loss_err,
                    "param_err": param_err,
                    "logits_err": logits_err,
                    "peers_identical": identical,
                    "losses": losses,
                    "in_flight": model.pipeline_peak_in_flight,
                }
            )
            model.close()
            fresh_dtensor_caches()
    worst: list[list[dict[str, object]] | None] = [None] * dist.get_world_size()
    dist.all_gather_object(worst, results)
    if rank == 0:
        with open(args.out, "w") as f:
            for r in range(len(results)):
                merged = dict(results[r])
                for key in ("loss_err", "param_err"):
                    merged[key] = max(float(w[r][key]) for w in worst if w)  # type: ignore[index,arg-type]
                merged["peers_identical"] = all(bool(w[r]["peers_identical"]) for w in worst if w)  # type: ignore[index]
                f.write(json.dumps(merged) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
