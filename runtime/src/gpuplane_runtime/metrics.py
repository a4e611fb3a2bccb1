"""Step metrics: global rank 0 appends one JSON line per optimizer step; the agent ships them to the API."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import TextIO

METRICS_FILE_ENV = "GPUPLANE_METRICS_FILE"
DEFAULT_METRICS_FILE = "gpuplane_steps.jsonl"


class StepMetricsWriter:
    """Appends ``{"step", "step_time_s", "tokens", "loss", "peak_memory_bytes", "time"}`` lines.

    A loss that is not finite (a diverged run) is written as ``null`` so each line stays valid JSON.

    Writes and flushes each line. A file that cannot be opened or written is reported once on stderr and then
    ignored: metrics never stop training.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path if path is not None else os.environ.get(METRICS_FILE_ENV) or DEFAULT_METRICS_FILE)
        self._file: TextIO | None = None
        self._broken = False

    def _warn(self, err: BaseException) -> None:
        if not self._broken:
            print(
                f"gpuplane_runtime: warning: cannot write step metrics to {str(self.path)!r} ({err}); "
                "training goes on without them",
                file=sys.stderr,
                flush=True,
            )
        self._broken = True

    def write(self, step: int, step_time_s: float, tokens: int, loss: float, peak_memory_bytes: int) -> None:
        if self._broken:
            return
        record = {
            "step": int(step),
            "step_time_s": float(step_time_s),
            "tokens": int(tokens),
            "loss": float(loss) if math.isfinite(loss) else None,
            "peak_memory_bytes": int(peak_memory_bytes),
            "time": time.time(),
        }
        try:
            if self._file is None:
                self._file = self.path.open("a", encoding="utf-8")
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()
        except (OSError, ValueError) as err:
            self._warn(err)

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None
