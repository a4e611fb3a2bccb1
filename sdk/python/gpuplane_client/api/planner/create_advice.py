from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.advice_query import AdviceQuery
from ...models.advice_result import AdviceResult
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    *,
    body: AdviceQuery,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/advice",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> AdviceResult | Problem | None:
    if response.status_code == 200:
        response_200 = AdviceResult.from_dict(response.json())

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
) -> Response[AdviceResult | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: AdviceQuery,
) -> Response[AdviceResult | Problem]:
    """Which GPUs to rent: for every pool and the GPU counts free in it now, the best plan, time to finish
    and
    cost at the pool's price; shown is the cost/time frontier (nothing left out is both cheaper and
    faster than
    an option shown; costs within `cost_tie_bps` count as equal and the faster is shown), with the
    cheapest and
    the fastest of what is shown marked. Training and LoRA may also get `mixes`: two pools of one
    currency used
    by one plan, priced per pool, shown when cheaper or faster than every single-pool option.

    Args:
        body (AdviceQuery): What the tenant wants done; the platform supplies the pools. Example:
            {'budget_minor': 50000, 'deadline_hours': 24, 'model': {'preset': 'llama2-7b'}, 'target':
            {'training_tokens': 2000000000}, 'workload': {'global_batch': 64, 'kind': 'lora',
            'seq_len': 4096}}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AdviceResult | Problem]
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
    body: AdviceQuery,
) -> AdviceResult | Problem | None:
    """Which GPUs to rent: for every pool and the GPU counts free in it now, the best plan, time to finish
    and
    cost at the pool's price; shown is the cost/time frontier (nothing left out is both cheaper and
    faster than
    an option shown; costs within `cost_tie_bps` count as equal and the faster is shown), with the
    cheapest and
    the fastest of what is shown marked. Training and LoRA may also get `mixes`: two pools of one
    currency used
    by one plan, priced per pool, shown when cheaper or faster than every single-pool option.

    Args:
        body (AdviceQuery): What the tenant wants done; the platform supplies the pools. Example:
            {'budget_minor': 50000, 'deadline_hours': 24, 'model': {'preset': 'llama2-7b'}, 'target':
            {'training_tokens': 2000000000}, 'workload': {'global_batch': 64, 'kind': 'lora',
            'seq_len': 4096}}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AdviceResult | Problem
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: AdviceQuery,
) -> Response[AdviceResult | Problem]:
    """Which GPUs to rent: for every pool and the GPU counts free in it now, the best plan, time to finish
    and
    cost at the pool's price; shown is the cost/time frontier (nothing left out is both cheaper and
    faster than
    an option shown; costs within `cost_tie_bps` count as equal and the faster is shown), with the
    cheapest and
    the fastest of what is shown marked. Training and LoRA may also get `mixes`: two pools of one
    currency used
    by one plan, priced per pool, shown when cheaper or faster than every single-pool option.

    Args:
        body (AdviceQuery): What the tenant wants done; the platform supplies the pools. Example:
            {'budget_minor': 50000, 'deadline_hours': 24, 'model': {'preset': 'llama2-7b'}, 'target':
            {'training_tokens': 2000000000}, 'workload': {'global_batch': 64, 'kind': 'lora',
            'seq_len': 4096}}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AdviceResult | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: AdviceQuery,
) -> AdviceResult | Problem | None:
    """Which GPUs to rent: for every pool and the GPU counts free in it now, the best plan, time to finish
    and
    cost at the pool's price; shown is the cost/time frontier (nothing left out is both cheaper and
    faster than
    an option shown; costs within `cost_tie_bps` count as equal and the faster is shown), with the
    cheapest and
    the fastest of what is shown marked. Training and LoRA may also get `mixes`: two pools of one
    currency used
    by one plan, priced per pool, shown when cheaper or faster than every single-pool option.

    Args:
        body (AdviceQuery): What the tenant wants done; the platform supplies the pools. Example:
            {'budget_minor': 50000, 'deadline_hours': 24, 'model': {'preset': 'llama2-7b'}, 'target':
            {'training_tokens': 2000000000}, 'workload': {'global_batch': 64, 'kind': 'lora',
            'seq_len': 4096}}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AdviceResult | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
