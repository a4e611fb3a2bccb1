from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.lease import Lease
from ...models.problem import Problem
from ...models.update_lease_request import UpdateLeaseRequest
from ...types import UNSET, Response, Unset


def _get_kwargs(
    lease_id: UUID,
    *,
    body: UpdateLeaseRequest,
    if_match: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(if_match, Unset):
        headers["If-Match"] = if_match

    _kwargs: dict[str, Any] = {
        "method": "patch",
        "url": "/v1/leases/{lease_id}".format(
            lease_id=quote(str(lease_id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Lease | Problem | None:
    if response.status_code == 200:
        response_200 = Lease.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())

        return response_400

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

    if response.status_code == 412:
        response_412 = Problem.from_dict(response.json())

        return response_412

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
    lease_id: UUID,
    *,
    client: AuthenticatedClient,
    body: UpdateLeaseRequest,
    if_match: str | Unset = UNSET,
) -> Response[Lease | Problem]:
    """Change a live lease's settings: when it is released for idleness. With `If-Match: <generation>`, a
    lease
    changed since it was read is 412. Once a release has begun (its jobs were given notice) it cannot be
    changed.

    Args:
        lease_id (UUID):
        if_match (str | Unset):
        body (UpdateLeaseRequest):  Example: {'idle_release_after_minutes': 60}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Lease | Problem]
    """

    kwargs = _get_kwargs(
        lease_id=lease_id,
        body=body,
        if_match=if_match,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    lease_id: UUID,
    *,
    client: AuthenticatedClient,
    body: UpdateLeaseRequest,
    if_match: str | Unset = UNSET,
) -> Lease | Problem | None:
    """Change a live lease's settings: when it is released for idleness. With `If-Match: <generation>`, a
    lease
    changed since it was read is 412. Once a release has begun (its jobs were given notice) it cannot be
    changed.

    Args:
        lease_id (UUID):
        if_match (str | Unset):
        body (UpdateLeaseRequest):  Example: {'idle_release_after_minutes': 60}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Lease | Problem
    """

    return sync_detailed(
        lease_id=lease_id,
        client=client,
        body=body,
        if_match=if_match,
    ).parsed


async def asyncio_detailed(
    lease_id: UUID,
    *,
    client: AuthenticatedClient,
    body: UpdateLeaseRequest,
    if_match: str | Unset = UNSET,
) -> Response[Lease | Problem]:
    """Change a live lease's settings: when it is released for idleness. With `If-Match: <generation>`, a
    lease
    changed since it was read is 412. Once a release has begun (its jobs were given notice) it cannot be
    changed.

    Args:
        lease_id (UUID):
        if_match (str | Unset):
        body (UpdateLeaseRequest):  Example: {'idle_release_after_minutes': 60}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Lease | Problem]
    """

    kwargs = _get_kwargs(
        lease_id=lease_id,
        body=body,
        if_match=if_match,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    lease_id: UUID,
    *,
    client: AuthenticatedClient,
    body: UpdateLeaseRequest,
    if_match: str | Unset = UNSET,
) -> Lease | Problem | None:
    """Change a live lease's settings: when it is released for idleness. With `If-Match: <generation>`, a
    lease
    changed since it was read is 412. Once a release has begun (its jobs were given notice) it cannot be
    changed.

    Args:
        lease_id (UUID):
        if_match (str | Unset):
        body (UpdateLeaseRequest):  Example: {'idle_release_after_minutes': 60}.

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
            body=body,
            if_match=if_match,
        )
    ).parsed
