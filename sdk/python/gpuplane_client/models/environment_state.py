from enum import StrEnum


class EnvironmentState(StrEnum):
    FAILED = "failed"
    READY = "ready"
    STARTING = "starting"
    STOPPED = "stopped"

    def __str__(self) -> str:
        return str(self.value)
