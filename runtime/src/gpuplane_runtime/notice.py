"""Stop notices: gpuplane tells a job before it stops it (a replan, its lease released or reaching its end), so
the runtime checkpoints at a step boundary and exits instead of losing the work since the last save.

The node's agent writes ``$GPUPLANE_STOP_NOTICE_FILE`` (JSON: ``reason``, ``grace_s``, ``deadline`` in Unix
seconds) and sends SIGUSR1 to the job's ranks; after ``grace_s`` it stops the job (SIGTERM, then SIGKILL).
:meth:`ParallelModel.train_step` looks for either at every step and agrees with the other ranks in the step's
own loss all-reduce, so every rank stops at the same step.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

STOP_NOTICE_ENV = "GPUPLANE_STOP_NOTICE_FILE"


@dataclass
class StopNotice:
    """Whether a stop notice reached this rank: the file (polled) or the signal (caught)."""

    path: Path | None
    signalled: bool = field(default=False)

    @classmethod
    def from_environment(cls) -> StopNotice:
        """The notice of this job (``$GPUPLANE_STOP_NOTICE_FILE``), with a SIGUSR1 handler when it runs under
        gpuplane; nothing to watch otherwise."""
        value = os.environ.get(STOP_NOTICE_ENV)
        notice = cls(Path(value) if value else None)
        if notice.path is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGUSR1, notice._on_signal)
        return notice

    def _on_signal(self, _signum: int, _frame: FrameType | None) -> None:
        self.signalled = True

    def seen(self) -> bool:
        return self.signalled or (self.path is not None and self.path.is_file())

    def describe(self) -> str:
        """The notice's reason and grace, as the agent wrote them."""
        if self.path is not None and self.path.is_file():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                return f"{data.get('reason', '?')}, {data.get('grace_s', '?')} s of grace"
            except (OSError, ValueError):
                pass
        return "SIGUSR1"
