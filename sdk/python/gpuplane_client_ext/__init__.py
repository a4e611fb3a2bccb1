"""Hand-written helpers around the generated ``gpuplane_client`` package (never touched by the generator).

- :class:`GpuplaneError`: an API error as a typed exception: ``status``, ``code``, field ``errors``.
- :func:`raise_for_problem`: turn a ``*.sync_detailed(...)`` response into its parsed body, or raise.
- :func:`login`: exchange an API key for an access token and return an ``AuthenticatedClient``.
- :func:`create_lease`: ``POST /v1/leases`` with an ``Idempotency-Key`` (a fresh one unless given), retried
  with that same key on connection errors and 5xx/429, so a retry never creates a second lease.

    from gpuplane_client.api.inventory import list_pools
    from gpuplane_client_ext import GpuplaneError, login, raise_for_problem

    client = login("https://gpuplane.example.com", "gpk_...")
    pools = raise_for_problem(list_pools.sync_detailed(client=client))
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
from gpuplane_client import AuthenticatedClient, Client
from gpuplane_client.api.auth import create_token
from gpuplane_client.api.leases import create_lease as create_lease_api
from gpuplane_client.models.create_lease_request import CreateLeaseRequest
from gpuplane_client.models.lease import Lease
from gpuplane_client.models.problem import Problem
from gpuplane_client.models.problem_context_type_0 import ProblemContextType0
from gpuplane_client.models.token_request import TokenRequest
from gpuplane_client.types import Response, Unset

__all__ = ["FieldError", "GpuplaneError", "create_lease", "login", "raise_for_problem"]

T = TypeVar("T")


@dataclass(frozen=True)
class FieldError:
    """One field-level validation failure: ``field`` is a JSON path such as ``gpu_count`` or ``gpus[2].uuid``."""

    field: str
    message: str


@dataclass(eq=False)
class GpuplaneError(Exception):
    """An error answer of the API (RFC 9457 problem+json), with its stable ``code``.

    ``code`` is e.g. ``validation_failed`` (then ``errors`` lists the offending fields), ``not_found``,
    ``insufficient_capacity`` or ``quota_exceeded`` (then ``context`` holds the facts; it is empty when the
    answer has none). A response that is not problem+json (a proxy's error page, say) gets ``code``
    ``"http_<status>"``.
    """

    status: int
    code: str
    detail: str = ""
    errors: list[FieldError] = field(default_factory=list)
    context: dict[str, Any] = field(default_factory=dict)
    title: str = ""

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def __str__(self) -> str:
        text = f"{self.status} {self.code}: {self.detail}" if self.detail else f"{self.status} {self.code}"
        if self.errors:
            text += " (" + "; ".join(f"{e.field}: {e.message}" for e in self.errors) + ")"
        return text

    def field_names(self) -> list[str]:
        """The offending fields' paths, in the server's order."""
        return [e.field for e in self.errors]

    @classmethod
    def from_problem(cls, problem: Problem, status: int | None = None) -> GpuplaneError:
        errors = [] if isinstance(problem.errors, Unset) else [FieldError(e.field, e.message) for e in problem.errors]
        context = problem.context.to_dict() if isinstance(problem.context, ProblemContextType0) else {}
        return cls(
            status=status if status is not None else problem.status,
            code=problem.code,
            detail=problem.detail,
            errors=errors,
            context=context,
            title=problem.title,
        )

    @classmethod
    def from_body(cls, status: int, content: bytes) -> GpuplaneError:
        """From a raw error body: problem+json when it is one, otherwise a generic ``http_<status>`` error."""
        try:
            body = json.loads(content)
        except (ValueError, UnicodeDecodeError):
            body = None
        if isinstance(body, dict) and isinstance(body.get("code"), str):
            try:
                return cls.from_problem(Problem.from_dict(body), status)
            except (KeyError, TypeError, ValueError):
                pass
        detail = content.decode("utf-8", "replace")[:500] if content else ""
        return cls(status=status, code=f"http_{status}", detail=detail)


def raise_for_problem(response: Response[Problem | T]) -> T:
    """Return the parsed success body of a ``sync_detailed``/``asyncio_detailed`` response, or raise.

    Typed: for ``list_pools.sync_detailed(...)`` (a ``Response[Problem | list[Pool]]``) it returns ``list[Pool]``.
    Raises :class:`GpuplaneError` for every status of 400 or more: documented ones come back from the generated
    code as ``Problem`` models; undocumented ones are parsed from the raw body. A success without a body (204,
    whose operations are typed ``Any``) returns ``None``; any other success the generated code could not parse
    (a status the API does not document) raises ``GpuplaneError`` with code ``unexpected_response``, so the
    result is never a ``None`` typed as data.
    """
    status = int(response.status_code)
    parsed = response.parsed
    if status >= 400:
        if isinstance(parsed, Problem):
            raise GpuplaneError.from_problem(parsed, status)
        raise GpuplaneError.from_body(status, response.content)
    if isinstance(parsed, Problem):  # never for this API; kept so a Problem is never taken for data
        raise GpuplaneError.from_problem(parsed, status)
    if parsed is None:
        if status == 204:
            return None  # type: ignore[return-value]  # the operations answering 204 are typed Response[Any | Problem]
        raise GpuplaneError(status=status, code="unexpected_response", detail=f"undocumented success status {status}")
    return parsed


def login(base_url: str, api_key: str, **client_kwargs: Any) -> AuthenticatedClient:
    """Exchange an API key at ``POST /v1/auth/token`` and return a client sending the access token.

    Access tokens are short-lived (15 minutes by default): call ``login`` again for a long-running program.
    ``client_kwargs`` go to both clients (e.g. ``timeout=httpx.Timeout(30)``, ``verify_ssl=...``).
    """
    with Client(base_url=base_url, **client_kwargs) as anonymous:
        token = raise_for_problem(create_token.sync_detailed(client=anonymous, body=TokenRequest(api_key=api_key)))
    return AuthenticatedClient(base_url=base_url, token=token.access_token, **client_kwargs)


def create_lease(
    client: AuthenticatedClient,
    body: CreateLeaseRequest,
    idempotency_key: str | None = None,
    attempts: int = 4,
) -> Lease:
    """Create a lease safely: with an ``Idempotency-Key`` (a fresh UUID unless given) and retries that reuse it.

    A create whose answer was lost (a timeout, a crash of the service mid-request) may have committed; retrying
    it with the same key returns that lease instead of allocating a second one (the server replays the first
    answer for 24 h). Connection errors, 429 and 5xx are retried up to ``attempts`` times with a short
    exponential pause; any other error raises :class:`GpuplaneError` at once. To retry across restarts of your
    own program, pass a key you stored.
    """
    key = idempotency_key or str(uuid.uuid4())
    for attempt in range(attempts):
        last = attempt == attempts - 1
        try:
            response = create_lease_api.sync_detailed(client=client, body=body, idempotency_key=key)
        except httpx.TransportError:
            if last:
                raise
        else:
            status = int(response.status_code)
            if not (status == 429 or status >= 500) or last:
                return raise_for_problem(response)
        time.sleep(min(0.5 * 2**attempt, 5.0))
    raise AssertionError("unreachable")
