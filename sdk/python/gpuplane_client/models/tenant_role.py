from enum import StrEnum


class TenantRole(StrEnum):
    TENANT_ADMIN = "tenant_admin"
    TENANT_MEMBER = "tenant_member"

    def __str__(self) -> str:
        return str(self.value)
