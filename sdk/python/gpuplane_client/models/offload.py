from enum import StrEnum


class Offload(StrEnum):
    NONE = "none"
    OPTIMIZER = "optimizer"
    OPTIMIZER_AND_PARAMS = "optimizer_and_params"

    def __str__(self) -> str:
        return str(self.value)
