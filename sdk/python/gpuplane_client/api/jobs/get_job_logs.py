from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.get_job_logs_format import GetJobLogsFormat
from ...models.job_log_page import JobLogPage
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    job_id: UUID,
    *,
    after: int | Unset = UNSET,
    tail: int | Unset = UNSET,
    limit: int | Unset = UNSET,
    node: int | Unset = UNSET,
    rank: int | Unset = UNSET,
    follow: bool | Unset = UNSET,
    format_: GetJobLogsFormat | Unset = UNSET,
    last_event_id: int | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(last_event_id, Unset):
        headers["Last-Event-ID"] = str(last_event_id)

    params: dict[str, Any] = {}

    params["after"] = after

    params["tail"] = tail

    params["limit"] = limit

    params["node"] = node

    params["rank"] = rank

    params["follow"] = follow

    json_format_: str | Unset = UNSET
    if not isinstance(format_, Unset):
        json_format_ = format_.value

    params["format"] = json_format_

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/jobs/{job_id}/logs".format(
            job_id=quote(str(job_id), safe=""),
        ),
        "params": params,
    }

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> JobLogPage | Problem | None:
    if response.status_code == 200:
        response_200 = JobLogPage.from_dict(response.json())

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
) -> Response[JobLogPage | Problem]:
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
    after: int | Unset = UNSET,
    tail: int | Unset = UNSET,
    limit: int | Unset = UNSET,
    node: int | Unset = UNSET,
    rank: int | Unset = UNSET,
    follow: bool | Unset = UNSET,
    format_: GetJobLogsFormat | Unset = UNSET,
    last_event_id: int | Unset = UNSET,
) -> Response[JobLogPage | Problem]:
    """A job's output: every line each node's process printed (per rank for torchrun's), with the job's
    secret values
    masked. Lines are numbered per job in the order they were stored. Three forms: a JSON page (`after`
    or `tail`,
    `limit`); with `format=text`, every line as a download; with `follow=true`, server-sent events
    (`line`
    events whose `id` is the line number, so a reconnect with `Last-Event-ID` resumes where it stopped;
    one `end`
    event when the job has ended and its last line is out). A job's logs keep at most the service's cap
    (`--job-log-cap-mib`, 256 MiB by default): past it, the oldest lines are deleted, and `first_line`
    says where
    the log now starts. Another tenant's job is 404.

    Args:
        job_id (UUID):
        after (int | Unset):
        tail (int | Unset):
        limit (int | Unset):
        node (int | Unset):
        rank (int | Unset):
        follow (bool | Unset):
        format_ (GetJobLogsFormat | Unset): How `GET /v1/jobs/{job_id}/logs` answers.
        last_event_id (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[JobLogPage | Problem]
    """

    kwargs = _get_kwargs(
        job_id=job_id,
        after=after,
        tail=tail,
        limit=limit,
        node=node,
        rank=rank,
        follow=follow,
        format_=format_,
        last_event_id=last_event_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    job_id: UUID,
    *,
    client: AuthenticatedClient,
    after: int | Unset = UNSET,
    tail: int | Unset = UNSET,
    limit: int | Unset = UNSET,
    node: int | Unset = UNSET,
    rank: int | Unset = UNSET,
    follow: bool | Unset = UNSET,
    format_: GetJobLogsFormat | Unset = UNSET,
    last_event_id: int | Unset = UNSET,
) -> JobLogPage | Problem | None:
    """A job's output: every line each node's process printed (per rank for torchrun's), with the job's
    secret values
    masked. Lines are numbered per job in the order they were stored. Three forms: a JSON page (`after`
    or `tail`,
    `limit`); with `format=text`, every line as a download; with `follow=true`, server-sent events
    (`line`
    events whose `id` is the line number, so a reconnect with `Last-Event-ID` resumes where it stopped;
    one `end`
    event when the job has ended and its last line is out). A job's logs keep at most the service's cap
    (`--job-log-cap-mib`, 256 MiB by default): past it, the oldest lines are deleted, and `first_line`
    says where
    the log now starts. Another tenant's job is 404.

    Args:
        job_id (UUID):
        after (int | Unset):
        tail (int | Unset):
        limit (int | Unset):
        node (int | Unset):
        rank (int | Unset):
        follow (bool | Unset):
        format_ (GetJobLogsFormat | Unset): How `GET /v1/jobs/{job_id}/logs` answers.
        last_event_id (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        JobLogPage | Problem
    """

    return sync_detailed(
        job_id=job_id,
        client=client,
        after=after,
        tail=tail,
        limit=limit,
        node=node,
        rank=rank,
        follow=follow,
        format_=format_,
        last_event_id=last_event_id,
    ).parsed


async def asyncio_detailed(
    job_id: UUID,
    *,
    client: AuthenticatedClient,
    after: int | Unset = UNSET,
    tail: int | Unset = UNSET,
    limit: int | Unset = UNSET,
    node: int | Unset = UNSET,
    rank: int | Unset = UNSET,
    follow: bool | Unset = UNSET,
    format_: GetJobLogsFormat | Unset = UNSET,
    last_event_id: int | Unset = UNSET,
) -> Response[JobLogPage | Problem]:
    """A job's output: every line each node's process printed (per rank for torchrun's), with the job's
    secret values
    masked. Lines are numbered per job in the order they were stored. Three forms: a JSON page (`after`
    or `tail`,
    `limit`); with `format=text`, every line as a download; with `follow=true`, server-sent events
    (`line`
    events whose `id` is the line number, so a reconnect with `Last-Event-ID` resumes where it stopped;
    one `end`
    event when the job has ended and its last line is out). A job's logs keep at most the service's cap
    (`--job-log-cap-mib`, 256 MiB by default): past it, the oldest lines are deleted, and `first_line`
    says where
    the log now starts. Another tenant's job is 404.

    Args:
        job_id (UUID):
        after (int | Unset):
        tail (int | Unset):
        limit (int | Unset):
        node (int | Unset):
        rank (int | Unset):
        follow (bool | Unset):
        format_ (GetJobLogsFormat | Unset): How `GET /v1/jobs/{job_id}/logs` answers.
        last_event_id (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[JobLogPage | Problem]
    """

    kwargs = _get_kwargs(
        job_id=job_id,
        after=after,
        tail=tail,
        limit=limit,
        node=node,
        rank=rank,
        follow=follow,
        format_=format_,
        last_event_id=last_event_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    job_id: UUID,
    *,
    client: AuthenticatedClient,
    after: int | Unset = UNSET,
    tail: int | Unset = UNSET,
    limit: int | Unset = UNSET,
    node: int | Unset = UNSET,
    rank: int | Unset = UNSET,
    follow: bool | Unset = UNSET,
    format_: GetJobLogsFormat | Unset = UNSET,
    last_event_id: int | Unset = UNSET,
) -> JobLogPage | Problem | None:
    """A job's output: every line each node's process printed (per rank for torchrun's), with the job's
    secret values
    masked. Lines are numbered per job in the order they were stored. Three forms: a JSON page (`after`
    or `tail`,
    `limit`); with `format=text`, every line as a download; with `follow=true`, server-sent events
    (`line`
    events whose `id` is the line number, so a reconnect with `Last-Event-ID` resumes where it stopped;
    one `end`
    event when the job has ended and its last line is out). A job's logs keep at most the service's cap
    (`--job-log-cap-mib`, 256 MiB by default): past it, the oldest lines are deleted, and `first_line`
    says where
    the log now starts. Another tenant's job is 404.

    Args:
        job_id (UUID):
        after (int | Unset):
        tail (int | Unset):
        limit (int | Unset):
        node (int | Unset):
        rank (int | Unset):
        follow (bool | Unset):
        format_ (GetJobLogsFormat | Unset): How `GET /v1/jobs/{job_id}/logs` answers.
        last_event_id (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        JobLogPage | Problem
    """

    return (
        await asyncio_detailed(
            job_id=job_id,
            client=client,
            after=after,
            tail=tail,
            limit=limit,
            node=node,
            rank=rank,
            follow=follow,
            format_=format_,
            last_event_id=last_event_id,
        )
    ).parsed
