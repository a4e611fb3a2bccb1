from enum import StrEnum


class Desired(StrEnum):
    CANCEL = "cancel"
    RUN = "run"

    def __str__(self) -> str:
        return str(self.value)
