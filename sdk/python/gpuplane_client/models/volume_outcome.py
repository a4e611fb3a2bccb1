from enum import StrEnum


class VolumeOutcome(StrEnum):
    DESTROYED = "destroyed"
    FAILED = "failed"
    READY = "ready"

    def __str__(self) -> str:
        return str(self.value)
