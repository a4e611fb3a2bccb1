from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="AddSshKeyRequest")


@_attrs_define
class AddSshKeyRequest:
    """
    Example:
        {'name': 'laptop', 'public_key': 'ssh-ed25519
            AAAAC3NzaC1lZDI1NTE5AAAAIJmQqpe2LbdAuLcsJBHGH24YDvVpSXVP7y4cwZoJEEJg alice@laptop'}

    Attributes:
        name (str): 1-100 characters, no control characters.
        public_key (str): One OpenSSH public key line: `<type> <base64> [comment]` (the comment is dropped).
    """

    name: str
    public_key: str

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        public_key = self.public_key

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
                "public_key": public_key,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        name = d.pop("name")

        public_key = d.pop("public_key")

        add_ssh_key_request = cls(
            name=name,
            public_key=public_key,
        )

        return add_ssh_key_request
