"""A fine-tune from a pretrained checkpoint under one plan, exported, and loaded back by Hugging Face and PEFT.

    torchrun --nproc-per-node 4 finetune_export.py --mode lora --tp 2 --pp 2 --sp --work DIR

``--mode full``: rank 0 saves a tiny Llama (sharded, with a tokenizer); the runtime loads it sharded, trains
``--steps`` SGD steps and exports it; the export is loaded with ``from_pretrained`` and its logits compared with a
single-process model trained alike.

``--mode lora``: the same base, plus a PEFT adapter saved by single-process PEFT (its B not zero, so every
adapter weight learns from step 1); the runtime starts from that adapter (``lora_adapter=``), trains, exports the
adapter and the merged model. Checked: the loss curve against single-process PEFT from the same adapter, the base
weights bit-identical after training, the exported adapter loaded by ``PeftModel.from_pretrained`` (its logits
against the reference's), and the merged model loaded by ``from_pretrained``.

Rank 0 writes ``DIR/result.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "support"))
import zoo

import gpuplane_runtime
from gpuplane_runtime.weights.loading import local_box
from gpuplane_runtime.weights.names import checkpoint_source, is_adapter
from gpuplane_runtime.weights.sources import Checkpoint

TARGETS = ["q_proj", "v_proj", "o_proj", "down_proj"]
RANK, ALPHA = 4, 8.0


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    scale = float(b.abs().max()) or 1.0
    return float((a.float() - b.float()).abs().max()) / scale


def save_tokenizer(directory: Path) -> None:
    from tokenizers import Tokenizer, models

    vocab = {f"t{i}": i for i in range(zoo.VOCAB)}
    Tokenizer(models.WordLevel(vocab, unk_token="t0")).save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}))


def main() -> None:
    parser = argparse.ArgumentParser()
    for name, default in (("tp", 1), ("pp", 1), ("dp", 1), ("zero", 0), ("micro", 1), ("accum", 2), ("steps", 3)):
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--sp", action="store_true")
    parser.add_argument("--mode", choices=("full", "lora"), required=True)
    parser.add_argument("--tied", action="store_true")
    parser.add_argument("--work", required=True)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    work = Path(args.work)
    base_dir, adapter_dir, out = work / "base", work / "adapter-start", work / "export"
    cfg = zoo.config("llama", tied=args.tied)
    seq = 16
    if rank == 0:
        reference = zoo.build(cfg)
        reference.save_pretrained(base_dir, max_shard_size="60KB")
        save_tokenizer(base_dir)
        if args.mode == "lora":
            from peft import LoraConfig, get_peft_model

            peft_model = get_peft_model(
                zoo.build(cfg), LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=TARGETS, lora_dropout=0.0)
            )
            torch.manual_seed(7)
            with torch.no_grad():
                for name, p in peft_model.named_parameters():
                    if "lora_B" in name:
                        p.normal_(0.0, 0.05)
            peft_model.save_pretrained(adapter_dir)
    dist.barrier()
    lora_block = {"rank": RANK, "alpha": ALPHA, "target_modules": TARGETS} if args.mode == "lora" else None
    document = {
        "version": 1,
        "seq_len": seq,
        "precision": "fp32",
        "plan": {
            "tp": args.tp,
            "pp": args.pp,
            "dp": args.dp,
            "cp": 1,
            "vp": 1,
            "micro_batch": args.micro,
            "grad_accum": args.accum,
            "global_batch": args.micro * args.accum * args.dp,
            "zero_stage": args.zero,
            "sequence_parallel": args.sp,
            "recompute": "none",
            "workload": args.mode if args.mode == "lora" else "train",
        },
        "arch": {"layers": zoo.LAYERS, "hidden": zoo.HIDDEN, "vocab": zoo.VOCAB},
        **({"lora": lora_block} if lora_block else {}),
    }
    plan = gpuplane_runtime.parse_plan(document, "finetune")
    model, _ = gpuplane_runtime.parallelize(
        gpuplane_runtime.pretrained(base_dir),
        lambda params: torch.optim.SGD(params, lr=args.lr),
        plan=plan,
        resume=False,
        lora_adapter=adapter_dir if args.mode == "lora" else None,
    )
    batches = [zoo.tokens(plan.global_batch, seq, step) for step in range(args.steps)]
    losses = [model.train_step(b) for b in batches]

    # The frozen base after training: bit-identical to the checkpoint (every rank checks its own boxes).
    base_changed = 0
    if args.mode == "lora":
        ckpt = Checkpoint(base_dir)
        fused: dict[str, tuple[tuple[str, int], ...]] = {}
        for chunk, first in model.named_chunks():
            for fqn, param in chunk.named_parameters():
                original = gpuplane_runtime.weights.names.original_name(fqn, first)
                if is_adapter(original):
                    continue
                src = checkpoint_source(original, cfg, fused)
                piece, offsets = local_box(param)
                stored = torch.empty_like(piece)
                ckpt.read(src.name, ckpt.entries[src.name].shape, offsets, stored)
                base_changed += int(not torch.equal(piece, stored))
        ckpt.close()
    changed: list[int | None] = [None] * dist.get_world_size()
    dist.all_gather_object(changed, base_changed)
    model.export(out, merged=args.mode == "lora", max_shard_bytes=100_000)

    if rank == 0:
        from transformers import AutoModelForCausalLM

        def train(m: torch.nn.Module) -> list[float]:
            opt = torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=args.lr)
            out_losses = []
            for b in batches:
                loss = gpuplane_runtime.causal_lm_loss(m(b).logits, b)
                loss.backward()
                opt.step()
                opt.zero_grad()
                out_losses.append(float(loss))
            return out_losses

        probe = zoo.tokens(2, seq, 99)
        result: dict[str, object] = {"losses": losses}
        if args.mode == "full":
            reference = AutoModelForCausalLM.from_pretrained(base_dir)
            expected = train(reference)
            exported = AutoModelForCausalLM.from_pretrained(out)
            result["exported_logits_err"] = rel(exported(probe).logits, reference(probe).logits)
            result["files"] = sorted(p.name for p in out.iterdir())
        else:
            from peft import PeftModel

            reference = PeftModel.from_pretrained(
                AutoModelForCausalLM.from_pretrained(base_dir), adapter_dir, is_trainable=True
            )
            expected = train(reference)
            reference.eval()
            loaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_dir), out)
            loaded.eval()
            with torch.no_grad():
                want = reference(probe).logits
                result["adapter_logits_err"] = rel(loaded(probe).logits, want)
                merged = AutoModelForCausalLM.from_pretrained(out / "merged")
                result["merged_logits_err"] = rel(merged(probe).logits, want)
            result["files"] = sorted(p.name for p in out.iterdir())
            result["base_changed"] = sum(int(c or 0) for c in changed)
        result["loss_err"] = max(abs(a - b) / abs(b) for a, b in zip(losses, expected, strict=True))
        result["expected"] = expected
        (work / "result.json").write_text(json.dumps(result))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
