from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.cached_model import CachedModel
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    pool_id: UUID,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/pools/{pool_id}/models".format(
            pool_id=quote(str(pool_id), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | list[CachedModel] | None:
    if response.status_code == 200:
        response_200 = []
        _response_200 = response.json()
        for response_200_item_data in _response_200:
            response_200_item = CachedModel.from_dict(response_200_item_data)

            response_200.append(response_200_item)

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
) -> Response[Problem | list[CachedModel]]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    pool_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Response[Problem | list[CachedModel]]:
    """The models in the pool's caches: each with the ready hosts that hold it and their free GPUs. A lease
    that names
    one as `cached_model` goes on such a host when one has room.

    Args:
        pool_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | list[CachedModel]]
    """

    kwargs = _get_kwargs(
        pool_id=pool_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    pool_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Problem | list[CachedModel] | None:
    """The models in the pool's caches: each with the ready hosts that hold it and their free GPUs. A lease
    that names
    one as `cached_model` goes on such a host when one has room.

    Args:
        pool_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | list[CachedModel]
    """

    return sync_detailed(
        pool_id=pool_id,
        client=client,
    ).parsed


async def asyncio_detailed(
    pool_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Response[Problem | list[CachedModel]]:
    """The models in the pool's caches: each with the ready hosts that hold it and their free GPUs. A lease
    that names
    one as `cached_model` goes on such a host when one has room.

    Args:
        pool_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | list[CachedModel]]
    """

    kwargs = _get_kwargs(
        pool_id=pool_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    pool_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Problem | list[CachedModel] | None:
    """The models in the pool's caches: each with the ready hosts that hold it and their free GPUs. A lease
    that names
    one as `cached_model` goes on such a host when one has room.

    Args:
        pool_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | list[CachedModel]
    """

    return (
        await asyncio_detailed(
            pool_id=pool_id,
            client=client,
        )
    ).parsed
