from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.attach_volume_request import AttachVolumeRequest
from ...models.attachment import Attachment
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    lease_id: UUID,
    *,
    body: AttachVolumeRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/leases/{lease_id}/volumes".format(
            lease_id=quote(str(lease_id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Attachment | Problem | None:
    if response.status_code == 201:
        response_201 = Attachment.from_dict(response.json())

        return response_201

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
) -> Response[Attachment | Problem]:
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
    body: AttachVolumeRequest,
) -> Response[Attachment | Problem]:
    """Attach a volume to a lease (tenant admin), while no job and no SSH environment of the lease runs.

    Args:
        lease_id (UUID):
        body (AttachVolumeRequest):  Example: {'mount': 'ckpt', 'volume_id':
            '0193a0c1-0000-7000-8000-000000000002'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Attachment | Problem]
    """

    kwargs = _get_kwargs(
        lease_id=lease_id,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    lease_id: UUID,
    *,
    client: AuthenticatedClient,
    body: AttachVolumeRequest,
) -> Attachment | Problem | None:
    """Attach a volume to a lease (tenant admin), while no job and no SSH environment of the lease runs.

    Args:
        lease_id (UUID):
        body (AttachVolumeRequest):  Example: {'mount': 'ckpt', 'volume_id':
            '0193a0c1-0000-7000-8000-000000000002'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Attachment | Problem
    """

    return sync_detailed(
        lease_id=lease_id,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    lease_id: UUID,
    *,
    client: AuthenticatedClient,
    body: AttachVolumeRequest,
) -> Response[Attachment | Problem]:
    """Attach a volume to a lease (tenant admin), while no job and no SSH environment of the lease runs.

    Args:
        lease_id (UUID):
        body (AttachVolumeRequest):  Example: {'mount': 'ckpt', 'volume_id':
            '0193a0c1-0000-7000-8000-000000000002'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Attachment | Problem]
    """

    kwargs = _get_kwargs(
        lease_id=lease_id,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    lease_id: UUID,
    *,
    client: AuthenticatedClient,
    body: AttachVolumeRequest,
) -> Attachment | Problem | None:
    """Attach a volume to a lease (tenant admin), while no job and no SSH environment of the lease runs.

    Args:
        lease_id (UUID):
        body (AttachVolumeRequest):  Example: {'mount': 'ckpt', 'volume_id':
            '0193a0c1-0000-7000-8000-000000000002'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Attachment | Problem
    """

    return (
        await asyncio_detailed(
            lease_id=lease_id,
            client=client,
            body=body,
        )
    ).parsed
