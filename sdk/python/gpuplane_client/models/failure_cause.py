from enum import StrEnum


class FailureCause(StrEnum):
    GPU_FAILED = "gpu_failed"
    NODE_LOST = "node_lost"
    PROCESS_DIED = "process_died"
    STALLED = "stalled"

    def __str__(self) -> str:
        return str(self.value)
