from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.mixed_plan_request import MixedPlanRequest
from ...models.mixed_plan_result import MixedPlanResult
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    *,
    body: MixedPlanRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/plans/mixed",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> MixedPlanResult | Problem | None:
    if response.status_code == 200:
        response_200 = MixedPlanResult.from_dict(response.json())

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
) -> Response[MixedPlanResult | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: MixedPlanRequest,
) -> Response[MixedPlanResult | Problem]:
    """Plan training or LoRA over unlike GPUs: one to four parts, each one GPU model in nodes of one size,
    planned
    together (pipeline stages sized to each part's speed and memory) and each part alone. The same
    errors as
    `POST /v1/plans`, with a part's field errors at `parts[i].field`.

    Args:
        body (MixedPlanRequest): A mixed-cluster planning request: the model and workload of a
            [`PlanRequest`], and the parts.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[MixedPlanResult | Problem]
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
    body: MixedPlanRequest,
) -> MixedPlanResult | Problem | None:
    """Plan training or LoRA over unlike GPUs: one to four parts, each one GPU model in nodes of one size,
    planned
    together (pipeline stages sized to each part's speed and memory) and each part alone. The same
    errors as
    `POST /v1/plans`, with a part's field errors at `parts[i].field`.

    Args:
        body (MixedPlanRequest): A mixed-cluster planning request: the model and workload of a
            [`PlanRequest`], and the parts.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        MixedPlanResult | Problem
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: MixedPlanRequest,
) -> Response[MixedPlanResult | Problem]:
    """Plan training or LoRA over unlike GPUs: one to four parts, each one GPU model in nodes of one size,
    planned
    together (pipeline stages sized to each part's speed and memory) and each part alone. The same
    errors as
    `POST /v1/plans`, with a part's field errors at `parts[i].field`.

    Args:
        body (MixedPlanRequest): A mixed-cluster planning request: the model and workload of a
            [`PlanRequest`], and the parts.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[MixedPlanResult | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: MixedPlanRequest,
) -> MixedPlanResult | Problem | None:
    """Plan training or LoRA over unlike GPUs: one to four parts, each one GPU model in nodes of one size,
    planned
    together (pipeline stages sized to each part's speed and memory) and each part alone. The same
    errors as
    `POST /v1/plans`, with a part's field errors at `parts[i].field`.

    Args:
        body (MixedPlanRequest): A mixed-cluster planning request: the model and workload of a
            [`PlanRequest`], and the parts.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        MixedPlanResult | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
