"""The HTTP requests in flight in this API process, for its ingestion worker thread to yield to.

:class:`InflightMiddleware` counts each HTTP request from its start until its response is sent;
``agtos serve``'s worker thread (queue mode) waits while the count is above zero, at most
``AGTOS_WORKER_YIELD_MAX_S`` per batch (:meth:`agtos.memory.ingest_worker.IngestWorker.yield_to`).
A session end without ``?wait`` asks whether it is the only request in flight
(:meth:`InflightCounter.alone`) and, if so, waits for its own ingestion set aside from the count
(:meth:`InflightCounter.set_aside`): read-your-writes for a lone client, ``AGTOS_END_IDLE_WAIT_S``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Receive, Scope, Send


class InflightCounter:
    """A thread-safe count: the event loop changes it, the worker thread reads it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._n = 0
        self._aside = 0  # counted requests that wait for the worker (set aside: not in ``count``)

    def enter(self) -> None:
        with self._lock:
            self._n += 1

    def leave(self) -> None:
        with self._lock:
            self._n -= 1

    @property
    def count(self) -> int:
        return self._n

    @property
    def aside(self) -> int:
        """How many requests wait for the worker, set aside from :attr:`count`."""
        return self._aside

    def busy(self) -> bool:
        """Whether any request is in flight (what the worker asks)."""
        return self._n > 0

    def alone(self) -> bool:
        """Whether the asking request (counted, or set aside) is the only one in flight: no other
        counted request and no other one set aside."""
        with self._lock:
            return self._n + self._aside <= 1

    @contextmanager
    def set_aside(self) -> Iterator[None]:
        """A counted request that waits for the worker leaves the count while it waits (the worker
        thread would otherwise yield to it, and so delay what it waits for); back in it after."""
        with self._lock:
            self._n -= 1
            self._aside += 1
        try:
            yield
        finally:
            with self._lock:
                self._n += 1
                self._aside -= 1


def waits_for_worker(query: bytes) -> bool:
    """A session end with ``?wait=S`` (S > 0) waits for the worker: counting it would delay its own answer."""
    if b"wait=" not in query:
        return False
    values = parse_qs(query.decode("latin-1")).get("wait", [])
    return any(_positive(v) for v in values)


def _positive(value: str) -> bool:
    """``wait`` as the route reads it (a number of seconds): ``0``, ``0.00``, ``0e0`` do not wait; an invalid
    value is refused by the route with 422 before anything waits."""
    try:
        return float(value) > 0
    except ValueError:
        return False


class InflightMiddleware:
    """Pure ASGI: counts HTTP requests (not lifespan or websocket scopes, nor those that wait for
    the worker: :func:`waits_for_worker`) in ``counter``."""

    def __init__(self, app: ASGIApp, counter: InflightCounter) -> None:
        self.app = app
        self.counter = counter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or waits_for_worker(scope.get("query_string", b"")):
            await self.app(scope, receive, send)
            return
        self.counter.enter()
        try:
            await self.app(scope, receive, send)
        finally:
            self.counter.leave()
