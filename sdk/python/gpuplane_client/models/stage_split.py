from enum import StrEnum


class StageSplit(StrEnum):
    EMBEDDING_AND_LOSS = "embedding_and_loss"
    EVEN = "even"
    LAYOUT = "layout"
    UNEVEN = "uneven"

    def __str__(self) -> str:
        return str(self.value)
