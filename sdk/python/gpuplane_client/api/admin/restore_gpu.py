from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.node import Node
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    gpu_id: UUID,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/admin/gpus/{gpu_id}/restore".format(
            gpu_id=quote(str(gpu_id), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Node | Problem | None:
    if response.status_code == 200:
        response_200 = Node.from_dict(response.json())

        return response_200

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

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
) -> Response[Node | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    gpu_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Response[Node | Problem]:
    """Return a GPU to service after a fatal error was dealt with.

    Args:
        gpu_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Node | Problem]
    """

    kwargs = _get_kwargs(
        gpu_id=gpu_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    gpu_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Node | Problem | None:
    """Return a GPU to service after a fatal error was dealt with.

    Args:
        gpu_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Node | Problem
    """

    return sync_detailed(
        gpu_id=gpu_id,
        client=client,
    ).parsed


async def asyncio_detailed(
    gpu_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Response[Node | Problem]:
    """Return a GPU to service after a fatal error was dealt with.

    Args:
        gpu_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Node | Problem]
    """

    kwargs = _get_kwargs(
        gpu_id=gpu_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    gpu_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Node | Problem | None:
    """Return a GPU to service after a fatal error was dealt with.

    Args:
        gpu_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Node | Problem
    """

    return (
        await asyncio_detailed(
            gpu_id=gpu_id,
            client=client,
        )
    ).parsed
