import datetime
from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.telemetry import Telemetry
from ...types import UNSET, Response, Unset


def _get_kwargs(
    lease_id: UUID,
    *,
    from_: datetime.datetime | Unset = UNSET,
    to: datetime.datetime | Unset = UNSET,
    step_s: int | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_from_: str | Unset = UNSET
    if not isinstance(from_, Unset):
        json_from_ = from_.isoformat()
    params["from"] = json_from_

    json_to: str | Unset = UNSET
    if not isinstance(to, Unset):
        json_to = to.isoformat()
    params["to"] = json_to

    params["step_s"] = step_s

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/leases/{lease_id}/telemetry".format(
            lease_id=quote(str(lease_id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | Telemetry | None:
    if response.status_code == 200:
        response_200 = Telemetry.from_dict(response.json())

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
) -> Response[Problem | Telemetry]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    lease_id: UUID,
    *,
    client: AuthenticatedClient,
    from_: datetime.datetime | Unset = UNSET,
    to: datetime.datetime | Unset = UNSET,
    step_s: int | Unset = UNSET,
) -> Response[Problem | Telemetry]:
    """Telemetry of the lease's GPUs, only within the lease's own period.

    Args:
        lease_id (UUID):
        from_ (datetime.datetime | Unset):
        to (datetime.datetime | Unset):
        step_s (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | Telemetry]
    """

    kwargs = _get_kwargs(
        lease_id=lease_id,
        from_=from_,
        to=to,
        step_s=step_s,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    lease_id: UUID,
    *,
    client: AuthenticatedClient,
    from_: datetime.datetime | Unset = UNSET,
    to: datetime.datetime | Unset = UNSET,
    step_s: int | Unset = UNSET,
) -> Problem | Telemetry | None:
    """Telemetry of the lease's GPUs, only within the lease's own period.

    Args:
        lease_id (UUID):
        from_ (datetime.datetime | Unset):
        to (datetime.datetime | Unset):
        step_s (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | Telemetry
    """

    return sync_detailed(
        lease_id=lease_id,
        client=client,
        from_=from_,
        to=to,
        step_s=step_s,
    ).parsed


async def asyncio_detailed(
    lease_id: UUID,
    *,
    client: AuthenticatedClient,
    from_: datetime.datetime | Unset = UNSET,
    to: datetime.datetime | Unset = UNSET,
    step_s: int | Unset = UNSET,
) -> Response[Problem | Telemetry]:
    """Telemetry of the lease's GPUs, only within the lease's own period.

    Args:
        lease_id (UUID):
        from_ (datetime.datetime | Unset):
        to (datetime.datetime | Unset):
        step_s (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | Telemetry]
    """

    kwargs = _get_kwargs(
        lease_id=lease_id,
        from_=from_,
        to=to,
        step_s=step_s,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    lease_id: UUID,
    *,
    client: AuthenticatedClient,
    from_: datetime.datetime | Unset = UNSET,
    to: datetime.datetime | Unset = UNSET,
    step_s: int | Unset = UNSET,
) -> Problem | Telemetry | None:
    """Telemetry of the lease's GPUs, only within the lease's own period.

    Args:
        lease_id (UUID):
        from_ (datetime.datetime | Unset):
        to (datetime.datetime | Unset):
        step_s (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | Telemetry
    """

    return (
        await asyncio_detailed(
            lease_id=lease_id,
            client=client,
            from_=from_,
            to=to,
            step_s=step_s,
        )
    ).parsed
