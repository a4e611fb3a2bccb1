from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.upload import Upload
from ...types import File, Response


def _get_kwargs(
    *,
    body: File,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/uploads",
    }

    _kwargs["content"] = body.payload
    headers["Content-Type"] = "application/octet-stream"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | Upload | None:
    if response.status_code == 200:
        response_200 = Upload.from_dict(response.json())

        return response_200

    if response.status_code == 201:
        response_201 = Upload.from_dict(response.json())

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
) -> Response[Problem | Upload]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: File,
) -> Response[Problem | Upload]:
    """Upload a job's working directory: a gzip-compressed tar archive (`tar -czf - -C mydir .`), sent as
    `application/octet-stream`, at most the service's cap (`--upload-cap-mib`, 100 MiB by default). It
    is kept once
    per tenant under its SHA-256: an archive the tenant already uploaded is answered 200 with what is
    kept, and
    nothing is stored twice. It is refused whole, and nothing is stored, when an entry is not a file or
    a directory
    (links, devices, FIFOs), a path is not plain and relative (a leading `/`, `..`), a path repeats, or
    it unpacks to
    more than 100,000 entries, 2 GiB, or 200 times its own size (`archive_refused`, 422, naming the
    entry and the
    rule). A job unpacks it into each part's working directory by naming its `digest` as `workdir`.

    Args:
        body (File): The request body of `POST /v1/uploads`: the archive's bytes.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | Upload]
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
    body: File,
) -> Problem | Upload | None:
    """Upload a job's working directory: a gzip-compressed tar archive (`tar -czf - -C mydir .`), sent as
    `application/octet-stream`, at most the service's cap (`--upload-cap-mib`, 100 MiB by default). It
    is kept once
    per tenant under its SHA-256: an archive the tenant already uploaded is answered 200 with what is
    kept, and
    nothing is stored twice. It is refused whole, and nothing is stored, when an entry is not a file or
    a directory
    (links, devices, FIFOs), a path is not plain and relative (a leading `/`, `..`), a path repeats, or
    it unpacks to
    more than 100,000 entries, 2 GiB, or 200 times its own size (`archive_refused`, 422, naming the
    entry and the
    rule). A job unpacks it into each part's working directory by naming its `digest` as `workdir`.

    Args:
        body (File): The request body of `POST /v1/uploads`: the archive's bytes.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | Upload
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: File,
) -> Response[Problem | Upload]:
    """Upload a job's working directory: a gzip-compressed tar archive (`tar -czf - -C mydir .`), sent as
    `application/octet-stream`, at most the service's cap (`--upload-cap-mib`, 100 MiB by default). It
    is kept once
    per tenant under its SHA-256: an archive the tenant already uploaded is answered 200 with what is
    kept, and
    nothing is stored twice. It is refused whole, and nothing is stored, when an entry is not a file or
    a directory
    (links, devices, FIFOs), a path is not plain and relative (a leading `/`, `..`), a path repeats, or
    it unpacks to
    more than 100,000 entries, 2 GiB, or 200 times its own size (`archive_refused`, 422, naming the
    entry and the
    rule). A job unpacks it into each part's working directory by naming its `digest` as `workdir`.

    Args:
        body (File): The request body of `POST /v1/uploads`: the archive's bytes.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | Upload]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: File,
) -> Problem | Upload | None:
    """Upload a job's working directory: a gzip-compressed tar archive (`tar -czf - -C mydir .`), sent as
    `application/octet-stream`, at most the service's cap (`--upload-cap-mib`, 100 MiB by default). It
    is kept once
    per tenant under its SHA-256: an archive the tenant already uploaded is answered 200 with what is
    kept, and
    nothing is stored twice. It is refused whole, and nothing is stored, when an entry is not a file or
    a directory
    (links, devices, FIFOs), a path is not plain and relative (a leading `/`, `..`), a path repeats, or
    it unpacks to
    more than 100,000 entries, 2 GiB, or 200 times its own size (`archive_refused`, 422, naming the
    entry and the
    rule). A job unpacks it into each part's working directory by naming its `digest` as `workdir`.

    Args:
        body (File): The request body of `POST /v1/uploads`: the archive's bytes.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | Upload
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
