from http import HTTPStatus
from io import BytesIO
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...types import File, Response


def _get_kwargs(
    digest: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/agent/uploads/{digest}".format(
            digest=quote(str(digest), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> File | Problem | None:
    if response.status_code == 200:
        response_200 = File(payload=BytesIO(response.content))

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
) -> Response[File | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    digest: str,
    *,
    client: AuthenticatedClient,
) -> Response[File | Problem]:
    """The archive a job names as its working directory (`workdir`), for the agent of a node where a part
    of that job
    has not ended: the agent unpacks it into the part's working directory before it starts the part. Any
    other
    upload is 404, whatever the caller knows of its digest.

    Args:
        digest (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[File | Problem]
    """

    kwargs = _get_kwargs(
        digest=digest,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    digest: str,
    *,
    client: AuthenticatedClient,
) -> File | Problem | None:
    """The archive a job names as its working directory (`workdir`), for the agent of a node where a part
    of that job
    has not ended: the agent unpacks it into the part's working directory before it starts the part. Any
    other
    upload is 404, whatever the caller knows of its digest.

    Args:
        digest (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        File | Problem
    """

    return sync_detailed(
        digest=digest,
        client=client,
    ).parsed


async def asyncio_detailed(
    digest: str,
    *,
    client: AuthenticatedClient,
) -> Response[File | Problem]:
    """The archive a job names as its working directory (`workdir`), for the agent of a node where a part
    of that job
    has not ended: the agent unpacks it into the part's working directory before it starts the part. Any
    other
    upload is 404, whatever the caller knows of its digest.

    Args:
        digest (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[File | Problem]
    """

    kwargs = _get_kwargs(
        digest=digest,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    digest: str,
    *,
    client: AuthenticatedClient,
) -> File | Problem | None:
    """The archive a job names as its working directory (`workdir`), for the agent of a node where a part
    of that job
    has not ended: the agent unpacks it into the part's working directory before it starts the part. Any
    other
    upload is 404, whatever the caller knows of its digest.

    Args:
        digest (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        File | Problem
    """

    return (
        await asyncio_detailed(
            digest=digest,
            client=client,
        )
    ).parsed
