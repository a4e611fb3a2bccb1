from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.assignment_status import AssignmentStatus
from ...models.assignment_status_response import AssignmentStatusResponse
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    job_node_id: UUID,
    *,
    body: AssignmentStatus,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/agent/assignments/{job_node_id}/status".format(
            job_node_id=quote(str(job_node_id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> AssignmentStatusResponse | Problem | None:
    if response.status_code == 200:
        response_200 = AssignmentStatusResponse.from_dict(response.json())

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
) -> Response[AssignmentStatusResponse | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    job_node_id: UUID,
    *,
    client: AuthenticatedClient,
    body: AssignmentStatus,
) -> Response[AssignmentStatusResponse | Problem]:
    """Report a state transition of an assignment's process (running, succeeded, failed, cancelled) with
    its exit
    code and last lines of output. Idempotent; states only move forward.

    Args:
        job_node_id (UUID):
        body (AssignmentStatus): A state transition of a job's process on this node. Idempotent;
            states only move forward. Example: {'exit_code': 0, 'output_tail': ['step 100 loss 1.93',
            'done'], 'state': 'succeeded'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AssignmentStatusResponse | Problem]
    """

    kwargs = _get_kwargs(
        job_node_id=job_node_id,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    job_node_id: UUID,
    *,
    client: AuthenticatedClient,
    body: AssignmentStatus,
) -> AssignmentStatusResponse | Problem | None:
    """Report a state transition of an assignment's process (running, succeeded, failed, cancelled) with
    its exit
    code and last lines of output. Idempotent; states only move forward.

    Args:
        job_node_id (UUID):
        body (AssignmentStatus): A state transition of a job's process on this node. Idempotent;
            states only move forward. Example: {'exit_code': 0, 'output_tail': ['step 100 loss 1.93',
            'done'], 'state': 'succeeded'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AssignmentStatusResponse | Problem
    """

    return sync_detailed(
        job_node_id=job_node_id,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    job_node_id: UUID,
    *,
    client: AuthenticatedClient,
    body: AssignmentStatus,
) -> Response[AssignmentStatusResponse | Problem]:
    """Report a state transition of an assignment's process (running, succeeded, failed, cancelled) with
    its exit
    code and last lines of output. Idempotent; states only move forward.

    Args:
        job_node_id (UUID):
        body (AssignmentStatus): A state transition of a job's process on this node. Idempotent;
            states only move forward. Example: {'exit_code': 0, 'output_tail': ['step 100 loss 1.93',
            'done'], 'state': 'succeeded'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AssignmentStatusResponse | Problem]
    """

    kwargs = _get_kwargs(
        job_node_id=job_node_id,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    job_node_id: UUID,
    *,
    client: AuthenticatedClient,
    body: AssignmentStatus,
) -> AssignmentStatusResponse | Problem | None:
    """Report a state transition of an assignment's process (running, succeeded, failed, cancelled) with
    its exit
    code and last lines of output. Idempotent; states only move forward.

    Args:
        job_node_id (UUID):
        body (AssignmentStatus): A state transition of a job's process on this node. Idempotent;
            states only move forward. Example: {'exit_code': 0, 'output_tail': ['step 100 loss 1.93',
            'done'], 'state': 'succeeded'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AssignmentStatusResponse | Problem
    """

    return (
        await asyncio_detailed(
            job_node_id=job_node_id,
            client=client,
            body=body,
        )
    ).parsed
