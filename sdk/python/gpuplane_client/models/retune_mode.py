from enum import StrEnum


class RetuneMode(StrEnum):
    AUTO = "auto"
    OFF = "off"
    SUGGEST = "suggest"

    def __str__(self) -> str:
        return str(self.value)
