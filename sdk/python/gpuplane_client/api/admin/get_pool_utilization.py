import datetime
from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.pool_utilization import PoolUtilization
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    pool_id: UUID,
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
        "url": "/v1/admin/pools/{pool_id}/utilization".format(
            pool_id=quote(str(pool_id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> PoolUtilization | Problem | None:
    if response.status_code == 200:
        response_200 = PoolUtilization.from_dict(response.json())

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
) -> Response[PoolUtilization | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    pool_id: UUID,
    *,
    client: AuthenticatedClient,
    from_: datetime.datetime | Unset = UNSET,
    to: datetime.datetime | Unset = UNSET,
    step_s: int | Unset = UNSET,
) -> Response[PoolUtilization | Problem]:
    """Utilization summary of a pool, per node.

    Args:
        pool_id (UUID):
        from_ (datetime.datetime | Unset):
        to (datetime.datetime | Unset):
        step_s (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[PoolUtilization | Problem]
    """

    kwargs = _get_kwargs(
        pool_id=pool_id,
        from_=from_,
        to=to,
        step_s=step_s,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    pool_id: UUID,
    *,
    client: AuthenticatedClient,
    from_: datetime.datetime | Unset = UNSET,
    to: datetime.datetime | Unset = UNSET,
    step_s: int | Unset = UNSET,
) -> PoolUtilization | Problem | None:
    """Utilization summary of a pool, per node.

    Args:
        pool_id (UUID):
        from_ (datetime.datetime | Unset):
        to (datetime.datetime | Unset):
        step_s (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        PoolUtilization | Problem
    """

    return sync_detailed(
        pool_id=pool_id,
        client=client,
        from_=from_,
        to=to,
        step_s=step_s,
    ).parsed


async def asyncio_detailed(
    pool_id: UUID,
    *,
    client: AuthenticatedClient,
    from_: datetime.datetime | Unset = UNSET,
    to: datetime.datetime | Unset = UNSET,
    step_s: int | Unset = UNSET,
) -> Response[PoolUtilization | Problem]:
    """Utilization summary of a pool, per node.

    Args:
        pool_id (UUID):
        from_ (datetime.datetime | Unset):
        to (datetime.datetime | Unset):
        step_s (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[PoolUtilization | Problem]
    """

    kwargs = _get_kwargs(
        pool_id=pool_id,
        from_=from_,
        to=to,
        step_s=step_s,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    pool_id: UUID,
    *,
    client: AuthenticatedClient,
    from_: datetime.datetime | Unset = UNSET,
    to: datetime.datetime | Unset = UNSET,
    step_s: int | Unset = UNSET,
) -> PoolUtilization | Problem | None:
    """Utilization summary of a pool, per node.

    Args:
        pool_id (UUID):
        from_ (datetime.datetime | Unset):
        to (datetime.datetime | Unset):
        step_s (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        PoolUtilization | Problem
    """

    return (
        await asyncio_detailed(
            pool_id=pool_id,
            client=client,
            from_=from_,
            to=to,
            step_s=step_s,
        )
    ).parsed
