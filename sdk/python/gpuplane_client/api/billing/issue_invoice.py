from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.invoice import Invoice
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    invoice_id: UUID,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/admin/invoices/{invoice_id}/issue".format(
            invoice_id=quote(str(invoice_id), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Invoice | Problem | None:
    if response.status_code == 200:
        response_200 = Invoice.from_dict(response.json())

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

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())

        return response_409

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
) -> Response[Invoice | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    invoice_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Response[Invoice | Problem]:
    """Issue a draft invoice (it no longer changes). Only a closed month's invoices can be issued: the
    month has
    ended and every second that began in it is metered (`month_closed`); issuing refreshes the draft
    from the
    month's final usage first, so what is issued holds every charge of the month.

    Args:
        invoice_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Invoice | Problem]
    """

    kwargs = _get_kwargs(
        invoice_id=invoice_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    invoice_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Invoice | Problem | None:
    """Issue a draft invoice (it no longer changes). Only a closed month's invoices can be issued: the
    month has
    ended and every second that began in it is metered (`month_closed`); issuing refreshes the draft
    from the
    month's final usage first, so what is issued holds every charge of the month.

    Args:
        invoice_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Invoice | Problem
    """

    return sync_detailed(
        invoice_id=invoice_id,
        client=client,
    ).parsed


async def asyncio_detailed(
    invoice_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Response[Invoice | Problem]:
    """Issue a draft invoice (it no longer changes). Only a closed month's invoices can be issued: the
    month has
    ended and every second that began in it is metered (`month_closed`); issuing refreshes the draft
    from the
    month's final usage first, so what is issued holds every charge of the month.

    Args:
        invoice_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Invoice | Problem]
    """

    kwargs = _get_kwargs(
        invoice_id=invoice_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    invoice_id: UUID,
    *,
    client: AuthenticatedClient,
) -> Invoice | Problem | None:
    """Issue a draft invoice (it no longer changes). Only a closed month's invoices can be issued: the
    month has
    ended and every second that began in it is metered (`month_closed`); issuing refreshes the draft
    from the
    month's final usage first, so what is issued holds every charge of the month.

    Args:
        invoice_id (UUID):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Invoice | Problem
    """

    return (
        await asyncio_detailed(
            invoice_id=invoice_id,
            client=client,
        )
    ).parsed
