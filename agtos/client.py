"""Typed Python client of the agtos memory API: ``MemoryClient`` (sync) and ``AsyncMemoryClient`` over httpx.

>>> with MemoryClient("http://127.0.0.1:4102", api_key="agt_…", user_id="alice") as memory:
...     memory.add_turns("s1", [{"role": "user", "content": "I take my coffee black."}])
...     memory.end_session("s1")
...     memory.search("coffee").results[0].summary

Every endpoint is one method returning the API's own response model (``agtos.schemas.api``); request
bodies are built and checked with the API's request models, so a bad argument fails here with pydantic's
``ValidationError`` before anything is sent. A non-2xx answer raises :class:`MemoryAPIError` with the
status and the API's ``message``; 429 and 503 are retried with exponential back-off (``Retry-After``
honoured). The module imports nothing of the server but its schemas.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import email.utils
import enum
import functools
import itertools
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, Literal, ParamSpec, Self, TypeVar, overload
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter

from agtos import __version__
from agtos.schemas import EntityType, MaintenanceReport, ProfileUpdate, Turn
from agtos.schemas.api import (
    AskOut,
    AskRequest,
    ConclusionDeletedOut,
    ConclusionsOut,
    ContextOut,
    ContextRequest,
    ConversationSession,
    ConversationsIn,
    ConversationsOut,
    DreamOut,
    EntityConclusionsOut,
    EntityDeletedOut,
    EntityEnvelope,
    EntityEpisodesOut,
    EntityMergeOut,
    EntityPageOut,
    EntityRelationshipsOut,
    EntityStatsOut,
    EntityUpdate,
    EpisodesOut,
    ForgetAllOut,
    ForgetItemOut,
    ForgetKind,
    ForgetRequest,
    HealthOut,
    ImportOut,
    ImportRequest,
    MaintenanceHistoryOut,
    MaintenanceRun,
    MemoriesOut,
    MemoryDeletedOut,
    MemoryHistoryOut,
    MemoryIn,
    MemoryOut,
    MemoryUpdate,
    MemoryWriteOut,
    MergeRequest,
    PrivacyOut,
    PrivacySettings,
    PrivacyUpdateOut,
    ProfileOut,
    ResponseIn,
    ResponseIngestOut,
    SearchOut,
    SessionEndOut,
    SessionOut,
    SourceName,
    SourcesOut,
    TurnsAppendedOut,
    TurnsIn,
)

__all__ = ["AsyncMemoryClient", "MemoryAPIError", "MemoryClient"]

T = TypeVar("T")
P = ParamSpec("P")
B = TypeVar("B", bound=BaseModel)

DEFAULT_URL = "http://127.0.0.1:4102"
RETRY_STATUSES = frozenset({429, 503})
SearchMode = Literal["hybrid", "vector", "bm25"]
ConclusionKind = Literal["explicit", "deductive", "inductive", "abductive"]


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


# -- endpoints: declared once, bound to the sync and the async client ---------------------------
@dataclass(frozen=True)
class Parts:
    """What one call sends besides the route: path values, query parameters, a body."""

    path: Mapping[str, str | int] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    body: BaseModel | None = None


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    url: str
    params: dict[str, Any]
    json: Any
    result: TypeAdapter[T]

    def parse(self, response: httpx.Response) -> T:
        if response.headers.get("content-type", "").startswith("application/json"):
            return self.result.validate_json(response.content)
        return self.result.validate_python(response.text)


class Endpoint(Generic[P, T]):
    """One route (method, path template, response model) and the function that builds a call's parts."""

    def __init__(self, method: str, path: str, result: TypeAdapter[T], returns: Any, build: Callable[P, Parts]) -> None:
        self.method, self.path, self.result, self.returns, self.build = method, path, result, returns, build
        functools.update_wrapper(self, build)  # type: ignore[arg-type]

    def call(self, *args: P.args, **kwargs: P.kwargs) -> Call[T]:
        parts = self.build(*args, **kwargs)
        url = self.path.format_map({k: quote(str(v), safe="") for k, v in parts.path.items()})
        params = {k: v for k, v in parts.params.items() if v is not None}
        body = None if parts.body is None else parts.body.model_dump(mode="json", exclude_unset=True)
        return Call(self.method, url, params, body, self.result)

    @overload
    def __get__(self, obj: None, owner: type) -> Endpoint[P, T]: ...
    @overload
    def __get__(self, obj: MemoryClient, owner: type) -> Callable[P, T]: ...
    @overload
    def __get__(self, obj: AsyncMemoryClient, owner: type) -> Callable[P, Awaitable[T]]: ...
    def __get__(self, obj: Endpoints | None, owner: type) -> Any:
        if obj is None:
            return self

        @functools.wraps(self.build)
        def bound(*args: P.args, **kwargs: P.kwargs) -> Any:
            return obj._send(self.call(*args, **kwargs))

        return bound


def endpoint(
    method: str, path: str, result: type[T] | TypeAdapter[T], returns: Any = None
) -> Callable[[Callable[P, Parts]], Endpoint[P, T]]:
    """Declare a route's method: HTTP method, path template, response model (``returns``: the type a
    union's adapter validates)."""
    adapter: TypeAdapter[T] = result if isinstance(result, TypeAdapter) else TypeAdapter(result)
    return lambda build: Endpoint(method, path, adapter, returns or result, build)


def body_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments given: None stands for the API's default."""
    return {k: v for k, v in fields.items() if v is not None}


def body(model: type[B], **fields: Any) -> B:
    """A request body from the arguments given, checked by the API's own request model."""
    return model.model_validate(body_fields(fields))


class Unset(enum.Enum):
    """Marks an argument not given where None means something (``valid_until=None``: clear it)."""

    token = "unset"


UNSET = Unset.token


ForgetResult = ForgetAllOut | ForgetItemOut
FORGET_RESULT: TypeAdapter[ForgetResult] = TypeAdapter(ForgetResult)


# ruff: noqa: N805 - the functions below build a call's parts; Endpoint binds them to the client
class Endpoints:
    """Every public route of the API as a method (the client test checks none is missing)."""

    def _send(self, call: Call[Any]) -> Any:
        raise NotImplementedError

    # -- health ---------------------------------------------------------------------------
    @endpoint("GET", "/health", HealthOut)
    def health() -> Parts:
        """Per-tier status (always 200 while the service runs)."""
        return Parts()

    @endpoint("GET", "/metrics", str)
    def metrics() -> Parts:
        """Prometheus metrics (text exposition format)."""
        return Parts()

    # -- sessions -------------------------------------------------------------------------
    @endpoint("POST", "/api/memory/sessions/{session_id}/turns", TurnsAppendedOut)
    def add_turns(
        session_id: str, turns: Sequence[Turn | Mapping[str, Any]], speakers: Mapping[str, str] | None = None
    ) -> Parts:
        """Append turns (``{"role", "content", "name"?, "timestamp"?}``) to a live session."""
        return Parts({"session_id": session_id}, body=body(TurnsIn, turns=list(turns), speakers=speakers))

    @endpoint("GET", "/api/memory/sessions/{session_id}", SessionOut)
    def get_session(session_id: str) -> Parts:
        """A live session's working memory (404 if none)."""
        return Parts({"session_id": session_id})

    @endpoint("POST", "/api/memory/sessions/{session_id}/end", SessionEndOut)
    def end_session(session_id: str, wait: float | None = None) -> Parts:
        """Summarise the session into an episode (idempotent); queue mode: ``wait`` up to that many seconds."""
        return Parts({"session_id": session_id}, params={"wait": wait})

    @endpoint("POST", "/api/memory/conversations", ConversationsOut)
    def ingest_conversations(sessions: Sequence[ConversationSession | Mapping[str, Any]]) -> Parts:
        """Store past sessions (id, started_at?, speakers?, dated turns) in one batch; idempotent on ids."""
        return Parts(body=body(ConversationsIn, sessions=list(sessions)))

    # -- memories -------------------------------------------------------------------------
    @endpoint("POST", "/api/memory/memories", MemoryWriteOut)
    def add_memory(
        text: str,
        kind: Literal["fact", "preference"] | None = None,
        source: str | None = None,
        valid_from: int | None = None,
        valid_until: int | None = None,
    ) -> Parts:
        """Remember a fact or preference; a near-duplicate of a stored one is merged (``merged_into``)."""
        fields = {"source": source, "valid_from": valid_from, "valid_until": valid_until}
        return Parts(body=body(MemoryIn, text=text, kind=kind, **fields))

    @endpoint("GET", "/api/memory/memories", MemoriesOut)
    def list_memories(
        q: str | None = None,
        kind: Literal["fact", "preference", "pattern"] | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> Parts:
        """Memories, newest first, or the best matches of ``q``."""
        return Parts(params={"q": q, "kind": kind, "limit": limit, "offset": offset})

    @endpoint("GET", "/api/memory/memories/{memory_id}", MemoryOut)
    def get_memory(memory_id: str) -> Parts:
        return Parts({"memory_id": memory_id})

    @endpoint("PUT", "/api/memory/memories/{memory_id}", MemoryOut)
    def update_memory(
        memory_id: str,
        text: str | None = None,
        kind: Literal["fact", "preference"] | None = None,
        valid_from: int | None = None,
        valid_until: int | Unset | None = UNSET,
    ) -> Parts:
        """Edit a memory; ``valid_until=None`` makes a closed memory current again."""
        fields = {"text": text, "kind": kind, "valid_from": valid_from}
        until = {} if isinstance(valid_until, Unset) else {"valid_until": valid_until}
        return Parts({"memory_id": memory_id}, body=MemoryUpdate.model_validate({**body_fields(fields), **until}))

    @endpoint("DELETE", "/api/memory/memories/{memory_id}", MemoryDeletedOut)
    def delete_memory(memory_id: str) -> Parts:
        return Parts({"memory_id": memory_id})

    @endpoint("GET", "/api/memory/memories/{memory_id}/history", MemoryHistoryOut)
    def memory_history(memory_id: str) -> Parts:
        """Every change of a memory, oldest first, with its origin."""
        return Parts({"memory_id": memory_id})

    # -- recall ---------------------------------------------------------------------------
    @endpoint("GET", "/api/memory/episodes", EpisodesOut)
    def list_episodes(limit: int | None = None) -> Parts:
        """Episodes, newest first."""
        return Parts(params={"limit": limit})

    @endpoint("GET", "/api/memory/search", SearchOut)
    def search(q: str, limit: int | None = None, mode: SearchMode | None = None) -> Parts:
        """Episodes ranked by their best evidence (hybrid BM25 + vector unless ``mode``)."""
        return Parts(params={"q": q, "limit": limit, "mode": mode})

    @endpoint("POST", "/api/memory/context", ContextOut)
    def context(
        query: str, session_id: str | None = None, token_budget: int | None = None, limit: int | None = None
    ) -> Parts:
        """The memory section for a system prompt, fitted to ``token_budget`` tokens."""
        return Parts(
            body=body(ContextRequest, query=query, session_id=session_id, token_budget=token_budget, limit=limit)
        )

    @endpoint("POST", "/api/memory/ask", AskOut)
    def ask(question: str, limit: int | None = None) -> Parts:
        """An answer about the user with the evidence it drew on."""
        return Parts(body=body(AskRequest, question=question, limit=limit))

    @endpoint("GET", "/api/memory/profile", ProfileOut)
    def get_profile() -> Parts:
        return Parts()

    @endpoint("PUT", "/api/memory/profile", ProfileOut)
    def update_profile(update: ProfileUpdate | Mapping[str, Any]) -> Parts:
        """Merge the fields given into the profile."""
        return Parts(body=ProfileUpdate.model_validate(update))

    # -- insight --------------------------------------------------------------------------
    @endpoint("GET", "/api/memory/conclusions", ConclusionsOut)
    def list_conclusions(limit: int | None = None, type: ConclusionKind | None = None) -> Parts:
        return Parts(params={"limit": limit, "type": type})

    @endpoint("DELETE", "/api/memory/conclusions/{conclusion_id}", ConclusionDeletedOut)
    def delete_conclusion(conclusion_id: str) -> Parts:
        return Parts({"conclusion_id": conclusion_id})

    @endpoint("POST", "/api/memory/dream", DreamOut)
    def dream() -> Parts:
        """Consolidate recent episodes into conclusions now."""
        return Parts()

    @endpoint("POST", "/api/memory/responses", ResponseIngestOut)
    def ingest_response(
        session_id: str,
        response: str,
        query: str | None = None,
        tool_calls: int | None = None,
        reasoning_steps: int | None = None,
    ) -> Parts:
        """Query-as-Ingest: keep a valuable agent response as an episode."""
        fields = {"query": query, "tool_calls": tool_calls, "reasoning_steps": reasoning_steps}
        return Parts(body=body(ResponseIn, session_id=session_id, response=response, **fields))

    # -- maintenance ----------------------------------------------------------------------
    @endpoint("POST", "/api/memory/maintain", MaintenanceRun)
    def maintain() -> Parts:
        """Queue a lint sweep (202); follow it with :meth:`maintenance_run`."""
        return Parts()

    @endpoint("GET", "/api/memory/maintain/runs/{run_id}", MaintenanceRun)
    def maintenance_run(run_id: str) -> Parts:
        return Parts({"run_id": run_id})

    @endpoint("GET", "/api/memory/maintain/history", MaintenanceHistoryOut)
    def maintenance_history(limit: int | None = None) -> Parts:
        return Parts(params={"limit": limit})

    @endpoint("GET", "/api/memory/maintain/history/{timestamp}", MaintenanceReport)
    def maintenance_report(timestamp: int) -> Parts:
        return Parts({"timestamp": timestamp})

    # -- privacy, import ------------------------------------------------------------------
    @endpoint("POST", "/api/memory/forget", FORGET_RESULT, ForgetResult)
    def forget(kind: ForgetKind | Literal["all"], id: str | None = None) -> Parts:
        """Delete one record (``kind``, ``id``) or, with ``"all"``, everything stored for the user."""
        return Parts(body=body(ForgetRequest, kind=kind, id=id))

    @endpoint("GET", "/api/memory/privacy", PrivacyOut)
    def get_privacy() -> Parts:
        return Parts()

    @endpoint("PUT", "/api/memory/privacy", PrivacyUpdateOut)
    def set_privacy(opt_out: bool, forget_existing: bool | None = None) -> Parts:
        return Parts(body=body(PrivacySettings, opt_out=opt_out, forget_existing=forget_existing))

    @endpoint("GET", "/api/memory/sources", SourcesOut)
    def list_sources() -> Parts:
        """Other AI tools' memories the server can import."""
        return Parts()

    @endpoint("POST", "/api/memory/import", ImportOut)
    def import_sources(sources: Sequence[SourceName] | None = None) -> Parts:
        return Parts(body=body(ImportRequest, sources=None if sources is None else list(sources)))

    # -- entities -------------------------------------------------------------------------
    @endpoint("GET", "/api/entities", EntityPageOut)
    def list_entities(
        q: str | None = None, type: EntityType | None = None, limit: int | None = None, offset: int | None = None
    ) -> Parts:
        return Parts(params={"q": q, "type": type, "limit": limit, "offset": offset})

    @endpoint("GET", "/api/entities/stats", EntityStatsOut)
    def entity_stats() -> Parts:
        return Parts()

    @endpoint("GET", "/api/entities/{entity_id}", EntityEnvelope)
    def get_entity(entity_id: str) -> Parts:
        return Parts({"entity_id": entity_id})

    @endpoint("PUT", "/api/entities/{entity_id}", EntityEnvelope)
    def update_entity(
        entity_id: str,
        name: str | None = None,
        type: EntityType | None = None,
        aliases: Sequence[str] | None = None,
        confidence: float | None = None,
    ) -> Parts:
        fields = {"name": name, "type": type, "aliases": None if aliases is None else list(aliases)}
        return Parts({"entity_id": entity_id}, body=body(EntityUpdate, confidence=confidence, **fields))

    @endpoint("DELETE", "/api/entities/{entity_id}", EntityDeletedOut)
    def delete_entity(entity_id: str) -> Parts:
        return Parts({"entity_id": entity_id})

    @endpoint("POST", "/api/entities/{entity_id}/merge", EntityMergeOut)
    def merge_entity(entity_id: str, duplicate_id: str) -> Parts:
        return Parts({"entity_id": entity_id}, body=body(MergeRequest, duplicate_id=duplicate_id))

    @endpoint("GET", "/api/entities/{entity_id}/episodes", EntityEpisodesOut)
    def entity_episodes(entity_id: str) -> Parts:
        return Parts({"entity_id": entity_id})

    @endpoint("GET", "/api/entities/{entity_id}/conclusions", EntityConclusionsOut)
    def entity_conclusions(entity_id: str, limit: int | None = None) -> Parts:
        return Parts({"entity_id": entity_id}, params={"limit": limit})

    @endpoint("GET", "/api/entities/{entity_id}/relationships", EntityRelationshipsOut)
    def entity_relationships(entity_id: str) -> Parts:
        return Parts({"entity_id": entity_id})


def routes() -> dict[tuple[str, str], str]:
    """(HTTP method, path template) → the client method that calls it."""
    return {(e.method, e.path): name for name, e in vars(Endpoints).items() if isinstance(e, Endpoint)}


# -- transports ---------------------------------------------------------------------------------
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


class _Client(Endpoints):
    def __init__(
        self,
        api_key: str | None,
        user_id: str | None,
        retries: int,
        backoff_s: float,
        max_delay_s: float,
    ) -> None:
        self.user_id = user_id
        self.retries, self.backoff_s, self.max_delay_s = retries, backoff_s, max_delay_s
        self.headers = {"User-Agent": f"agtos-client/{__version__}"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        if user_id:
            self.headers["X-User-Id"] = user_id
        self._owned = True

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


class MemoryClient(_Client):
    """Blocking client. ``http``: an ``httpx.Client`` of your own (e.g. FastAPI's ``TestClient``)."""

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
        http: httpx.Client | None = None,
    ) -> None:
        super().__init__(api_key, user_id, retries, backoff_s, max_delay_s)
        self.http = http or httpx.Client(base_url=base_url, timeout=timeout)
        self._owned = http is None

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


class AsyncMemoryClient(_Client):
    """Asyncio client. ``http``: an ``httpx.AsyncClient`` of your own (e.g. over ``httpx.ASGITransport(app)``)."""

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
        http: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(api_key, user_id, retries, backoff_s, max_delay_s)
        self.http = http or httpx.AsyncClient(base_url=base_url, timeout=timeout)
        self._owned = http is None

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
