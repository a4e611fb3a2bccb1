"""Pipeline schedules over point-to-point sends and receives (gloo and NCCL alike).

A schedule is, for each rank, the order of its forward (F) and backward (B) passes over (chunk, micro-batch):

- **1F1B** (the default): stage ``s`` of ``p`` runs ``p - s - 1`` forwards, then alternates one forward and one
  backward, then drains; it holds at most ``min(p - s, m)`` micro-batches' activations at once, whatever the
  number ``m`` of micro-batches (Narayanan et al. 2021). The planner's memory model counts the same.
- **Interleaved 1F1B** when the plan has ``vp > 1`` virtual stages per rank: rank ``r`` holds chunks
  ``r, r + p, ...`` of ``p * vp`` and follows Megatron-LM's order (warm-up of ``2 (p - r - 1) + (vp - 1) p``
  forwards); the bubble shrinks by ``vp``.
- **GPipe** (every forward, then every backward), kept for comparison: it holds all ``m``.

The losses are the same under every schedule: each micro-batch's forward and backward are the same computations,
only their order differs. :class:`PipelineRunner` executes a rank's list: the receive an action needs is posted
one action ahead, sends are non-blocking, and each message carries a tag naming its virtual stage, micro-batch
and direction, with forward and backward traffic on two process groups, so no two messages between a pair of
ranks can be confused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from ..errors import PlanMismatchError

SCHEDULES = ("1f1b", "interleaved-1f1b", "gpipe")


@dataclass(frozen=True)
class Action:
    kind: str  # "F" or "B"
    chunk: int
    micro: int


def schedule_name(pp: int, vp: int, requested: str | None = None) -> str:
    if requested == "gpipe":
        return "gpipe"
    if requested not in (None, "", "1f1b", "interleaved-1f1b"):
        raise PlanMismatchError(f"pipeline schedule {requested!r} is not one of {', '.join(SCHEDULES)}")
    return "interleaved-1f1b" if vp > 1 else "1f1b"


def actions(name: str, p: int, v: int, m: int, rank: int) -> list[Action]:
    """The order of rank ``rank``'s passes under schedule ``name``, ``p`` ranks, ``v`` chunks each, ``m``
    micro-batches."""
    if name == "gpipe":
        fwd = [Action("F", c, i) for i in range(m) for c in range(v)]
        return fwd + [Action("B", c, i) for i in range(m) for c in reversed(range(v))]
    if name == "1f1b":
        warmup = min(p - rank - 1, m)
        order = [Action("F", 0, i) for i in range(warmup)]
        for i in range(m - warmup):
            order += [Action("F", 0, warmup + i), Action("B", 0, i)]
        order += [Action("B", 0, i) for i in range(m - warmup, m)]
        return order
    if name == "interleaved-1f1b":
        if m % p:
            raise PlanMismatchError(
                f"interleaved 1F1B runs micro-batches in groups of pp: grad_accum {m} does not divide by pp {p}"
            )
        total = m * v
        warmup = min((p - rank - 1) * 2 + (v - 1) * p, total)

        def micro(k: int) -> int:
            return (k // (p * v)) * p + k % p

        def forward_pass(k: int) -> Action:
            return Action("F", (k // p) % v, micro(k))

        def backward_pass(k: int) -> Action:
            return Action("B", v - 1 - (k // p) % v, micro(k))

        order = [forward_pass(k) for k in range(warmup)]
        for k in range(total - warmup):
            order += [forward_pass(warmup + k), backward_pass(k)]
        order += [backward_pass(k) for k in range(total - warmup, total)]
        return order
    raise PlanMismatchError(f"unknown pipeline schedule {name!r}")


def max_in_flight(order: list[Action]) -> int:
    """The most micro-batch chunks whose activations a rank holds at once under ``order``."""
    live = peak = 0
    for a in order:
        live += 1 if a.kind == "F" else -1
        peak = max(peak, live)
    return peak


class PipelineRunner:
    """Runs one rank's actions for one optimizer step. ``run_chunk(chunk, inputs, ids)`` is the chunk's forward
    (token ids in on virtual stage 0, logits out of the last); ``loss_of(logits, ids)`` the loss of a
    micro-batch; ``backward(tensor, grad)`` a backward pass (the loss scaler's, where there is one)."""

    def __init__(
        self,
        *,
        name: str,
        p: int,
        v: int,
        rank_at: Callable[[int], int],
        pp_rank: int,
        groups: tuple[dist.ProcessGroup, dist.ProcessGroup],
        device: torch.device,
        wire_dtype: torch.dtype,
    ) -> None:
        self.name, self.p, self.v = name, p, v
        self.rank_at = rank_at  # global rank of this (dp, tp) column at pipeline rank i
        self.pp_rank = pp_rank
        self.fwd_group, self.bwd_group = groups
        self.device = device
        self.wire_dtype = wire_dtype
        self.peak_in_flight = 0

    def _vs(self, chunk: int) -> int:
        return chunk * self.p + self.pp_rank

    def _tag(self, vs: int, micro: int, m: int, backward: bool) -> int:
        return (vs * m + micro) * 2 + int(backward)

    def run(
        self,
        micros: list[torch.Tensor],
        shape: tuple[int, ...],
        run_chunk: Callable[[int, torch.Tensor, torch.Tensor], torch.Tensor],
        loss_of: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        backward: Callable[[torch.Tensor, torch.Tensor | None], None],
        scale: float,
    ) -> float:
        m = len(micros)
        last_vs = self.p * self.v - 1
        order = actions(self.name, self.p, self.v, m, self.pp_rank)
        stash: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}
        sends: list[tuple[Any, torch.Tensor]] = []
        pending: dict[int, tuple[Any, torch.Tensor]] = {}
        total = 0.0
        live = 0

        def needs_recv(a: Action) -> tuple[int, int, bool] | None:
            vs = self._vs(a.chunk)
            if a.kind == "F" and vs > 0:
                return self.rank_at((vs - 1) % self.p), self._tag(vs, a.micro, m, False), False
            if a.kind == "B" and vs < last_vs:
                return self.rank_at((vs + 1) % self.p), self._tag(vs, a.micro, m, True), True
            return None

        def post(index: int) -> None:
            if index >= len(order) or index in pending:
                return
            need = needs_recv(order[index])
            if need is None:
                return
            src, tag, is_grad = need
            buf = torch.empty(shape, dtype=self.wire_dtype, device=self.device)
            group = self.bwd_group if is_grad else self.fwd_group
            pending[index] = (dist.irecv(buf, src=src, group=group, tag=tag), buf)

        def send(tensor: torch.Tensor, dst_vs: int, micro: int, is_grad: bool) -> None:
            data = tensor.detach().to(self.wire_dtype).contiguous()
            group = self.bwd_group if is_grad else self.fwd_group
            work = dist.isend(
                data, dst=self.rank_at(dst_vs % self.p), group=group, tag=self._tag(dst_vs, micro, m, is_grad)
            )
            sends.append((work, data))
            # Drop the buffers of sends that completed, so waiting sends never pile up past what is in flight.
            sends[:] = [(w, d) for w, d in sends if not w.is_completed()]

        post(0)
        for index, a in enumerate(order):
            post(index + 1)
            received: torch.Tensor | None = None
            if index in pending:
                work, received = pending.pop(index)
                work.wait()
            vs = self._vs(a.chunk)
            ids = micros[a.micro]
            if a.kind == "F":
                if vs == 0:
                    stage_in = ids
                else:
                    assert received is not None
                    stage_in = received.requires_grad_(True)
                out = run_chunk(a.chunk, stage_in, ids)
                if vs == last_vs:
                    loss = loss_of(out, ids)
                    total += float(loss.detach().item())
                    out = loss * scale
                else:
                    send(out, vs + 1, a.micro, False)
                stash[(a.chunk, a.micro)] = (stage_in, out)
                live += 1
                self.peak_in_flight = max(self.peak_in_flight, live)
            else:
                stage_in, out = stash.pop((a.chunk, a.micro))
                if vs == last_vs:
                    backward(out, None)
                else:
                    assert received is not None
                    backward(out, received.to(out.dtype))
                if vs > 0:
                    assert stage_in.grad is not None
                    send(stage_in.grad, vs - 1, a.micro, True)
                live -= 1
        for work, _ in sends:
            work.wait()
        return total
