from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.job import Job
from ...models.problem import Problem
from ...models.replan_request import ReplanRequest
from ...types import Response


def _get_kwargs(
    job_id: UUID,
    *,
    body: ReplanRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/jobs/{job_id}/replan".format(
            job_id=quote(str(job_id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Job | Problem | None:
    if response.status_code == 202:
        response_202 = Job.from_dict(response.json())

        return response_202

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
) -> Response[Job | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    job_id: UUID,
    *,
    client: AuthenticatedClient,
    body: ReplanRequest,
) -> Response[Job | Problem]:
    """Re-plan a running job on the same lease and GPUs. The new plan is made now (422 when it does not
    fit);
    the running processes get a stop notice (the job's `stop_grace_s`), checkpoint at the next step
    boundary and
    exit; then every node starts under the new plan and resumes from the checkpoint. The job keeps its
    id; the
    change is a new generation in `generations` (`pending` until it starts), announced by
    `job.replanned`.
    Only `gpuplane-runtime` jobs with a model are replanned, and services with a model: a service's
    replicas
    roll over one node at a time (a node's old replica is noticed and finishes its requests, its new one
    starts,
    and the next node's waits until it answers its health probe), so the others take the requests
    meanwhile.

    Args:
        job_id (UUID):
        body (ReplanRequest): A replan of a running job: the plan to move to. Example: {'pins':
            {'dp': 4, 'pp': 1, 'tp': 1, 'zero_stage': 3}, 'reason': 'more data parallel'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Job | Problem]
    """

    kwargs = _get_kwargs(
        job_id=job_id,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    job_id: UUID,
    *,
    client: AuthenticatedClient,
    body: ReplanRequest,
) -> Job | Problem | None:
    """Re-plan a running job on the same lease and GPUs. The new plan is made now (422 when it does not
    fit);
    the running processes get a stop notice (the job's `stop_grace_s`), checkpoint at the next step
    boundary and
    exit; then every node starts under the new plan and resumes from the checkpoint. The job keeps its
    id; the
    change is a new generation in `generations` (`pending` until it starts), announced by
    `job.replanned`.
    Only `gpuplane-runtime` jobs with a model are replanned, and services with a model: a service's
    replicas
    roll over one node at a time (a node's old replica is noticed and finishes its requests, its new one
    starts,
    and the next node's waits until it answers its health probe), so the others take the requests
    meanwhile.

    Args:
        job_id (UUID):
        body (ReplanRequest): A replan of a running job: the plan to move to. Example: {'pins':
            {'dp': 4, 'pp': 1, 'tp': 1, 'zero_stage': 3}, 'reason': 'more data parallel'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Job | Problem
    """

    return sync_detailed(
        job_id=job_id,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    job_id: UUID,
    *,
    client: AuthenticatedClient,
    body: ReplanRequest,
) -> Response[Job | Problem]:
    """Re-plan a running job on the same lease and GPUs. The new plan is made now (422 when it does not
    fit);
    the running processes get a stop notice (the job's `stop_grace_s`), checkpoint at the next step
    boundary and
    exit; then every node starts under the new plan and resumes from the checkpoint. The job keeps its
    id; the
    change is a new generation in `generations` (`pending` until it starts), announced by
    `job.replanned`.
    Only `gpuplane-runtime` jobs with a model are replanned, and services with a model: a service's
    replicas
    roll over one node at a time (a node's old replica is noticed and finishes its requests, its new one
    starts,
    and the next node's waits until it answers its health probe), so the others take the requests
    meanwhile.

    Args:
        job_id (UUID):
        body (ReplanRequest): A replan of a running job: the plan to move to. Example: {'pins':
            {'dp': 4, 'pp': 1, 'tp': 1, 'zero_stage': 3}, 'reason': 'more data parallel'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Job | Problem]
    """

    kwargs = _get_kwargs(
        job_id=job_id,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    job_id: UUID,
    *,
    client: AuthenticatedClient,
    body: ReplanRequest,
) -> Job | Problem | None:
    """Re-plan a running job on the same lease and GPUs. The new plan is made now (422 when it does not
    fit);
    the running processes get a stop notice (the job's `stop_grace_s`), checkpoint at the next step
    boundary and
    exit; then every node starts under the new plan and resumes from the checkpoint. The job keeps its
    id; the
    change is a new generation in `generations` (`pending` until it starts), announced by
    `job.replanned`.
    Only `gpuplane-runtime` jobs with a model are replanned, and services with a model: a service's
    replicas
    roll over one node at a time (a node's old replica is noticed and finishes its requests, its new one
    starts,
    and the next node's waits until it answers its health probe), so the others take the requests
    meanwhile.

    Args:
        job_id (UUID):
        body (ReplanRequest): A replan of a running job: the plan to move to. Example: {'pins':
            {'dp': 4, 'pp': 1, 'tp': 1, 'zero_stage': 3}, 'reason': 'more data parallel'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Job | Problem
    """

    return (
        await asyncio_detailed(
            job_id=job_id,
            client=client,
            body=body,
        )
    ).parsed
