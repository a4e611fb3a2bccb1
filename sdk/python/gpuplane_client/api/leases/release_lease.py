from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.lease import Lease
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    lease_id: UUID,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/leases/{lease_id}/release".format(
            lease_id=quote(str(lease_id), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Lease | Problem | None:
    if response.status_code == 200:
        response_200 = Lease.from_dict(response.json())

        return response_200

    if response.status_code == 202:
        response_202 = Lease.from_dict(response.json())

        return response_202

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
) -> Response[Lease | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    lease_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Response[Lease | Problem]:
    """Release a lease. Without a running job it is released now. With running jobs, they are given their
    stop
    notice first (each its `stop_grace_s`, to checkpoint): the lease stays active, and billed, until
    they have
    stopped, at the latest at its `release_deadline` (the longest grace plus a heartbeat); cancel a job
    to stop
    it at once. Releasing an ended lease, or one being released, is harmless and returns it as it is.

    Args:
        lease_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Lease | Problem]
    """

    kwargs = _get_kwargs(
        lease_id=lease_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    lease_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Lease | Problem | None:
    """Release a lease. Without a running job it is released now. With running jobs, they are given their
    stop
    notice first (each its `stop_grace_s`, to checkpoint): the lease stays active, and billed, until
    they have
    stopped, at the latest at its `release_deadline` (the longest grace plus a heartbeat); cancel a job
    to stop
    it at once. Releasing an ended lease, or one being released, is harmless and returns it as it is.

    Args:
        lease_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Lease | Problem
    """

    return sync_detailed(
        lease_id=lease_id,
        client=client,
    ).parsed


async def asyncio_detailed(
    lease_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Response[Lease | Problem]:
    """Release a lease. Without a running job it is released now. With running jobs, they are given their
    stop
    notice first (each its `stop_grace_s`, to checkpoint): the lease stays active, and billed, until
    they have
    stopped, at the latest at its `release_deadline` (the longest grace plus a heartbeat); cancel a job
    to stop
    it at once. Releasing an ended lease, or one being released, is harmless and returns it as it is.

    Args:
        lease_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Lease | Problem]
    """

    kwargs = _get_kwargs(
        lease_id=lease_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    lease_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Lease | Problem | None:
    """Release a lease. Without a running job it is released now. With running jobs, they are given their
    stop
    notice first (each its `stop_grace_s`, to checkpoint): the lease stays active, and billed, until
    they have
    stopped, at the latest at its `release_deadline` (the longest grace plus a heartbeat); cancel a job
    to stop
    it at once. Releasing an ended lease, or one being released, is harmless and returns it as it is.

    Args:
        lease_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Lease | Problem
    """

    return (
        await asyncio_detailed(
            lease_id=lease_id,
            client=client,
        )
    ).parsed
