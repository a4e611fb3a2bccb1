from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.register_request import RegisterRequest
from ...models.register_response import RegisterResponse
from ...types import Response


def _get_kwargs(
    *,
    body: RegisterRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/agent/register",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | RegisterResponse | None:
    if response.status_code == 200:
        response_200 = RegisterResponse.from_dict(response.json())

        return response_200

    if response.status_code == 201:
        response_201 = RegisterResponse.from_dict(response.json())

        return response_201

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

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

    if response.status_code == 429:
        response_429 = Problem.from_dict(response.json())

        return response_429

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
) -> Response[Problem | RegisterResponse]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: RegisterRequest,
) -> Response[Problem | RegisterResponse]:
    """Register a node with a join token, or re-attach the same host (matched by hostname) and rotate its
    credential.
    Re-attaching needs proof that the caller is that node: its current agent credential as the bearer
    token, or
    an operator's `POST /v1/admin/nodes/{node_id}/allow-reregistration` within the last hour. A join
    token alone
    never takes over a node an agent registered; it does attach the first agent of a node an operator
    added by
    hand (`awaiting_agent`, or `external`), whose GPUs must then match what the operator entered.

    Args:
        body (RegisterRequest):  Example: {'join_token': 'gpj_...', 'node': {'address':
            '10.0.0.11', 'cuda_version': '12.4', 'driver_version': '550.54.15', 'gpus': [{'index': 0,
            'memory_bytes': 85520809984, 'name': 'NVIDIA H100 80GB HBM3', 'uuid':
            'GPU-0a1b2c3d-0000-0000-0000-000000000000'}], 'hostname': 'gpu-node-01', 'intra_link':
            'nvlink', 'network_gbps': 400, 'rdma': True}}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | RegisterResponse]
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
    body: RegisterRequest,
) -> Problem | RegisterResponse | None:
    """Register a node with a join token, or re-attach the same host (matched by hostname) and rotate its
    credential.
    Re-attaching needs proof that the caller is that node: its current agent credential as the bearer
    token, or
    an operator's `POST /v1/admin/nodes/{node_id}/allow-reregistration` within the last hour. A join
    token alone
    never takes over a node an agent registered; it does attach the first agent of a node an operator
    added by
    hand (`awaiting_agent`, or `external`), whose GPUs must then match what the operator entered.

    Args:
        body (RegisterRequest):  Example: {'join_token': 'gpj_...', 'node': {'address':
            '10.0.0.11', 'cuda_version': '12.4', 'driver_version': '550.54.15', 'gpus': [{'index': 0,
            'memory_bytes': 85520809984, 'name': 'NVIDIA H100 80GB HBM3', 'uuid':
            'GPU-0a1b2c3d-0000-0000-0000-000000000000'}], 'hostname': 'gpu-node-01', 'intra_link':
            'nvlink', 'network_gbps': 400, 'rdma': True}}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | RegisterResponse
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: RegisterRequest,
) -> Response[Problem | RegisterResponse]:
    """Register a node with a join token, or re-attach the same host (matched by hostname) and rotate its
    credential.
    Re-attaching needs proof that the caller is that node: its current agent credential as the bearer
    token, or
    an operator's `POST /v1/admin/nodes/{node_id}/allow-reregistration` within the last hour. A join
    token alone
    never takes over a node an agent registered; it does attach the first agent of a node an operator
    added by
    hand (`awaiting_agent`, or `external`), whose GPUs must then match what the operator entered.

    Args:
        body (RegisterRequest):  Example: {'join_token': 'gpj_...', 'node': {'address':
            '10.0.0.11', 'cuda_version': '12.4', 'driver_version': '550.54.15', 'gpus': [{'index': 0,
            'memory_bytes': 85520809984, 'name': 'NVIDIA H100 80GB HBM3', 'uuid':
            'GPU-0a1b2c3d-0000-0000-0000-000000000000'}], 'hostname': 'gpu-node-01', 'intra_link':
            'nvlink', 'network_gbps': 400, 'rdma': True}}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | RegisterResponse]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: RegisterRequest,
) -> Problem | RegisterResponse | None:
    """Register a node with a join token, or re-attach the same host (matched by hostname) and rotate its
    credential.
    Re-attaching needs proof that the caller is that node: its current agent credential as the bearer
    token, or
    an operator's `POST /v1/admin/nodes/{node_id}/allow-reregistration` within the last hour. A join
    token alone
    never takes over a node an agent registered; it does attach the first agent of a node an operator
    added by
    hand (`awaiting_agent`, or `external`), whose GPUs must then match what the operator entered.

    Args:
        body (RegisterRequest):  Example: {'join_token': 'gpj_...', 'node': {'address':
            '10.0.0.11', 'cuda_version': '12.4', 'driver_version': '550.54.15', 'gpus': [{'index': 0,
            'memory_bytes': 85520809984, 'name': 'NVIDIA H100 80GB HBM3', 'uuid':
            'GPU-0a1b2c3d-0000-0000-0000-000000000000'}], 'hostname': 'gpu-node-01', 'intra_link':
            'nvlink', 'network_gbps': 400, 'rdma': True}}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | RegisterResponse
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
