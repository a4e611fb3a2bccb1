from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.generate_invoices_request import GenerateInvoicesRequest
from ...models.invoice import Invoice
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    *,
    body: GenerateInvoicesRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/admin/invoices",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | list[Invoice] | None:
    if response.status_code == 200:
        response_200 = []
        _response_200 = response.json()
        for response_200_item_data in _response_200:
            response_200_item = Invoice.from_dict(response_200_item_data)

            response_200.append(response_200_item)

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
) -> Response[Problem | list[Invoice]]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: GenerateInvoicesRequest,
) -> Response[Problem | list[Invoice]]:
    """Generate (or refresh, while still drafts) the invoices of a month for every tenant with usage or
    credits.
    A month that has not ended, or whose usage is not all metered yet (`month_closed` false), gets
    drafts that
    the next generation refreshes and that cannot be issued yet.

    Args:
        body (GenerateInvoicesRequest):  Example: {'month': '2026-11'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | list[Invoice]]
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
    body: GenerateInvoicesRequest,
) -> Problem | list[Invoice] | None:
    """Generate (or refresh, while still drafts) the invoices of a month for every tenant with usage or
    credits.
    A month that has not ended, or whose usage is not all metered yet (`month_closed` false), gets
    drafts that
    the next generation refreshes and that cannot be issued yet.

    Args:
        body (GenerateInvoicesRequest):  Example: {'month': '2026-11'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | list[Invoice]
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: GenerateInvoicesRequest,
) -> Response[Problem | list[Invoice]]:
    """Generate (or refresh, while still drafts) the invoices of a month for every tenant with usage or
    credits.
    A month that has not ended, or whose usage is not all metered yet (`month_closed` false), gets
    drafts that
    the next generation refreshes and that cannot be issued yet.

    Args:
        body (GenerateInvoicesRequest):  Example: {'month': '2026-11'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | list[Invoice]]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: GenerateInvoicesRequest,
) -> Problem | list[Invoice] | None:
    """Generate (or refresh, while still drafts) the invoices of a month for every tenant with usage or
    credits.
    A month that has not ended, or whose usage is not all metered yet (`month_closed` false), gets
    drafts that
    the next generation refreshes and that cannot be issued yet.

    Args:
        body (GenerateInvoicesRequest):  Example: {'month': '2026-11'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | list[Invoice]
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
