from enum import StrEnum


class Placement(StrEnum):
    PACK = "pack"
    SINGLE_NODE = "single_node"
    SPREAD = "spread"

    def __str__(self) -> str:
        return str(self.value)
