from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.create_lease_request import CreateLeaseRequest
from ...models.lease import Lease
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    body: CreateLeaseRequest,
    idempotency_key: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/leases",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Lease | Problem | None:
    if response.status_code == 201:
        response_201 = Lease.from_dict(response.json())

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
) -> Response[Lease | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: CreateLeaseRequest,
    idempotency_key: str | Unset = UNSET,
) -> Response[Lease | Problem]:
    """Lease GPUs. All or nothing: the lease gets every GPU it asked for, or none. Send an `Idempotency-
    Key`
    header to make retries safe.

    Args:
        idempotency_key (str | Unset):
        body (CreateLeaseRequest):  Example: {'duration_hours': 24, 'gpu_count': 8, 'placement':
            'single_node', 'pool_id': '0192f5a0-0000-7000-8000-000000000001'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Lease | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
        idempotency_key=idempotency_key,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: CreateLeaseRequest,
    idempotency_key: str | Unset = UNSET,
) -> Lease | Problem | None:
    """Lease GPUs. All or nothing: the lease gets every GPU it asked for, or none. Send an `Idempotency-
    Key`
    header to make retries safe.

    Args:
        idempotency_key (str | Unset):
        body (CreateLeaseRequest):  Example: {'duration_hours': 24, 'gpu_count': 8, 'placement':
            'single_node', 'pool_id': '0192f5a0-0000-7000-8000-000000000001'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Lease | Problem
    """

    return sync_detailed(
        client=client,
        body=body,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: CreateLeaseRequest,
    idempotency_key: str | Unset = UNSET,
) -> Response[Lease | Problem]:
    """Lease GPUs. All or nothing: the lease gets every GPU it asked for, or none. Send an `Idempotency-
    Key`
    header to make retries safe.

    Args:
        idempotency_key (str | Unset):
        body (CreateLeaseRequest):  Example: {'duration_hours': 24, 'gpu_count': 8, 'placement':
            'single_node', 'pool_id': '0192f5a0-0000-7000-8000-000000000001'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Lease | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
        idempotency_key=idempotency_key,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: CreateLeaseRequest,
    idempotency_key: str | Unset = UNSET,
) -> Lease | Problem | None:
    """Lease GPUs. All or nothing: the lease gets every GPU it asked for, or none. Send an `Idempotency-
    Key`
    header to make retries safe.

    Args:
        idempotency_key (str | Unset):
        body (CreateLeaseRequest):  Example: {'duration_hours': 24, 'gpu_count': 8, 'placement':
            'single_node', 'pool_id': '0192f5a0-0000-7000-8000-000000000001'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Lease | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
            idempotency_key=idempotency_key,
        )
    ).parsed
