from enum import StrEnum


class DesiredState(StrEnum):
    ACTIVE = "active"
    DRAIN = "drain"
    MAINTENANCE = "maintenance"

    def __str__(self) -> str:
        return str(self.value)
