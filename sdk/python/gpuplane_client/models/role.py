from enum import StrEnum


class Role(StrEnum):
    OPERATOR = "operator"
    TENANT_ADMIN = "tenant_admin"
    TENANT_MEMBER = "tenant_member"

    def __str__(self) -> str:
        return str(self.value)
