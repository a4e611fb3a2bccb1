from enum import StrEnum


class Precision(StrEnum):
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"

    def __str__(self) -> str:
        return str(self.value)
