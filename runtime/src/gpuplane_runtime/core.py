"""``parallelize``: apply the job's plan to a model, and a train step that runs it (pipeline, accumulation,
gradient synchronisation, optimizer, metrics) so the training script holds no parallelism code."""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel

from . import checkpoint, llama, notice
from .distributed import Topology, setup
from .errors import CheckpointError, CollectiveError, GpuplaneRuntimeError, PlanMismatchError, UnsupportedModelError
from .metrics import StepMetricsWriter
from .plan import RuntimePlan, load_plan

MakeOptimizer = Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer]
MakeScheduler = Callable[[torch.optim.Optimizer], torch.optim.lr_scheduler.LRScheduler]
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

_DTYPES = {"bf16": torch.bfloat16, "fp8": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


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
        stage: nn.Module,
        plan: RuntimePlan,
        topo: Topology,
        *,
        grad_sync: str,
        hidden_size: int | None,
        is_llama: bool,
        loss_fn: LossFn,
        metrics: StepMetricsWriter | None,
    ) -> None:
        super().__init__()
        self.stage = stage
        self.plan = plan
        self.topo = topo
        self.grad_sync = grad_sync
        self.hidden_size = hidden_size
        self.is_llama = is_llama
        self.loss_fn = loss_fn
        self.metrics = metrics
        self.optimizer: torch.optim.Optimizer | None = None
        self.scheduler: torch.optim.lr_scheduler.LRScheduler | None = None
        self.step = 0
        self.checkpoint_dir: Path | None = None
        self.checkpoint_extra: dict[str, Any] = {}
        self.resumed_from: Path | None = None
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
        self.prev_rank = topo.global_rank_at(topo.pp_rank - 1, topo.dp_rank, topo.tp_rank) if topo.pp_rank else -1
        self.next_rank = (
            topo.global_rank_at(topo.pp_rank + 1, topo.dp_rank, topo.tp_rank) if not self.is_last_stage else -1
        )
        self.dp_group = topo.mesh.get_group("dp")
        self.notice = notice.StopNotice.from_environment()
        if self.notice.path is not None:
            _log(topo, f"stop notices: watching {self.notice.path} and SIGUSR1")

    # --- where this rank sits -----------------------------------------------------------------------------
    @property
    def coordinates(self) -> dict[str, int]:
        return self.topo.coordinates()

    @property
    def decoder_layers(self) -> range | None:
        """The model's decoder layers this rank's pipeline stage holds (a Llama-family model; None for another
        model), e.g. ``range(0, 5)``: the plan's ``layers_per_stage`` for its stage, which are uneven on a mix of
        unlike GPUs."""
        stage = self.stage.module if isinstance(self.stage, DistributedDataParallel) else self.stage
        if not isinstance(stage, llama.LlamaStage):
            return None
        return range(stage.first_layer, stage.first_layer + len(stage.layers))

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
        return self._run_stage(input_ids.to(self.topo.device))

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
            loss_sum = self._pipeline(batch) if self.plan.pp > 1 else self._accumulate(batch)
            if self.grad_sync == "allreduce":
                self._allreduce_grads()
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
        it can hold (each micro-batch's forward and backward on each stage, the gradient sync, the loss), and a
        step past that ends the process with the same message as a timed-out collective, so the job fails
        instead of hanging."""
        phases = 2 * self.plan.grad_accum * max(self.plan.pp, 1) + 3
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

    def _positions(self, micro: torch.Tensor) -> torch.Tensor:
        return torch.arange(micro.shape[1], device=self.topo.device).unsqueeze(0).expand(micro.shape[0], -1)

    def _run_stage(self, inputs: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        with self._autocast():
            if self.is_llama:
                return self.stage(inputs, self._positions(ids if ids is not None else inputs))  # type: ignore[no-any-return]
            out = self.stage(inputs)
            logits = getattr(out, "logits", out)
            if not isinstance(logits, torch.Tensor):
                raise UnsupportedModelError(
                    f"{type(self.stage).__name__}'s forward returned {type(out).__name__}; the runtime needs "
                    "logits (a tensor or an output with .logits)"
                )
            return logits

    def _backward(self, loss: torch.Tensor) -> None:
        if self.scaler is not None:
            torch.autograd.backward(self.scaler.scale(loss))
        else:
            torch.autograd.backward(loss)

    def _accumulate(self, batch: torch.Tensor) -> float:
        """One stage: micro-batches one after another, gradients accumulated (DDP syncs on the last only)."""
        total = 0.0
        micros = torch.split(batch, self.plan.micro_batch)
        for m, ids in enumerate(micros):
            last = m == len(micros) - 1
            sync: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
            if isinstance(self.stage, DistributedDataParallel) and not last:
                sync = self.stage.no_sync()
            with sync:
                logits = self._run_stage(ids)
                loss = self.loss_fn(logits, ids)
                self._backward(loss / self.plan.grad_accum)
            total += float(loss.detach().item())
        return total

    def _pipeline(self, batch: torch.Tensor) -> float:
        """GPipe over point-to-point send/recv (runs on gloo and NCCL alike): every micro-batch forward, then
        every micro-batch backward. Each stage exchanges activations with the same (dp, tp) rank of the
        neighbouring stages."""
        assert self.hidden_size is not None
        micros = torch.split(batch, self.plan.micro_batch)
        seq = int(batch.shape[1])
        local_seq = seq // self.plan.tp if self.plan.sequence_parallel and self.plan.tp > 1 else seq
        shape = (self.plan.micro_batch, local_seq, self.hidden_size)
        inputs: list[torch.Tensor] = []
        outputs: list[torch.Tensor] = []
        total = 0.0
        for ids in micros:
            if self.is_first_stage:
                stage_in = ids
            else:
                stage_in = torch.empty(shape, dtype=self.wire_dtype, device=self.topo.device)
                dist.recv(stage_in, src=self.prev_rank)
                stage_in.requires_grad_(True)
            out = self._run_stage(stage_in, ids)
            if self.is_last_stage:
                loss = self.loss_fn(out, ids)
                total += float(loss.detach().item())
                out = loss / self.plan.grad_accum
            else:
                dist.send(out.detach().to(self.wire_dtype).contiguous(), dst=self.next_rank)
            inputs.append(stage_in)
            outputs.append(out)
        for m in range(len(micros)):
            out = outputs[m]
            if self.is_last_stage:
                self._backward(out)
            else:
                grad = torch.empty(shape, dtype=self.wire_dtype, device=self.topo.device)
                dist.recv(grad, src=self.next_rank)
                torch.autograd.backward(out, grad.to(out.dtype))
            if not self.is_first_stage:
                stage_in = inputs[m]
                assert stage_in.grad is not None
                dist.send(stage_in.grad.to(self.wire_dtype).contiguous(), dst=self.prev_rank)
            inputs[m] = outputs[m] = torch.empty(0)
        return total

    def _allreduce_grads(self) -> None:
        """ZeRO-0 with tensor or pipeline parallelism: average the gradients over the data-parallel group in one
        flat all-reduce (DDP's wrapper does not take DTensor parameters or GPipe's order of backwards)."""
        if self.plan.dp == 1:
            return
        with torch.no_grad():
            grads: list[torch.Tensor] = []
            for p in self.stage.parameters():
                if p.grad is None:
                    continue
                g = p.grad
                grads.append(g.to_local() if isinstance(g, DTensor) else g)
            if not grads:
                return
            flat = torch.cat([g.reshape(-1).to(torch.float32) for g in grads])
            dist.all_reduce(flat, group=self.dp_group)
            flat /= self.plan.dp
            offset = 0
            for g in grads:
                n = g.numel()
                g.copy_(flat[offset : offset + n].view_as(g))
                offset += n

    # --- checkpoints --------------------------------------------------------------------------------------------
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

    def close(self) -> None:
        if self.metrics is not None:
            self.metrics.close()


def _apply_recompute_llama(stage: llama.LlamaStage, policy: str) -> None:
    for i, layer in enumerate(stage.layers):
        if policy == "full":
            stage.layers[i] = checkpoint_wrapper(layer, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
        elif policy == "selective":
            attn = layer.self_attn
            assert isinstance(attn, nn.Module)
            layer.self_attn = checkpoint_wrapper(attn, checkpoint_impl=CheckpointImpl.NO_REENTRANT)


def _fsdp(module: nn.Module, plan: RuntimePlan, topo: Topology, compute: torch.dtype) -> None:
    """FSDP2 over the data-parallel mesh: each decoder layer its own unit, then the stage's root."""
    kwargs: dict[str, Any] = {"mesh": topo.mesh["dp"], "reshard_after_forward": plan.zero_stage >= 3}
    if compute != torch.float32:
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=compute, reduce_dtype=torch.float32)
    if plan.offload != "none":
        if topo.device.type == "cuda":
            kwargs["offload_policy"] = CPUOffloadPolicy()
        else:
            _log(topo, f"note: offload {plan.offload} has nothing to do on the CPU; states stay where they are")
    layers = getattr(module, "layers", None)
    if isinstance(layers, nn.ModuleList):
        for layer in layers:
            fully_shard(layer, **kwargs)
    fully_shard(module, **kwargs)


def parallelize(
    model: nn.Module,
    make_optimizer: MakeOptimizer,
    *,
    plan: RuntimePlan | None = None,
    plan_file: str | os.PathLike[str] | None = None,
    loss_fn: LossFn = causal_lm_loss,
    metrics_file: str | os.PathLike[str] | None = None,
    make_scheduler: MakeScheduler | None = None,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    resume: bool = True,
) -> tuple[ParallelModel, torch.optim.Optimizer]:
    """Apply the job's plan (``$GPUPLANE_PLAN_FILE``, or ``plan``/``plan_file``) to ``model``.

    Builds the (pp, dp, tp) device mesh, keeps this rank's pipeline stage, applies tensor and sequence
    parallelism (Hugging Face Llama-family models), activation checkpointing, then DDP or FSDP2 per the ZeRO
    stage, and calls ``make_optimizer`` on this rank's parameters. Returns the model (call its ``train_step``)
    and the optimizer. Every rank must build the same model from the same seed before calling it.

    Raises :class:`~gpuplane_runtime.GpuplaneRuntimeError` (a subclass naming the problem) before any
    collective when the plan file is missing or invalid, the world size or mesh does not fit, or the model
    cannot be split.

    ``make_scheduler(optimizer)`` builds an LR scheduler that :meth:`ParallelModel.train_step` steps after each
    optimizer step. ``checkpoint_dir`` (default ``$GPUPLANE_CHECKPOINT_DIR``) is where
    :meth:`ParallelModel.save_checkpoint` writes; with ``resume`` (the default), when it holds a checkpoint
    (saved under this plan or any other), the model, optimizer, scheduler, step and RNG are loaded from it
    before returning: continue the loop from ``model.step``.
    """
    if plan is None:
        plan = load_plan(plan_file)
    # Checks that need no other rank come first, so a bad plan fails every rank alike instead of hanging.
    parts: llama.LlamaParts | None = None
    try:
        parts = llama.find_parts(model)
    except UnsupportedModelError:
        if plan.tp > 1 or plan.pp > 1:
            raise
    if parts is not None:
        llama.check_tensor_parallel(parts, plan.tp)
        ranges = llama.split_layers(len(parts.layers), plan.pp, plan.layers_per_stage if plan.pp > 1 else ())
    topo = setup(plan)
    _log(topo, f"plan {plan.describe()} from {plan.source or 'the caller'}")
    device = topo.device
    compute = _DTYPES[plan.precision]
    if compute == torch.float16 and device.type != "cuda":
        compute = torch.bfloat16
    if plan.precision == "fp8":
        _log(topo, "note: fp8 plans run their matrix products in bf16 (FP8 kernels are not applied)")

    stage: nn.Module
    if parts is not None:
        note = llama.prepare_attention(parts)
        if note:
            _log(topo, note)
        stage = llama.LlamaStage(parts, ranges[topo.pp_rank], topo.pp_rank == 0, topo.pp_rank == plan.pp - 1)
        del parts  # the other stages' layers go with the caller's model
        stage.to(device)
        if plan.tp > 1:
            llama.apply_tensor_parallel(stage, topo.mesh["tp"], plan.sequence_parallel)
        if plan.recompute != "none":
            _apply_recompute_llama(stage, plan.recompute)
        hidden: int | None = int(getattr(model, "config").hidden_size)  # noqa: B009 - a transformers config
    else:
        stage = model.to(device)
        hidden = None
        if plan.recompute != "none":
            _log(topo, f"warning: recompute {plan.recompute} is applied to Llama-family layers only; not applied")

    grad_sync = "none"
    if plan.dp > 1:
        if plan.zero_stage >= 1:
            grad_sync = "fsdp"
            _fsdp(stage, plan, topo, compute)
        elif plan.tp == 1 and plan.pp == 1:
            grad_sync = "ddp"
            stage = DistributedDataParallel(stage, process_group=topo.mesh.get_group("dp"))
        else:
            grad_sync = "allreduce"
    _log(topo, f"gradients: {grad_sync}; {sum(1 for _ in stage.parameters())} parameter tensors on rank 0")
    metrics = StepMetricsWriter(metrics_file) if topo.rank == 0 else None
    parallel = ParallelModel(
        stage,
        plan,
        topo,
        grad_sync=grad_sync,
        hidden_size=hidden,
        is_llama=hidden is not None,
        loss_fn=loss_fn,
        metrics=metrics,
    )
    optimizer = make_optimizer(stage.parameters())
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
