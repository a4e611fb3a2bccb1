from enum import StrEnum


class EntryKind(StrEnum):
    ADJUSTMENT = "adjustment"
    CREDIT = "credit"
    TOPUP = "topup"
    USAGE = "usage"

    def __str__(self) -> str:
        return str(self.value)
