from enum import StrEnum


class NodeState(StrEnum):
    CORDONED = "cordoned"
    DRAINED = "drained"
    DRAINING = "draining"
    MAINTENANCE = "maintenance"
    OFFLINE = "offline"
    READY = "ready"
    UNREACHABLE = "unreachable"

    def __str__(self) -> str:
        return str(self.value)
