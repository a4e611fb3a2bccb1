from enum import StrEnum


class Term(StrEnum):
    HOURLY = "hourly"
    MONTHLY = "monthly"

    def __str__(self) -> str:
        return str(self.value)
