from enum import StrEnum


class AuditAction(StrEnum):
    API_KEY_CREATED = "api_key.created"
    API_KEY_REVOKED = "api_key.revoked"
    API_KEY_ROTATED = "api_key.rotated"

    def __str__(self) -> str:
        return str(self.value)
