from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    lease_id: UUID,
    volume_id: UUID,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "delete",
        "url": "/v1/leases/{lease_id}/volumes/{volume_id}".format(
            lease_id=quote(str(lease_id), safe=""),
            volume_id=quote(str(volume_id), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Any | Problem | None:
    if response.status_code == 204:
        response_204 = cast(Any, None)
        return response_204

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())

        return response_409

    if response.status_code == 500:
        response_500 = Problem.from_dict(response.json())

        return response_500

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Any | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    lease_id: UUID,
    volume_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Response[Any | Problem]:
    """Detach a volume from a lease (tenant admin), while no job and no SSH environment of the lease runs.
    Its
    data stays in the volume.

    Args:
        lease_id (UUID):
        volume_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | Problem]
    """

    kwargs = _get_kwargs(
        lease_id=lease_id,
        volume_id=volume_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    lease_id: UUID,
    volume_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Any | Problem | None:
    """Detach a volume from a lease (tenant admin), while no job and no SSH environment of the lease runs.
    Its
    data stays in the volume.

    Args:
        lease_id (UUID):
        volume_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | Problem
    """

    return sync_detailed(
        lease_id=lease_id,
        volume_id=volume_id,
        client=client,
    ).parsed


async def asyncio_detailed(
    lease_id: UUID,
    volume_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Response[Any | Problem]:
    """Detach a volume from a lease (tenant admin), while no job and no SSH environment of the lease runs.
    Its
    data stays in the volume.

    Args:
        lease_id (UUID):
        volume_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | Problem]
    """

    kwargs = _get_kwargs(
        lease_id=lease_id,
        volume_id=volume_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    lease_id: UUID,
    volume_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Any | Problem | None:
    """Detach a volume from a lease (tenant admin), while no job and no SSH environment of the lease runs.
    Its
    data stays in the volume.

    Args:
        lease_id (UUID):
        volume_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | Problem
    """

    return (
        await asyncio_detailed(
            lease_id=lease_id,
            volume_id=volume_id,
            client=client,
        )
    ).parsed
