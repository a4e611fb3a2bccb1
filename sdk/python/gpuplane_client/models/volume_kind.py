from enum import StrEnum


class VolumeKind(StrEnum):
    HOST = "host"
    POOL = "pool"

    def __str__(self) -> str:
        return str(self.value)
