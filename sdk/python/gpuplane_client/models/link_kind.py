from enum import StrEnum


class LinkKind(StrEnum):
    NVLINK = "nvlink"
    PCIE = "pcie"

    def __str__(self) -> str:
        return str(self.value)
