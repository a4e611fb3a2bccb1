from enum import StrEnum


class GenerationState(StrEnum):
    ABANDONED = "abandoned"
    ENDED = "ended"
    PENDING = "pending"
    RUNNING = "running"

    def __str__(self) -> str:
        return str(self.value)
