"""The client's transports: :class:`MemoryClient` (blocking) and :class:`AsyncMemoryClient` (asyncio) over httpx,
with retries of 429/503 and :class:`MemoryAPIError` for any other non-2xx answer."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import email.utils
import itertools
import time
from datetime import UTC, datetime
from typing import Any, Generic, Self, TypeVar

import httpx

from agtos import __version__
from agtos.client.endpoint_spec import Call
from agtos.client.routes import Endpoints

T = TypeVar("T")
H = TypeVar("H", httpx.Client, httpx.AsyncClient)

DEFAULT_URL = "http://127.0.0.1:4102"
RETRY_STATUSES = frozenset({429, 503})


class MemoryAPIError(Exception):
    """A non-2xx answer: ``status``, the API's ``message``, and (422) the per-field ``errors``."""

    def __init__(self, status: int, message: str, detail: str | None = None, errors: list[Any] | None = None) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.detail = detail
        self.errors = errors or []

    @classmethod
    def of(cls, response: httpx.Response) -> MemoryAPIError:
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return cls(response.status_code, response.text or response.reason_phrase)
        return cls(response.status_code, str(body.get("message", "")), body.get("detail"), body.get("errors"))


def retry_delay(response: httpx.Response, attempt: int, backoff_s: float, max_delay_s: float) -> float:
    """Seconds to wait before retrying a 429/503: its ``Retry-After`` (seconds or a date), else back-off."""
    header = response.headers.get("retry-after", "").strip()
    delay = backoff_s * 2**attempt
    if header.isdigit():
        delay = float(header)
    elif header:
        with contextlib.suppress(TypeError, ValueError):
            delay = (email.utils.parsedate_to_datetime(header) - datetime.now(UTC)).total_seconds()
    return min(max(delay, 0.0), max_delay_s)


class _Client(Endpoints, Generic[H]):
    """What the two clients share: headers, retries, the answer's checks; ``http``: an httpx client of your own."""

    http_class: type[H]

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        user_id: str | None = None,
        timeout: float = 30.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        max_delay_s: float = 30.0,
        http: H | None = None,
    ) -> None:
        self.user_id = user_id
        self.retries, self.backoff_s, self.max_delay_s = retries, backoff_s, max_delay_s
        self.headers = {"User-Agent": f"agtos-client/{__version__}"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        if user_id:
            self.headers["X-User-Id"] = user_id
        self.http: H = http or self.http_class(base_url=base_url, timeout=timeout)
        self._owned = http is None

    def for_user(self, user_id: str) -> Self:
        """The same client (connection pool, key) acting for another user; closing it is the original's job."""
        clone = copy.copy(self)
        clone.user_id, clone.headers, clone._owned = user_id, {**self.headers, "X-User-Id": user_id}, False
        return clone

    def _request(self, call: Call[Any]) -> dict[str, Any]:
        return {
            "method": call.method,
            "url": call.url,
            "params": call.params,
            "json": call.json,
            "headers": self.headers,
        }

    def _wait(self, response: httpx.Response, attempt: int) -> float | None:
        """Seconds to wait before trying again (a 429/503 with tries left), else None."""
        if response.status_code in RETRY_STATUSES and attempt < self.retries:
            return retry_delay(response, attempt, self.backoff_s, self.max_delay_s)
        return None

    @staticmethod
    def _result(call: Call[T], response: httpx.Response) -> T:
        if response.is_error:
            raise MemoryAPIError.of(response)
        return call.parse(response)


class MemoryClient(_Client[httpx.Client]):
    """Blocking client. ``http``: an ``httpx.Client`` of your own (e.g. FastAPI's ``TestClient``)."""

    http_class = httpx.Client

    def _send(self, call: Call[T]) -> T:
        for attempt in itertools.count():
            response = self.http.request(**self._request(call))
            delay = self._wait(response, attempt)
            if delay is None:
                return self._result(call, response)
            time.sleep(delay)
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._owned:
            self.http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class AsyncMemoryClient(_Client[httpx.AsyncClient]):
    """Asyncio client. ``http``: an ``httpx.AsyncClient`` of your own (e.g. over ``httpx.ASGITransport(app)``)."""

    http_class = httpx.AsyncClient

    async def _send(self, call: Call[T]) -> T:
        for attempt in itertools.count():
            response = await self.http.request(**self._request(call))
            delay = self._wait(response, attempt)
            if delay is None:
                return self._result(call, response)
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        if self._owned:
            await self.http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()
