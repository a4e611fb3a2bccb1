from enum import StrEnum


class NodeState(StrEnum):
    AWAITING_AGENT = "awaiting_agent"
    CORDONED = "cordoned"
    DRAINED = "drained"
    DRAINING = "draining"
    MAINTENANCE = "maintenance"
    NOT_READY = "not_ready"
    OFFLINE = "offline"
    READY = "ready"
    UNREACHABLE = "unreachable"

    def __str__(self) -> str:
        return str(self.value)
