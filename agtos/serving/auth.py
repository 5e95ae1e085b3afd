"""Who is calling: bearer API keys, per-key rate limits, the Host allow-list and the cross-site write guard.

Auth is on once an API key has been created (``agtos keys create``; it stays on when the last key
is revoked, until ``agtos keys off``) or with ``AGTOS_AUTH=required``. A process that saw auth on
keeps it on if the marker then vanishes (Redis restarted without its data): it fails closed, not open.
A presented key is looked up in Redis on every request (no cache), so a revocation by any process
counts from the next request on; a process that saw auth off trusts that for calls without a key for
``OFF_CACHE_S`` (1 s), so a first key created elsewhere applies to them within a second. With auth off
everything behaves as without this module. When Redis cannot be asked, the last answer this
process saw stands if it was "auth off" (reads keep degrading to ``available: false``); otherwise
(auth on, or never asked) the request gets a 503.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from fastapi import HTTPException
from fastapi.security import HTTPBearer
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from agtos.config import Settings
from agtos.storage.api_keys import ApiKey, ApiKeyStore
from agtos.storage.rate_limit import RateLimiter
from agtos.storage.redis_conn import StorageUnavailable

if TYPE_CHECKING:
    from agtos.memory.coordinator import MemoryCoordinator

log = logging.getLogger(__name__)

OFF_CACHE_S = 1.0  # how long "auth is off" is trusted for calls without a key (a key presented is always checked)
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
BEARER = HTTPBearer(
    auto_error=False,
    description="An API key from `agtos keys create` (`Authorization: Bearer agt_…`); needed once any key exists.",
)


@dataclass(frozen=True)
class Principal:
    """The key a request proved."""

    key: ApiKey

    @property
    def is_service(self) -> bool:
        return self.key.kind == "service"


def unauthorized(message: str) -> HTTPException:
    return HTTPException(status_code=401, detail=message, headers={"WWW-Authenticate": "Bearer"})


class Authenticator:
    """Checks a request's bearer key and takes a token from its bucket (blocking Redis calls: run it off the loop)."""

    def __init__(self, coordinator: MemoryCoordinator) -> None:
        self.coordinator = coordinator
        self.settings: Settings = coordinator.settings
        self._store: ApiKeyStore | None = None
        self._limiter: RateLimiter | None = None
        self._lock = threading.Lock()
        self._enabled_seen: bool | None = None  # the last answer Redis gave to "is auth on?"
        self._seen_at = 0.0
        self._ever_on = False  # this process saw auth on: a marker gone since (Redis lost its data) keeps it on
        self._marker_seen = True

    def _parts(self) -> tuple[ApiKeyStore, RateLimiter]:
        if self._store is None or self._limiter is None:  # built on first use: the OpenAPI stand-in has no Redis
            with self._lock:
                if self._store is None or self._limiter is None:
                    connector, keys, s = self.coordinator.connector, self.coordinator.keys, self.settings
                    self._limiter = RateLimiter(connector, keys, s.rate_limit_per_s, s.rate_limit_burst)
                    self._store = ApiKeyStore(connector, keys)
        return self._store, self._limiter

    def known_off(self) -> bool:
        """Auth was off at most ``OFF_CACHE_S`` ago: a call without a key may skip the Redis check."""
        fresh = time.monotonic() - self._seen_at < OFF_CACHE_S
        return self.settings.auth != "required" and self._enabled_seen is False and fresh

    def authenticate(self, token: str | None) -> Principal | None:
        """The principal ``token`` proves, or None when auth is off; 401 / 429 / 503 otherwise."""
        store, limiter = self._parts()
        try:
            found = store.check(token, limiter)  # with the key's rate-limit token: one round trip
        except StorageUnavailable:
            if self.settings.auth == "auto" and self._enabled_seen is False:
                return None  # auth was off when Redis last answered: it stays off while Redis is down
            raise
        enabled = found.enabled or (self._ever_on and not found.known)
        if enabled and not found.enabled and self._marker_seen:  # logged once, when it goes
            log.error("the API-key marker is gone from Redis (data lost?): auth stays on; recreate the keys")
        self._marker_seen = found.known
        self._ever_on = self._ever_on or enabled
        self._enabled_seen, self._seen_at = enabled, time.monotonic()
        if self.settings.auth != "required" and not enabled:
            return None
        if found.key is None:
            raise unauthorized("an API key is required" if token is None else "invalid or revoked API key")
        decision = found.rate or limiter.take(found.key.id)  # no token taken there: a rate of 0 (no call)
        if not decision.allowed:
            raise HTTPException(
                status_code=429,
                detail=f"rate limit of this API key exceeded; retry in {decision.retry_after_s} s",
                headers={"Retry-After": str(decision.retry_after_s)},
            )
        return Principal(found.key)


def host_name(host: str) -> str:
    """``Host`` without its port, lower-cased (``[::1]:4102`` → ``::1``); a malformed one (a port that is
    not digits, text after ``]``) is returned whole, so it matches no allowed name."""
    host = host.strip().lower()
    if host.startswith("["):
        name, _, rest = host[1:].partition("]")
        return name if rest == "" or (rest[:1] == ":" and rest[1:].isdigit()) else host
    if host.count(":") != 1:
        return host
    name, port = host.split(":")
    return name if port.isdigit() else host


def is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def target_authority(raw_path: bytes) -> str | None:
    """The authority of an absolute-form request target (``http://evil.example/x`` -> ``evil.example``) as
    uvicorn's h11 protocol leaves it in ``raw_path``; None for the usual origin-form (``/x``)."""
    if not raw_path.lower().startswith((b"http://", b"https://")):
        return None
    return urlsplit(raw_path.decode("latin-1")).netloc.rpartition("@")[2]


def request_guard_error(
    method: str,
    headers: Headers,
    allowed_hosts: frozenset[str],
    cors_origins: frozenset[str] = frozenset(),
    authority: str | None = None,
) -> tuple[int, str] | None:
    """Why a request is refused before routing (status, message), or None.

    A ``Host`` outside the allow-list is a 400 (DNS rebinding); with an absolute-form request target,
    its ``authority`` counts instead of the ``Host`` header (RFC 9112 3.2.2; ``agtos serve``'s
    protocol, :mod:`agtos.serving.http_protocol`, puts it in ``Host``). A state-changing request without an
    ``Authorization`` header from another origin (``Origin`` not this host, or
    ``Sec-Fetch-Site: cross-site``) is a 403, and one whose body is not JSON is a 415: a browser
    cannot send a JSON body or an ``Authorization`` header cross-site without a CORS preflight,
    which this API grants only to the ``cors_origins`` (``AGTOS_CORS_ORIGINS``), the one exception to
    the 403. Body-less calls from non-browser clients (no ``Origin``) still work.
    """
    host = headers.get("host", "") if authority is None else authority
    if "*" not in allowed_hosts and host_name(host) not in allowed_hosts:
        return 400, f"Host {host!r} is not served here; add it to AGTOS_ALLOWED_HOSTS"
    if method not in WRITE_METHODS or "authorization" in headers:
        return None
    origin = headers.get("origin")
    trusted = origin is not None and origin.lower() in cors_origins  # still needs a JSON body, below
    cross_site = (origin is not None and urlsplit(origin).netloc.lower() != host.lower()) or headers.get(
        "sec-fetch-site"
    ) == "cross-site"
    if cross_site and not trusted:
        return 403, "cross-site requests may not change memory (send an Authorization header from your own client)"
    content_type = headers.get("content-type", "").strip()
    if content_type and not is_json(content_type):
        return 415, f"state-changing requests take a JSON body (Content-Type: application/json), not {content_type!r}"
    return None


class RequestGuardMiddleware:
    """Pure ASGI middleware: the Host allow-list and the cross-site write guard (see ``request_guard_error``)."""

    def __init__(self, app: ASGIApp, allowed_hosts: frozenset[str], cors_origins: frozenset[str]) -> None:
        self.app = app
        self.allowed_hosts = allowed_hosts
        self.cors_origins = cors_origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            named = target_authority(scope.get("raw_path") or b"")
            refused = request_guard_error(
                scope["method"], Headers(scope=scope), self.allowed_hosts, self.cors_origins, named
            )
            if refused is not None:
                status, message = refused
                body = json.dumps({"message": message}).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": status,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
