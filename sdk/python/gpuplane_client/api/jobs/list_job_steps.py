from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.step_page import StepPage
from ...types import UNSET, Response, Unset


def _get_kwargs(
    job_id: UUID,
    *,
    limit: int | Unset = UNSET,
    after: int | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["limit"] = limit

    params["after"] = after

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/jobs/{job_id}/steps".format(
            job_id=quote(str(job_id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | StepPage | None:
    if response.status_code == 200:
        response_200 = StepPage.from_dict(response.json())

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
) -> Response[Problem | StepPage]:
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
    limit: int | Unset = UNSET,
    after: int | Unset = UNSET,
) -> Response[Problem | StepPage]:
    """The optimizer steps the gpuplane runtime measured in the job (step time, tokens, loss, peak memory),
    in step
    order, as its agents reported them.

    Args:
        job_id (UUID):
        limit (int | Unset):
        after (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | StepPage]
    """

    kwargs = _get_kwargs(
        job_id=job_id,
        limit=limit,
        after=after,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    job_id: UUID,
    *,
    client: AuthenticatedClient,
    limit: int | Unset = UNSET,
    after: int | Unset = UNSET,
) -> Problem | StepPage | None:
    """The optimizer steps the gpuplane runtime measured in the job (step time, tokens, loss, peak memory),
    in step
    order, as its agents reported them.

    Args:
        job_id (UUID):
        limit (int | Unset):
        after (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | StepPage
    """

    return sync_detailed(
        job_id=job_id,
        client=client,
        limit=limit,
        after=after,
    ).parsed


async def asyncio_detailed(
    job_id: UUID,
    *,
    client: AuthenticatedClient,
    limit: int | Unset = UNSET,
    after: int | Unset = UNSET,
) -> Response[Problem | StepPage]:
    """The optimizer steps the gpuplane runtime measured in the job (step time, tokens, loss, peak memory),
    in step
    order, as its agents reported them.

    Args:
        job_id (UUID):
        limit (int | Unset):
        after (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | StepPage]
    """

    kwargs = _get_kwargs(
        job_id=job_id,
        limit=limit,
        after=after,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    job_id: UUID,
    *,
    client: AuthenticatedClient,
    limit: int | Unset = UNSET,
    after: int | Unset = UNSET,
) -> Problem | StepPage | None:
    """The optimizer steps the gpuplane runtime measured in the job (step time, tokens, loss, peak memory),
    in step
    order, as its agents reported them.

    Args:
        job_id (UUID):
        limit (int | Unset):
        after (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | StepPage
    """

    return (
        await asyncio_detailed(
            job_id=job_id,
            client=client,
            limit=limit,
            after=after,
        )
    ).parsed
