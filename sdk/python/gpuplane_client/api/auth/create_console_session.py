from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.console_session import ConsoleSession
from ...models.problem import Problem
from ...models.token_request import TokenRequest
from ...types import Response


def _get_kwargs(
    *,
    body: TokenRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/console/session",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ConsoleSession | Problem | None:
    if response.status_code == 200:
        response_200 = ConsoleSession.from_dict(response.json())

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
) -> Response[ConsoleSession | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: TokenRequest,
) -> Response[ConsoleSession | Problem]:
    """Sign in to the console: exchange an API key for a session cookie.

     Sets `gp_session` (HttpOnly, SameSite=Strict, Path=/, Secure over TLS), holding a short-lived access
    token,
    and `gp_csrf` (readable by the page), whose value must be echoed in `X-CSRF-Token` on state changes.

    Args:
        body (TokenRequest):  Example: {'api_key':
            'gpk_4f9pQm2c7HkYbXrS1aTzLw0vNeUd8GjKoPiQ3sBcFhM'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ConsoleSession | Problem]
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
    client: AuthenticatedClient | Client,
    body: TokenRequest,
) -> ConsoleSession | Problem | None:
    """Sign in to the console: exchange an API key for a session cookie.

     Sets `gp_session` (HttpOnly, SameSite=Strict, Path=/, Secure over TLS), holding a short-lived access
    token,
    and `gp_csrf` (readable by the page), whose value must be echoed in `X-CSRF-Token` on state changes.

    Args:
        body (TokenRequest):  Example: {'api_key':
            'gpk_4f9pQm2c7HkYbXrS1aTzLw0vNeUd8GjKoPiQ3sBcFhM'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ConsoleSession | Problem
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: TokenRequest,
) -> Response[ConsoleSession | Problem]:
    """Sign in to the console: exchange an API key for a session cookie.

     Sets `gp_session` (HttpOnly, SameSite=Strict, Path=/, Secure over TLS), holding a short-lived access
    token,
    and `gp_csrf` (readable by the page), whose value must be echoed in `X-CSRF-Token` on state changes.

    Args:
        body (TokenRequest):  Example: {'api_key':
            'gpk_4f9pQm2c7HkYbXrS1aTzLw0vNeUd8GjKoPiQ3sBcFhM'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ConsoleSession | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    body: TokenRequest,
) -> ConsoleSession | Problem | None:
    """Sign in to the console: exchange an API key for a session cookie.

     Sets `gp_session` (HttpOnly, SameSite=Strict, Path=/, Secure over TLS), holding a short-lived access
    token,
    and `gp_csrf` (readable by the page), whose value must be echoed in `X-CSRF-Token` on state changes.

    Args:
        body (TokenRequest):  Example: {'api_key':
            'gpk_4f9pQm2c7HkYbXrS1aTzLw0vNeUd8GjKoPiQ3sBcFhM'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ConsoleSession | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
