from enum import StrEnum


class WorkloadKind(StrEnum):
    INFERENCE = "inference"
    LORA = "lora"
    TRAIN = "train"

    def __str__(self) -> str:
        return str(self.value)
