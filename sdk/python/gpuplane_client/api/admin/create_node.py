from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.create_node_request import CreateNodeRequest
from ...models.node import Node
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    *,
    body: CreateNodeRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/admin/nodes",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Node | Problem | None:
    if response.status_code == 201:
        response_201 = Node.from_dict(response.json())

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
) -> Response[Node | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: CreateNodeRequest,
) -> Response[Node | Problem]:
    """Add a node and its GPUs to a pool. It takes leases once an agent registers its host name (it is
    `awaiting_agent` until then), or at once when created `external`.

    Args:
        body (CreateNodeRequest):  Example: {'address': '10.0.0.11', 'gpus': [{'index': 0, 'uuid':
            'GPU-0a1b2c3d-0000-0000-0000-000000000000'}, {'index': 1, 'uuid':
            'GPU-0a1b2c3d-0000-0000-0000-000000000001'}], 'hostname': 'gpu-node-01', 'intra_link':
            'nvlink', 'intra_link_gbps': 900, 'network_gbps': 400, 'pool_id':
            '0192f5a0-0000-7000-8000-000000000001', 'rdma': True}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Node | Problem]
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
    body: CreateNodeRequest,
) -> Node | Problem | None:
    """Add a node and its GPUs to a pool. It takes leases once an agent registers its host name (it is
    `awaiting_agent` until then), or at once when created `external`.

    Args:
        body (CreateNodeRequest):  Example: {'address': '10.0.0.11', 'gpus': [{'index': 0, 'uuid':
            'GPU-0a1b2c3d-0000-0000-0000-000000000000'}, {'index': 1, 'uuid':
            'GPU-0a1b2c3d-0000-0000-0000-000000000001'}], 'hostname': 'gpu-node-01', 'intra_link':
            'nvlink', 'intra_link_gbps': 900, 'network_gbps': 400, 'pool_id':
            '0192f5a0-0000-7000-8000-000000000001', 'rdma': True}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Node | Problem
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: CreateNodeRequest,
) -> Response[Node | Problem]:
    """Add a node and its GPUs to a pool. It takes leases once an agent registers its host name (it is
    `awaiting_agent` until then), or at once when created `external`.

    Args:
        body (CreateNodeRequest):  Example: {'address': '10.0.0.11', 'gpus': [{'index': 0, 'uuid':
            'GPU-0a1b2c3d-0000-0000-0000-000000000000'}, {'index': 1, 'uuid':
            'GPU-0a1b2c3d-0000-0000-0000-000000000001'}], 'hostname': 'gpu-node-01', 'intra_link':
            'nvlink', 'intra_link_gbps': 900, 'network_gbps': 400, 'pool_id':
            '0192f5a0-0000-7000-8000-000000000001', 'rdma': True}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Node | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: CreateNodeRequest,
) -> Node | Problem | None:
    """Add a node and its GPUs to a pool. It takes leases once an agent registers its host name (it is
    `awaiting_agent` until then), or at once when created `external`.

    Args:
        body (CreateNodeRequest):  Example: {'address': '10.0.0.11', 'gpus': [{'index': 0, 'uuid':
            'GPU-0a1b2c3d-0000-0000-0000-000000000000'}, {'index': 1, 'uuid':
            'GPU-0a1b2c3d-0000-0000-0000-000000000001'}], 'hostname': 'gpu-node-01', 'intra_link':
            'nvlink', 'intra_link_gbps': 900, 'network_gbps': 400, 'pool_id':
            '0192f5a0-0000-7000-8000-000000000001', 'rdma': True}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Node | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
