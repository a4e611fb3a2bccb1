from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.create_volume_request import CreateVolumeRequest
from ...models.problem import Problem
from ...models.volume import Volume
from ...types import Response


def _get_kwargs(
    *,
    body: CreateVolumeRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/volumes",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | Volume | None:
    if response.status_code == 201:
        response_201 = Volume.from_dict(response.json())

        return response_201

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 402:
        response_402 = Problem.from_dict(response.json())

        return response_402

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())

        return response_409

    if response.status_code == 413:
        response_413 = Problem.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = Problem.from_dict(response.json())

        return response_415

    if response.status_code == 422:
        response_422 = Problem.from_dict(response.json())

        return response_422

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
) -> Response[Problem | Volume]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: CreateVolumeRequest,
) -> Response[Problem | Volume]:
    """Create a volume (tenant admin). It is `creating` until the agent of the host chosen for it has made
    the image
    (its next heartbeat), then `ready`; it is billed per GiB from then until it is deleted, at the
    pool's storage
    price.

    Args:
        body (CreateVolumeRequest):  Example: {'name': 'checkpoints', 'pool_id':
            '0193a0c1-0000-7000-8000-000000000001', 'size_gib': 100}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | Volume]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: CreateVolumeRequest,
) -> Problem | Volume | None:
    """Create a volume (tenant admin). It is `creating` until the agent of the host chosen for it has made
    the image
    (its next heartbeat), then `ready`; it is billed per GiB from then until it is deleted, at the
    pool's storage
    price.

    Args:
        body (CreateVolumeRequest):  Example: {'name': 'checkpoints', 'pool_id':
            '0193a0c1-0000-7000-8000-000000000001', 'size_gib': 100}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | Volume
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: CreateVolumeRequest,
) -> Response[Problem | Volume]:
    """Create a volume (tenant admin). It is `creating` until the agent of the host chosen for it has made
    the image
    (its next heartbeat), then `ready`; it is billed per GiB from then until it is deleted, at the
    pool's storage
    price.

    Args:
        body (CreateVolumeRequest):  Example: {'name': 'checkpoints', 'pool_id':
            '0193a0c1-0000-7000-8000-000000000001', 'size_gib': 100}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | Volume]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: CreateVolumeRequest,
) -> Problem | Volume | None:
    """Create a volume (tenant admin). It is `creating` until the agent of the host chosen for it has made
    the image
    (its next heartbeat), then `ready`; it is billed per GiB from then until it is deleted, at the
    pool's storage
    price.

    Args:
        body (CreateVolumeRequest):  Example: {'name': 'checkpoints', 'pool_id':
            '0193a0c1-0000-7000-8000-000000000001', 'size_gib': 100}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | Volume
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
