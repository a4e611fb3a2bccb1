from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.create_ledger_entry_request import CreateLedgerEntryRequest
from ...models.ledger_entry import LedgerEntry
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    tenant_id: UUID,
    *,
    body: CreateLedgerEntryRequest,
    idempotency_key: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/admin/tenants/{tenant_id}/ledger".format(
            tenant_id=quote(str(tenant_id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> LedgerEntry | Problem | None:
    if response.status_code == 201:
        response_201 = LedgerEntry.from_dict(response.json())

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
) -> Response[LedgerEntry | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    tenant_id: UUID,
    *,
    client: AuthenticatedClient,
    body: CreateLedgerEntryRequest,
    idempotency_key: str | Unset = UNSET,
) -> Response[LedgerEntry | Problem]:
    """Post a top-up, adjustment or credit to a tenant's ledger. Send an `Idempotency-Key` to make retries
    safe.

    Args:
        tenant_id (UUID):
        idempotency_key (str | Unset):
        body (CreateLedgerEntryRequest):  Example: {'amount_minor': 500000, 'currency': 'USD',
            'kind': 'topup', 'reason': 'wire 2026-11-29'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[LedgerEntry | Problem]
    """

    kwargs = _get_kwargs(
        tenant_id=tenant_id,
        body=body,
        idempotency_key=idempotency_key,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    tenant_id: UUID,
    *,
    client: AuthenticatedClient,
    body: CreateLedgerEntryRequest,
    idempotency_key: str | Unset = UNSET,
) -> LedgerEntry | Problem | None:
    """Post a top-up, adjustment or credit to a tenant's ledger. Send an `Idempotency-Key` to make retries
    safe.

    Args:
        tenant_id (UUID):
        idempotency_key (str | Unset):
        body (CreateLedgerEntryRequest):  Example: {'amount_minor': 500000, 'currency': 'USD',
            'kind': 'topup', 'reason': 'wire 2026-11-29'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        LedgerEntry | Problem
    """

    return sync_detailed(
        tenant_id=tenant_id,
        client=client,
        body=body,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    tenant_id: UUID,
    *,
    client: AuthenticatedClient,
    body: CreateLedgerEntryRequest,
    idempotency_key: str | Unset = UNSET,
) -> Response[LedgerEntry | Problem]:
    """Post a top-up, adjustment or credit to a tenant's ledger. Send an `Idempotency-Key` to make retries
    safe.

    Args:
        tenant_id (UUID):
        idempotency_key (str | Unset):
        body (CreateLedgerEntryRequest):  Example: {'amount_minor': 500000, 'currency': 'USD',
            'kind': 'topup', 'reason': 'wire 2026-11-29'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[LedgerEntry | Problem]
    """

    kwargs = _get_kwargs(
        tenant_id=tenant_id,
        body=body,
        idempotency_key=idempotency_key,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    tenant_id: UUID,
    *,
    client: AuthenticatedClient,
    body: CreateLedgerEntryRequest,
    idempotency_key: str | Unset = UNSET,
) -> LedgerEntry | Problem | None:
    """Post a top-up, adjustment or credit to a tenant's ledger. Send an `Idempotency-Key` to make retries
    safe.

    Args:
        tenant_id (UUID):
        idempotency_key (str | Unset):
        body (CreateLedgerEntryRequest):  Example: {'amount_minor': 500000, 'currency': 'USD',
            'kind': 'topup', 'reason': 'wire 2026-11-29'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        LedgerEntry | Problem
    """

    return (
        await asyncio_detailed(
            tenant_id=tenant_id,
            client=client,
            body=body,
            idempotency_key=idempotency_key,
        )
    ).parsed
