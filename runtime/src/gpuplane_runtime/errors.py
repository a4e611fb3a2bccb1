"""The runtime's errors: each names what is wrong, so a failed job's output says why it failed."""

from __future__ import annotations


class GpuplaneRuntimeError(RuntimeError):
    """Base of every error the runtime raises on purpose. The message starts with ``gpuplane_runtime:``."""

    def __init__(self, message: str) -> None:
        super().__init__(message if message.startswith("gpuplane_runtime:") else f"gpuplane_runtime: {message}")


class PlanFileError(GpuplaneRuntimeError):
    """The plan file is missing, unreadable, or not a plan this runtime understands."""


class PlanMismatchError(GpuplaneRuntimeError):
    """The plan does not fit this job: world size, mesh, batch or layer counts do not divide."""


class UnsupportedModelError(GpuplaneRuntimeError):
    """The model cannot be split as the plan asks; the message names the module."""


class CollectiveError(GpuplaneRuntimeError):
    """A collective or point-to-point operation failed: a peer died or the collective timeout passed."""


class CheckpointError(GpuplaneRuntimeError):
    """A checkpoint cannot be saved or loaded: missing, unreadable, or saved from another model."""
