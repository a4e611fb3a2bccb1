from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.log_report import LogReport
from ...models.log_report_response import LogReportResponse
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    job_node_id: UUID,
    *,
    body: LogReport,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/agent/assignments/{job_node_id}/logs".format(
            job_node_id=quote(str(job_node_id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> LogReportResponse | Problem | None:
    if response.status_code == 200:
        response_200 = LogReportResponse.from_dict(response.json())

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
) -> Response[LogReportResponse | Problem]:
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
    body: LogReport,
) -> Response[LogReportResponse | Problem]:
    """Ship a part's output: its next lines, numbered per part (`seq`). Idempotent: a line already stored
    (a report
    sent again after a lost answer) is skipped, and the answer says the highest `seq` stored, so the
    agent can
    forget everything up to it. A gap in `seq` is counted as lost lines. The job's secret values are
    masked before
    anything is stored.

    Args:
        job_node_id (UUID):
        body (LogReport): A batch of a part's output. Sending the same lines again is harmless:
            the service keeps each `seq` once. A gap
            in `seq` is lines the agent dropped (its buffer is bounded: the oldest go when the service
            stays away too
            long); the service counts them as lost.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[LogReportResponse | Problem]
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
    body: LogReport,
) -> LogReportResponse | Problem | None:
    """Ship a part's output: its next lines, numbered per part (`seq`). Idempotent: a line already stored
    (a report
    sent again after a lost answer) is skipped, and the answer says the highest `seq` stored, so the
    agent can
    forget everything up to it. A gap in `seq` is counted as lost lines. The job's secret values are
    masked before
    anything is stored.

    Args:
        job_node_id (UUID):
        body (LogReport): A batch of a part's output. Sending the same lines again is harmless:
            the service keeps each `seq` once. A gap
            in `seq` is lines the agent dropped (its buffer is bounded: the oldest go when the service
            stays away too
            long); the service counts them as lost.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        LogReportResponse | Problem
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
    body: LogReport,
) -> Response[LogReportResponse | Problem]:
    """Ship a part's output: its next lines, numbered per part (`seq`). Idempotent: a line already stored
    (a report
    sent again after a lost answer) is skipped, and the answer says the highest `seq` stored, so the
    agent can
    forget everything up to it. A gap in `seq` is counted as lost lines. The job's secret values are
    masked before
    anything is stored.

    Args:
        job_node_id (UUID):
        body (LogReport): A batch of a part's output. Sending the same lines again is harmless:
            the service keeps each `seq` once. A gap
            in `seq` is lines the agent dropped (its buffer is bounded: the oldest go when the service
            stays away too
            long); the service counts them as lost.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[LogReportResponse | Problem]
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
    body: LogReport,
) -> LogReportResponse | Problem | None:
    """Ship a part's output: its next lines, numbered per part (`seq`). Idempotent: a line already stored
    (a report
    sent again after a lost answer) is skipped, and the answer says the highest `seq` stored, so the
    agent can
    forget everything up to it. A gap in `seq` is counted as lost lines. The job's secret values are
    masked before
    anything is stored.

    Args:
        job_node_id (UUID):
        body (LogReport): A batch of a part's output. Sending the same lines again is harmless:
            the service keeps each `seq` once. A gap
            in `seq` is lines the agent dropped (its buffer is bounded: the oldest go when the service
            stays away too
            long); the service counts them as lost.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        LogReportResponse | Problem
    """

    return (
        await asyncio_detailed(
            job_node_id=job_node_id,
            client=client,
            body=body,
        )
    ).parsed
