from enum import StrEnum


class LeaseState(StrEnum):
    ACTIVE = "active"
    EXPIRED = "expired"
    INTERRUPTED = "interrupted"
    QUEUED = "queued"
    RELEASED = "released"
    TERMINATED = "terminated"

    def __str__(self) -> str:
        return str(self.value)
