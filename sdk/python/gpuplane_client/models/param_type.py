from enum import StrEnum


class ParamType(StrEnum):
    BOOL = "bool"
    ENUM = "enum"
    FLOAT = "float"
    INT = "int"
    STRING = "string"

    def __str__(self) -> str:
        return str(self.value)
