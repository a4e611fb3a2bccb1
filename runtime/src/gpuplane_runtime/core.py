"""``parallelize``: apply the job's plan to a model, and a train step that runs it (pipeline schedule,
accumulation, gradient synchronisation, optimizer, metrics) so the training script holds no parallelism code.

The model comes as a source (:func:`~gpuplane_runtime.pretrained`, :func:`~gpuplane_runtime.from_config`): it is
built with its parameters on the meta device, split per the plan (pipeline chunks, tensor shards, FSDP shards),
and only then are this rank's parameters allocated and read. Or it comes built (an ``nn.Module`` every rank made
alike), for models small enough to build whole on every rank.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper
from torch.nn.parallel import DistributedDataParallel

from . import checkpoint, lora, notice
from .distributed import Topology, setup
from .errors import CheckpointError, CollectiveError, GpuplaneRuntimeError, PlanMismatchError, UnsupportedModelError
from .metrics import StepMetricsWriter
from .models import build, families
from .models.stage import DecoderParts, DecoderStage, find_parts, split_layers, unfuse
from .parallel import data, pipeline, tensor
from .plan import RuntimePlan, load_plan
from .weights import export as export_mod
from .weights import loading, names
from .weights.sources import ADAPTER_FILE, Checkpoint, RandomWeights, resolve_model_dir

MakeOptimizer = Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer]
MakeScheduler = Callable[[torch.optim.Optimizer], torch.optim.lr_scheduler.LRScheduler]
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

_DTYPES = {"bf16": torch.bfloat16, "fp8": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
SCHEDULE_ENV = "GPUPLANE_PIPELINE_SCHEDULE"


def causal_lm_loss(logits: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """Next-token cross entropy, the mean over every predicted token of the micro-batch."""
    vocab = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, vocab).float(), input_ids[:, 1:].reshape(-1))


def _log(topo: Topology | None, message: str) -> None:
    if topo is None or topo.rank == 0:
        print(f"gpuplane_runtime: {message}", file=sys.stderr, flush=True)


def _peak_memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    # CPU: the process's peak resident set (Linux reports KiB).
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _is_collective_failure(err: BaseException) -> bool:
    if isinstance(err, dist.DistError):
        return True
    text = str(err)
    return any(word in text for word in ("gloo", "Gloo", "NCCL", "Connection", "connection", "Timed out", "timeout"))


class ParallelModel(nn.Module):
    """This rank's part of the model, placed per the plan. Call :meth:`train_step` with a batch; use
    :attr:`coordinates` to see where this rank sits (pp, dp, cp, tp)."""

    def __init__(
        self,
        chunks: list[nn.Module],
        first_layers: list[int | None],
        plan: RuntimePlan,
        topo: Topology,
        *,
        grad_sync: str,
        hidden_size: int | None,
        family: families.Family | None,
        config: Any,
        loss_fn: LossFn,
        metrics: StepMetricsWriter | None,
        schedule: str,
    ) -> None:
        super().__init__()
        # One ModuleList of the chunks this rank runs (one, or vp with an interleaved schedule).
        self.stage = nn.ModuleList(chunks)
        self.first_layers = first_layers
        self.plan = plan
        self.topo = topo
        self.grad_sync = grad_sync
        self.hidden_size = hidden_size
        self.family = family
        self.config = config
        self.is_llama = family is not None  # the runtime composes the family's stage (vs. the model's own forward)
        self.loss_fn = loss_fn
        self.metrics = metrics
        self.schedule = schedule
        self.optimizer: torch.optim.Optimizer | None = None
        self.scheduler: torch.optim.lr_scheduler.LRScheduler | None = None
        self.step = 0
        self.checkpoint_dir: Path | None = None
        self.checkpoint_extra: dict[str, Any] = {}
        self.resumed_from: Path | None = None
        self.lora = plan.lora
        self.lora_scaling = plan.lora.alpha / plan.lora.rank if plan.lora else 0.0
        self.source_dir: Path | None = None
        self.export_dtype = torch.float32
        self.tp_partial_params: list[nn.Parameter] = []
        self.tied_params: list[nn.Parameter] = []
        self.tied_group: dist.ProcessGroup | None = None
        self.pipeline_peak_in_flight = 0
        self.is_first_stage = topo.pp_rank == 0
        self.is_last_stage = topo.pp_rank == plan.pp - 1
        self.compute_dtype = _DTYPES[plan.precision]
        if plan.precision == "fp16" and topo.device.type != "cuda":
            _log(topo, "warning: fp16 needs a GPU; on the CPU the plan runs in bf16")
            self.compute_dtype = torch.bfloat16
        self.autocast = self.compute_dtype != torch.float32 and grad_sync != "fsdp"
        self.scaler = (
            torch.amp.grad_scaler.GradScaler("cuda") if self.compute_dtype == torch.float16 and self.autocast else None
        )
        # Pipeline activations travel in the compute dtype; FSDP's mixed precision casts a stage's inputs back.
        self.wire_dtype = self.compute_dtype
        self.dp_group = topo.mesh.get_group("dp")
        self.tp_group = topo.mesh.get_group("tp")
        self.runner: pipeline.PipelineRunner | None = None
        if plan.pp > 1:
            groups = (dist.new_group(), dist.new_group())
            self.runner = pipeline.PipelineRunner(
                name=schedule,
                p=plan.pp,
                v=len(chunks),
                rank_at=lambda i: topo.global_rank_at(i, topo.dp_rank, topo.tp_rank),
                pp_rank=topo.pp_rank,
                groups=groups,
                device=topo.device,
                wire_dtype=self.wire_dtype,
            )
        self.notice = notice.StopNotice.from_environment()
        if self.notice.path is not None:
            _log(topo, f"stop notices: watching {self.notice.path} and SIGUSR1")

    # --- where this rank sits -----------------------------------------------------------------------------
    @property
    def coordinates(self) -> dict[str, int]:
        return self.topo.coordinates()

    def named_chunks(self) -> Iterator[tuple[nn.Module, int | None]]:
        """Each chunk (unwrapped from DDP) with the first decoder layer it holds (None: an unsplit model)."""
        for chunk, first in zip(self.stage, self.first_layers, strict=True):
            yield (chunk.module if isinstance(chunk, DistributedDataParallel) else chunk), first

    @property
    def layer_chunks(self) -> list[range]:
        """The decoder layers of each chunk this rank holds (one chunk, or ``vp`` interleaved)."""
        out = []
        for chunk, _ in self.named_chunks():
            if isinstance(chunk, DecoderStage):
                out.append(range(chunk.first_layer, chunk.first_layer + len(chunk.layers)))
        return out

    @property
    def decoder_layers(self) -> range | None:
        """The model's decoder layers this rank's (first) pipeline chunk holds (None for a model the runtime does
        not split), e.g. ``range(0, 5)``: the plan's ``layers_per_stage`` for its stage, which are uneven on a mix
        of unlike GPUs."""
        chunks = self.layer_chunks
        return chunks[0] if chunks else None

    def original_name(self, fqn: str) -> str:
        """A parameter name of :attr:`stage` (``<chunk>.<name>``) as the unsplit model names it."""
        index, _, rest = fqn.partition(".")
        chunk = self.stage[int(index)]
        name = names.original_name(rest, self.first_layers[int(index)], ddp=isinstance(chunk, DistributedDataParallel))
        head = "lm_head.weight"
        if (
            self.family
            and getattr(self.config, "tie_word_embeddings", False)
            and name.split(".", 2)[:2] == ["lm_head", "weight"]
        ):
            return "model.embed_tokens.weight" + name[len(head) :]  # one tensor, whichever stage holds a copy
        return name

    @property
    def dp_rank(self) -> int:
        return self.topo.dp_rank

    @property
    def dp_size(self) -> int:
        return self.plan.dp

    @property
    def local_batch_size(self) -> int:
        """Sequences this rank's data-parallel replica takes per optimizer step (micro_batch x grad_accum)."""
        return self.plan.micro_batch * self.plan.grad_accum

    def local_batch(self, global_batch: torch.Tensor) -> torch.Tensor:
        """This data-parallel rank's rows of the global batch: contiguous, so every plan sees one data order."""
        if global_batch.shape[0] != self.plan.global_batch:
            raise PlanMismatchError(
                f"train_step got a batch of {global_batch.shape[0]} sequences; the plan's global_batch is "
                f"{self.plan.global_batch} (pass local=True with {self.local_batch_size} rows to feed this rank's "
                "share yourself)"
            )
        n = self.local_batch_size
        return global_batch[self.dp_rank * n : (self.dp_rank + 1) * n]

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The logits (single-stage plans only: with pipeline parallelism use :meth:`train_step`)."""
        if self.plan.pp > 1:
            raise GpuplaneRuntimeError("forward() runs a whole model; with pipeline parallelism use train_step()")
        ids = input_ids.to(self.topo.device)
        if self.grad_sync == "fsdp" and self.plan.tp > 1 and not torch.is_grad_enabled():
            # torch 2.9: the vocabulary-parallel embedding of an FSDP2 + TP model loses its index mask under
            # no_grad (an assertion in DTensor's _MaskPartial); run with autograd and hand back plain logits.
            with torch.enable_grad():  # type: ignore[no-untyped-call]
                return self._run_chunk(0, ids, ids).detach()
        return self._run_chunk(0, ids, ids)

    # --- one optimizer step --------------------------------------------------------------------------------
    def train_step(self, input_ids: torch.Tensor, *, local: bool = False) -> float:
        """Forward, backward and optimizer step over one global batch of token ids ``[global_batch, seq]``
        (every rank passes the same batch; each takes its data-parallel share), or this rank's share
        ``[micro_batch * grad_accum, seq]`` with ``local=True``. Returns the global mean loss, the same on every
        rank. Global rank 0 appends the step's metrics line."""
        if self.optimizer is None:
            raise GpuplaneRuntimeError("train_step needs the optimizer: build the model with parallelize()")
        started = time.perf_counter()
        batch = input_ids if local else self.local_batch(input_ids)
        if batch.shape[0] != self.local_batch_size:
            raise PlanMismatchError(
                f"train_step(local=True) got {batch.shape[0]} sequences; this rank takes micro_batch "
                f"{self.plan.micro_batch} x grad_accum {self.plan.grad_accum} = {self.local_batch_size}"
            )
        seq = int(batch.shape[1])
        if self.plan.sequence_parallel and self.plan.tp > 1 and seq % self.plan.tp:
            raise PlanMismatchError(f"sequence length {seq} does not split over tp {self.plan.tp}")
        batch = batch.to(self.topo.device)
        watchdog = self._watchdog()
        try:
            loss_sum = self._pipeline(batch) if self.runner is not None else self._accumulate(batch)
            self._sync_grads()
            if self.scaler is not None:
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
            if self.scheduler is not None:
                self.scheduler.step()
            # The loss lives on the last stage; one all-reduce gives every rank the global mean.
            # The same all-reduce tells every rank whether any has a stop notice, so all stop at this boundary.
            contributes = self.is_last_stage and self.topo.tp_rank == 0
            noticed = 1.0 if self.notice.seen() else 0.0
            total = torch.tensor(
                [loss_sum if contributes else 0.0, noticed], dtype=torch.float64, device=self.topo.device
            )
            dist.all_reduce(total)
            loss = float(total[0].item()) / (self.plan.dp * self.plan.grad_accum)
            stop = float(total[1].item()) > 0
        except Exception as err:
            if isinstance(err, GpuplaneRuntimeError) or not _is_collective_failure(err):
                raise
            raise CollectiveError(f"{self._collective_failure()}: {err}") from err
        finally:
            watchdog.cancel()
        self.step += 1
        elapsed = time.perf_counter() - started
        if self.metrics is not None:
            tokens = self.plan.global_batch * seq if not local else self.local_batch_size * seq * self.plan.dp
            self.metrics.write(self.step, elapsed, tokens, loss, _peak_memory_bytes(self.topo.device))
        if stop:
            self._stop_on_notice()
        return loss

    def _sync_grads(self) -> None:
        """What backward leaves partial: per-head norms and adapters seen by a slice over tensor parallelism
        (summed over TP), a tied embedding whose copies sit on the first and last stage (summed over the pair),
        and ZeRO-0 gradients with TP or PP (averaged over DP in one flat all-reduce; DDP and FSDP reduce their
        own)."""
        if self.tp_partial_params:
            data.allreduce_grads(self.tp_partial_params, self.tp_group, self.plan.tp, average=False)
        if self.tied_group is not None and self.tied_params:
            data.allreduce_grads(self.tied_params, self.tied_group, 2, average=False)
        if self.grad_sync == "allreduce":
            params = [p for p in self.stage.parameters() if p.requires_grad]
            data.allreduce_grads(params, self.dp_group, self.plan.dp, average=True)

    def _stop_on_notice(self) -> None:
        """A rank has a stop notice (a replan, the lease ending): checkpoint at this step boundary, every rank
        together, and exit 0. The job resumes from this checkpoint when it starts again, under any plan."""
        _log(self.topo, f"stop notice ({self.notice.describe()}): checkpointing at step {self.step}, then exiting")
        if self.checkpoint_dir is not None:
            self.save_checkpoint()
        else:
            _log(self.topo, "no checkpoint directory: exiting without a checkpoint")
        self.close()
        dist.destroy_process_group()
        raise SystemExit(0)

    def _collective_failure(self) -> str:
        return (
            f"rank {self.topo.rank} (pp={self.topo.pp_rank} dp={self.topo.dp_rank} tp={self.topo.tp_rank}), "
            f"step {self.step + 1}: a collective failed; a peer rank died or did not answer within the "
            f"collective timeout ({self.topo.timeout_s:g} s)"
        )

    def _watchdog(self) -> threading.Timer:
        """A backstop for a collective that does not honour its timeout (a gloo all-reduce inside DDP's backward
        was seen waiting on a stalled peer past it): a step gets the collective timeout once per collective phase
        it can hold (each micro-batch's forward and backward on each chunk, the gradient syncs, the loss), and a
        step past that ends the process with the same message as a timed-out collective, so the job fails
        instead of hanging."""
        phases = 2 * self.plan.grad_accum * max(self.plan.pp, 1) * len(self.stage) + 5
        message = f"gpuplane_runtime: {self._collective_failure()} (the step ran past {phases} x the timeout)\n"

        def expire() -> None:
            sys.stderr.write(message)
            sys.stderr.flush()
            os._exit(1)

        timer = threading.Timer(self.topo.timeout_s * phases, expire)
        timer.daemon = True
        timer.start()
        return timer

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if not self.autocast:
            return contextlib.nullcontext()
        return torch.autocast(self.topo.device.type, dtype=self.compute_dtype)

    def _positions(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.arange(ids.shape[1], device=self.topo.device).unsqueeze(0).expand(ids.shape[0], -1)

    def _run_chunk(self, index: int, inputs: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        chunk = self.stage[index]
        with self._autocast():
            if self.is_llama:
                return chunk(inputs, self._positions(ids))  # type: ignore[no-any-return]
            out = chunk(inputs)
            logits = getattr(out, "logits", out)
            if not isinstance(logits, torch.Tensor):
                raise UnsupportedModelError(
                    f"{type(chunk).__name__}'s forward returned {type(out).__name__}; the runtime needs "
                    "logits (a tensor or an output with .logits)"
                )
            return logits

    def _backward(self, loss: torch.Tensor, grad: torch.Tensor | None = None) -> None:
        if grad is not None:
            torch.autograd.backward(loss, grad)
        elif self.scaler is not None:
            torch.autograd.backward(self.scaler.scale(loss))
        else:
            torch.autograd.backward(loss)

    def _accumulate(self, batch: torch.Tensor) -> float:
        """One stage: micro-batches one after another, gradients accumulated (DDP syncs on the last only)."""
        total = 0.0
        micros = torch.split(batch, self.plan.micro_batch)
        chunk = self.stage[0]
        for m, ids in enumerate(micros):
            last = m == len(micros) - 1
            sync: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
            if isinstance(chunk, DistributedDataParallel) and not last:
                sync = chunk.no_sync()
            with sync:
                logits = self._run_chunk(0, ids, ids)
                loss = self.loss_fn(logits, ids)
                self._backward(loss / self.plan.grad_accum)
            total += float(loss.detach().item())
        return total

    def _pipeline(self, batch: torch.Tensor) -> float:
        """The plan's pipeline schedule (1F1B, interleaved 1F1B, or GPipe on request) over send/recv."""
        assert self.runner is not None and self.hidden_size is not None
        micros = list(torch.split(batch, self.plan.micro_batch))
        seq = int(batch.shape[1])
        local_seq = seq // self.plan.tp if self.plan.sequence_parallel and self.plan.tp > 1 else seq
        shape = (self.plan.micro_batch, local_seq, self.hidden_size)
        total = self.runner.run(
            micros,
            shape,
            self._run_chunk,
            self.loss_fn,
            self._backward,
            1.0 / self.plan.grad_accum,
        )
        self.pipeline_peak_in_flight = max(self.pipeline_peak_in_flight, self.runner.peak_in_flight)
        return total

    # --- checkpoints and export ------------------------------------------------------------------------------
    def save_checkpoint(
        self, path: str | os.PathLike[str] | None = None, *, extra: dict[str, Any] | None = None
    ) -> Path:
        """Save the model, optimizer, LR scheduler, step and RNG state under ``path`` (default: the
        ``checkpoint_dir`` given to :func:`parallelize`, else ``$GPUPLANE_CHECKPOINT_DIR``) as ``step-<step>``,
        and point ``latest`` at it. ``extra`` (JSON: e.g. a data loader's position) comes back as
        :attr:`checkpoint_extra` on resume. Every rank must call it. Returns the checkpoint's directory."""
        root = Path(path) if path is not None else self.checkpoint_dir
        if root is None:
            raise CheckpointError(
                f"save_checkpoint needs a directory: pass one, or checkpoint_dir= to parallelize(), or set "
                f"{checkpoint.CHECKPOINT_DIR_ENV}"
            )
        saved = checkpoint.save(self, root, extra)
        _log(self.topo, f"saved checkpoint {saved} at step {self.step}")
        return saved

    def load_checkpoint(self, path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """Load a checkpoint saved under any plan (``path`` is a checkpoint or a directory whose ``latest``
        names one; default: the checkpoint directory) into this plan: the model and optimizer reshard, the step,
        scheduler and RNG continue. Every rank must call it. Returns (and keeps as :attr:`checkpoint_extra`) the
        ``extra`` that was saved."""
        root = Path(path) if path is not None else self.checkpoint_dir
        if root is None:
            raise CheckpointError(
                f"load_checkpoint needs a directory: pass one, or checkpoint_dir= to parallelize(), or set "
                f"{checkpoint.CHECKPOINT_DIR_ENV}"
            )
        self.checkpoint_extra = checkpoint.load(self, root)
        self.resumed_from = checkpoint.find_checkpoint(root)
        _log(self.topo, f"resumed from checkpoint {self.resumed_from} at step {self.step}")
        return self.checkpoint_extra

    def export(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        merged: bool = False,
        dtype: torch.dtype | None = None,
        max_shard_bytes: int = export_mod.DEFAULT_SHARD_BYTES,
    ) -> Path:
        """Write the trained model as Hugging Face files under ``path`` (default ``$GPUPLANE_EXPORT_DIR``): the
        model (safetensors shards, index, config, tokenizer files), or for a LoRA plan the PEFT adapter (and with
        ``merged`` the merged model in ``path/merged``). ``dtype`` defaults to the loaded checkpoint's. Gathered a
        tensor at a time and written by global rank 0. Every rank must call it."""
        target = path if path is not None else os.environ.get(export_mod.EXPORT_DIR_ENV)
        if not target:
            raise GpuplaneRuntimeError(f"export needs a directory: pass one or set {export_mod.EXPORT_DIR_ENV}")
        if self.family is None and self.plan.pp > 1:  # pragma: no cover - refused at start
            raise UnsupportedModelError("export of a split model needs a family the runtime knows")
        written = export_mod.export(self, target, merged=merged, dtype=dtype, max_shard_bytes=max_shard_bytes)
        _log(self.topo, f"exported {'the LoRA adapter' if self.lora else 'the model'} to {written}")
        return written

    def close(self) -> None:
        if self.metrics is not None:
            self.metrics.close()


def _apply_recompute(stage: nn.Module, policy: str) -> None:
    layers = getattr(stage, "layers", None)
    if not isinstance(layers, nn.ModuleList):
        return
    for i, layer in enumerate(layers):
        if policy == "full":
            layers[i] = checkpoint_wrapper(layer, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
        elif policy == "selective":
            attn = layer.self_attn
            assert isinstance(attn, nn.Module)
            layer.self_attn = checkpoint_wrapper(attn, checkpoint_impl=CheckpointImpl.NO_REENTRANT)


def _chunk_ranges(n_layers: int, plan: RuntimePlan) -> list[range]:
    """The decoder layers of each of the ``pp x vp`` virtual stages, in pipeline order (virtual stage ``c pp +
    r`` is chunk ``c`` of rank ``r``): the plan's ``layers_per_stage`` per rank, or an even split, each rank's
    layers spread evenly over its ``vp`` chunks (as Megatron-LM places them: the plan says how many each chunk
    holds)."""
    if plan.pp == 1:
        return [range(0, n_layers)]
    per_stage = [len(r) for r in split_layers(n_layers, plan.pp, plan.layers_per_stage)]
    v = plan.vp
    counts: list[int] = []
    for c in range(v):
        for r in range(plan.pp):
            base, extra = divmod(per_stage[r], v)
            counts.append(base + (1 if c < extra else 0))
    if min(counts) < 1:
        raise PlanMismatchError(
            f"the plan's stages hold {per_stage} layers, too few for vp {v} chunks each (every chunk needs a layer)"
        )
    ranges, start = [], 0
    for count in counts:
        ranges.append(range(start, start + count))
        start += count
    return ranges


def _tied_group(topo: Topology, plan: RuntimePlan) -> dist.ProcessGroup | None:
    """The group of this rank's (dp, tp) column's first and last pipeline ranks (every rank creates every one)."""
    mine = None
    for dp in range(plan.dp):
        for tp in range(plan.tp):
            pair = sorted({topo.global_rank_at(0, dp, tp), topo.global_rank_at(plan.pp - 1, dp, tp)})
            group = dist.new_group(pair)
            if topo.rank in pair:
                mine = group
    return mine


def parallelize(
    model: nn.Module | build.Pretrained | build.FromConfig,
    make_optimizer: MakeOptimizer,
    *,
    plan: RuntimePlan | None = None,
    plan_file: str | os.PathLike[str] | None = None,
    loss_fn: LossFn = causal_lm_loss,
    metrics_file: str | os.PathLike[str] | None = None,
    make_scheduler: MakeScheduler | None = None,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    resume: bool = True,
    lora_adapter: str | os.PathLike[str] | None = None,
) -> tuple[ParallelModel, torch.optim.Optimizer]:
    """Apply the job's plan (``$GPUPLANE_PLAN_FILE``, or ``plan``/``plan_file``) to ``model``.

    ``model`` is :func:`~gpuplane_runtime.pretrained` (a Hugging Face checkpoint, loaded sharded: each rank
    reads only what its part of the plan holds), :func:`~gpuplane_runtime.from_config` (random weights, the same
    under every plan), or a model every rank built alike from the same seed (it is split after being built).

    Builds the (pp, dp, tp) device mesh, keeps this rank's pipeline chunks, applies tensor and sequence
    parallelism, activation checkpointing, then DDP or FSDP2 per the ZeRO stage; for a LoRA plan puts PEFT
    adapters on the plan's target modules and freezes the rest (``lora_adapter``: start from a saved PEFT
    adapter); calls ``make_optimizer`` on this rank's trainable parameters. Returns the model (call its
    ``train_step``) and the optimizer.

    Raises :class:`~gpuplane_runtime.GpuplaneRuntimeError` (a subclass naming the problem) when the plan file is
    missing or invalid, the world size or mesh does not fit, the model cannot be split exactly, or the checkpoint
    does not fit the model: checks that need no other rank come before any collective, the rest are agreed by
    every rank, so a bad job fails every rank alike.

    ``make_scheduler(optimizer)`` builds an LR scheduler that :meth:`ParallelModel.train_step` steps after each
    optimizer step. ``checkpoint_dir`` (default ``$GPUPLANE_CHECKPOINT_DIR``) is where
    :meth:`ParallelModel.save_checkpoint` writes; with ``resume`` (the default), when it holds a checkpoint
    (saved under this plan or any other), the model, optimizer, scheduler, step and RNG are loaded from it
    before returning: continue the loop from ``model.step``.
    """
    if plan is None:
        plan = load_plan(plan_file)
    schedule = pipeline.schedule_name(plan.pp, plan.vp, os.environ.get(SCHEDULE_ENV))
    if plan.vp > 1 and plan.pp == 1:
        raise PlanMismatchError(f"the plan has vp {plan.vp} virtual stages without pipeline parallelism (pp 1)")
    if schedule == "interleaved-1f1b" and plan.grad_accum % plan.pp:
        raise PlanMismatchError(
            f"interleaved 1F1B runs micro-batches in groups of pp: grad_accum {plan.grad_accum} does not divide by "
            f"pp {plan.pp}"
        )

    # --- everything that needs no other rank: the model, its family, the split, the checkpoint's tensors ---------
    source_dir: Path | None = None
    ckpt: Checkpoint | None = None
    on_meta = not isinstance(model, nn.Module)
    seed = 0
    attn: str | None = None
    if isinstance(model, build.Pretrained):
        config, source_dir = build.load_config(model)
        attn = model.attn_implementation
    elif isinstance(model, build.FromConfig):
        config, seed = model.config, model.seed
        attn = getattr(config, "_attn_implementation", None)
    else:
        config = getattr(model, "config", None)
    if config is None:
        if plan.tp > 1 or plan.pp > 1:
            raise UnsupportedModelError(
                f"cannot split {type(model).__name__}: it has no `config` (a Hugging Face transformers model)"
            )
        family = None
    else:
        family = families.check_supported(config, tp=plan.tp, pp=plan.pp, lora=plan.lora is not None)
        families.check_arch(config, plan.arch, plan.model)
        if plan.tp > 1:
            families.check_tensor_parallel(config, int(config.vocab_size), plan.tp)
    whole: nn.Module = build.build_meta(config, attn) if on_meta else model  # type: ignore[assignment]
    if family is not None:
        unfuse(whole, family)
    if plan.lora is not None:
        lora.inject(whole, plan.lora)
    buffers = {n for n, _ in whole.named_buffers()}
    expected = loading.expected_tensors(whole, config, family) if on_meta else {}
    problems: list[str] = []
    if source_dir is not None:
        try:
            ckpt = Checkpoint(source_dir)
            problems = loading.check_checkpoint(expected, ckpt, buffers)
        except CheckpointError as err:
            problems = [str(err).removeprefix("gpuplane_runtime: ")]
    adapter_ckpt: Checkpoint | None = None
    if lora_adapter is not None:
        if plan.lora is None:
            raise PlanMismatchError("lora_adapter= was given but the plan is not a LoRA plan (workload lora)")
        adapter_dir = resolve_model_dir(lora_adapter)
        adapter_ckpt = Checkpoint(adapter_dir, [adapter_dir / ADAPTER_FILE])
    parts: DecoderParts | None = find_parts(whole, family) if family is not None else None
    ranges = _chunk_ranges(len(parts.layers), plan) if parts is not None else [range(0)]
    random_source = (
        RandomWeights(whole, seed, float(getattr(config, "initializer_range", 0.02) or 0.02), {})
        if on_meta and (ckpt is None or plan.lora is not None)
        else None
    )

    topo = setup(plan)
    _log(topo, f"plan {plan.describe()} from {plan.source or 'the caller'}; pipeline schedule {schedule}")
    if on_meta:
        loading.agree(problems, ckpt.fingerprint() if ckpt is not None else None, topo.world_size)
    device = topo.device
    compute = _DTYPES[plan.precision]
    if compute == torch.float16 and device.type != "cuda":
        compute = torch.bfloat16
    if plan.precision == "fp8":
        _log(topo, "note: fp8 plans run their matrix products in bf16 (FP8 kernels are not applied)")

    # --- this rank's chunks, split per the plan -----------------------------------------------------------------
    chunks: list[nn.Module] = []
    first_layers: list[int | None] = []
    if parts is not None:
        p = plan.pp
        for c in range(len(ranges) // p):
            vs = c * p + topo.pp_rank
            chunks.append(DecoderStage(parts, ranges[vs], vs == 0, vs == len(ranges) - 1))
            first_layers.append(ranges[vs].start)
        hidden: int | None = int(config.hidden_size)
        if topo.rank == 0:
            spans = ", ".join(f"stage {s}: layers {r.start}-{r.stop - 1}" for s, r in enumerate(ranges))
            _log(topo, f"{family.name if family else 'model'} split into {len(ranges)} chunks ({spans})")
    else:
        chunks.append(whole)
        first_layers.append(None)
        hidden = None
    del parts
    stashed = [build.stash_buffers(c) for c in chunks] if on_meta else []
    if not on_meta:
        for chunk in chunks:
            chunk.to(device)
    partial: list[nn.Module] = []
    for chunk in chunks:
        if plan.tp > 1 and isinstance(chunk, DecoderStage):
            partial += tensor.apply(chunk, topo.mesh["tp"], plan.sequence_parallel)
        if plan.lora is not None:
            _freeze_base(chunk)
        if plan.recompute != "none":
            if family is None:
                _log(topo, f"warning: recompute {plan.recompute} is applied to decoder families the runtime knows")
            else:
                _apply_recompute(chunk, plan.recompute)
    grad_sync = data.grad_sync_kind(plan)
    if grad_sync == "fsdp":
        for chunk in chunks:
            for note in data.fully_shard_stage(chunk, plan, topo, compute):
                _log(topo, f"note: {note}")
    if on_meta:
        # LoRA's frozen base is kept in the compute dtype (the planner counts it at 2 bytes a parameter).
        for chunk, kept in zip(chunks, stashed, strict=True):
            build.materialize(chunk, device, kept)
            _retie(chunk)
            if plan.lora is not None and compute != torch.float32:
                for name, param in chunk.named_parameters():
                    if not param.requires_grad and not names.is_adapter(name):
                        param.data = param.data.to(compute)
        targets = loading.slots(list(zip(chunks, first_layers, strict=True)), config, family, expected)
        base_source = ckpt if ckpt is not None else random_source
        assert base_source is not None
        adapter_source = adapter_ckpt if adapter_ckpt is not None else random_source
        started = time.perf_counter()
        loading.fill(targets, base_source, adapter_source, adapter_keys=adapter_ckpt is not None)
        for src in (ckpt, adapter_ckpt):
            if src is not None:
                src.close()
        _log(
            topo,
            f"loaded this rank's parameters from {base_source.describe()} in {time.perf_counter() - started:.1f} s",
        )
    if plan.lora is not None:
        for chunk in chunks:
            _freeze_base(chunk)
    if grad_sync == "ddp":
        chunks[0] = DistributedDataParallel(chunks[0], process_group=topo.mesh.get_group("dp"))
    trainable = sum(p.numel() for c in chunks for p in c.parameters() if p.requires_grad)
    _log(topo, f"gradients: {grad_sync}; {trainable} trainable parameters on rank 0")
    metrics = StepMetricsWriter(metrics_file) if topo.rank == 0 else None
    parallel = ParallelModel(
        chunks,
        first_layers,
        plan,
        topo,
        grad_sync=grad_sync,
        hidden_size=hidden,
        family=family,
        config=config,
        loss_fn=loss_fn,
        metrics=metrics,
        schedule=schedule,
    )
    parallel.source_dir = source_dir
    parallel.export_dtype = _export_dtype(config)
    parallel.tp_partial_params = [p for m in partial for p in m.parameters() if p.requires_grad]
    if family is not None and plan.pp > 1 and getattr(config, "tie_word_embeddings", False):
        parallel.tied_group = _tied_group(topo, plan)
        for chunk, _ in parallel.named_chunks():
            for module in (getattr(chunk, "embed_tokens", None), getattr(chunk, "lm_head", None)):
                weight = getattr(module, "weight", None)
                if isinstance(weight, nn.Parameter) and weight.requires_grad:
                    parallel.tied_params.append(weight)
    optimizer = make_optimizer(p for p in parallel.stage.parameters() if p.requires_grad)
    parallel.optimizer = optimizer
    if make_scheduler is not None:
        parallel.scheduler = make_scheduler(optimizer)
    parallel.checkpoint_dir = checkpoint.checkpoint_root(checkpoint_dir)
    if (
        resume
        and parallel.checkpoint_dir is not None
        and checkpoint.should_resume(parallel.checkpoint_dir, topo.world_size)
    ):
        parallel.load_checkpoint()
    return parallel, optimizer


def _freeze_base(chunk: nn.Module) -> None:
    """LoRA trains the adapters only. Sharding makes new parameter objects (DTensor's default: trainable), so the
    rule is applied again after each step that does."""
    for name, param in chunk.named_parameters():
        param.requires_grad_(names.is_adapter(name))


def _retie(chunk: nn.Module) -> None:
    """``to_empty`` makes a new parameter per module for a DTensor: tie the head to the embedding again."""
    config = getattr(chunk, "config", None)
    if not getattr(config, "tie_word_embeddings", False):
        return
    if isinstance(chunk, DecoderStage):
        embed, head = chunk.embed_tokens, chunk.lm_head
    else:
        get_in, get_out = getattr(chunk, "get_input_embeddings", None), getattr(chunk, "get_output_embeddings", None)
        embed = get_in() if callable(get_in) else None
        head = get_out() if callable(get_out) else None
    if embed is None or head is None:
        return
    if head.weight is not embed.weight:
        head.weight = embed.weight


def _export_dtype(config: Any) -> torch.dtype:
    value = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    if isinstance(value, torch.dtype):
        return value
    if isinstance(value, str) and hasattr(torch, value) and isinstance(getattr(torch, value), torch.dtype):
        return getattr(torch, value)  # type: ignore[no-any-return]
    return torch.float32
