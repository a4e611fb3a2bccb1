from enum import StrEnum


class VolumeAction(StrEnum):
    DESTROY = "destroy"
    HOLD = "hold"

    def __str__(self) -> str:
        return str(self.value)
