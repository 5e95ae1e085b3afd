"""Redis round trips of a search and of a context through the HTTP routes (issue 15, reads under load).

Under load a request thread waits for each Redis reply and then for the GIL again, so the number of
round trips a read makes is what its latency grows with. Counted on the app's own Redis client: each
command sent alone and each pipeline (MULTI/EXEC or not) is one round trip. Expected, per request,
once the index mirrors are loaded:

* search (3): the mirrors' version checks with the user's latest sessions (one MULTI); the records
  of every hit: episodes, turns, and the episodes of the turn hits (one pipeline); the memories of
  the hits' facts (one MGET, to prefer current facts);
* context (4): the user's latest sessions with the profile (one pipeline); the version checks (one
  MULTI); the records of every hit, turns with their neighbours (one pipeline); the memories of the
  hits' facts.

Before these were pipelined: search 7, context 14 (a LINDEX per turn hit and then an LRANGE of its
window again, the speakers' turns read on every call, one MGET per namespace).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastapi.routing
import pytest
import redis
from fastapi.testclient import TestClient

import agtos.serving.auth as auth
import agtos.serving.deps as deps
from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import Turn
from agtos.serving.app import create_app
from agtos.storage.bm25_index import BM25Index
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.semantic_store import LiveRead, SearchResult, live_many
from agtos.storage.turns import TurnStore
from agtos.storage.vector_index import VectorIndex
from agtos.tasks.verbatim_turns import stored_turns, turn_units
from tests.helpers import delete_prefix, end_session, isolation_settings, user
from tests.test_recall_evidence import QUESTION, USER, session_turns

SEARCH_ROUND_TRIPS = 3
CONTEXT_ROUND_TRIPS = 4


class RoundTrips:
    """Wraps a redis-py client: records each command sent alone and each pipeline executed."""

    def __init__(self, client: redis.Redis) -> None:
        self.sent: list[str] = []
        execute_command, pipeline = client.execute_command, client.pipeline

        def counted_command(*args: Any, **options: Any) -> Any:
            self.sent.append(str(args[0]))
            return execute_command(*args, **options)

        def counted_pipeline(*args: Any, **options: Any) -> Any:
            pipe = pipeline(*args, **options)
            execute = pipe.execute

            def counted_execute(*a: Any, **kw: Any) -> Any:
                names = sorted({str(c[0][0]) for c in pipe.command_stack})
                self.sent.append(f"pipeline[{','.join(names)}]x{len(pipe.command_stack)}")
                return execute(*a, **kw)

            pipe.execute = counted_execute  # type: ignore[method-assign]
            return pipe

        client.execute_command = counted_command  # type: ignore[method-assign]
        client.pipeline = counted_pipeline  # type: ignore[method-assign]


@pytest.fixture(scope="module")
def app(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, RoundTrips]]:
    """Five sessions of the two-person chat (session 8's evidence among them), ended inline."""
    prefix = f"agtos-test-{uuid.uuid4().hex[:10]}"
    coordinator = MemoryCoordinator(isolation_settings(redis_url, prefix, Path(tmp_path_factory.mktemp("trips"))))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            for n in (1, 2, 5, 8, 13):
                sid = f"week-{n:02d}"
                ended = end_session(client, USER, sid, session_turns(n))
                assert ended["saved"], ended
            yield client, RoundTrips(coordinator.connector.client)
    finally:
        coordinator.close()
        delete_prefix(redis_url, prefix)


def counted(trips: RoundTrips, call: Any) -> list[str]:
    call()  # the first call loads the index mirrors and the speakers' names
    trips.sent.clear()
    response = call()
    assert response.status_code == 200, response.text
    return list(trips.sent)


@pytest.mark.parametrize("query", [QUESTION, "kitchen cabinets and the contractor"])
def test_a_search_makes_three_redis_round_trips(
    app: tuple[TestClient, RoundTrips], query: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, trips = app
    monkeypatch.setattr(auth, "OFF_CACHE_S", 3600.0)  # "auth is off" is not asked again during the count
    sent = counted(trips, lambda: client.get("/api/memory/search", params={"q": query}, headers=user(USER)))
    assert len(sent) == SEARCH_ROUND_TRIPS, sent


@pytest.mark.parametrize("query", [QUESTION, "kitchen cabinets and the contractor"])
def test_a_context_makes_four_redis_round_trips(
    app: tuple[TestClient, RoundTrips], query: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, trips = app
    monkeypatch.setattr(auth, "OFF_CACHE_S", 3600.0)
    body = {"query": query, "token_budget": 1000}
    sent = counted(trips, lambda: client.post("/api/memory/context", json=body, headers=user(USER)))
    assert len(sent) == CONTEXT_ROUND_TRIPS, sent
    assert not any("LRANGE" in s or "LINDEX" in s for s in sent[-2:]), sent  # turn windows read with the hits


# -- the turn store's reads of hits with their windows (live_many) ----------------------------------


@pytest.fixture
def turns(redis_url: str, key_prefix: str) -> Iterator[TurnStore]:
    connector = RedisConnector(redis_url, None, 5.0)
    keys = GlobalKeys(key_prefix)
    store = TurnStore(connector, keys, VectorIndex(connector, keys, "turn", 4), BM25Index(connector, keys, "turn"), 600)
    said = [
        Turn(role="user", name="Ann", content=f"line number {i}", timestamp=1_700_000_000_000 + i) for i in range(5)
    ]
    kept = stored_turns("alice", "ep-1", "s-1", said)
    store.save(kept, turn_units(kept), None)
    yield store
    connector.close()


def test_hits_read_with_their_window_need_no_second_read_and_gone_ones_are_dropped(turns: TurnStore) -> None:
    """``live_many(window=1)`` reads each turn hit with one neighbour either side (LRANGE of the list,
    whose index is the position) in the same round trip as the other stores' hits; ``lookup`` with
    ``neighbours=1`` then builds each match from that window without a Redis call. A hit past the
    episode's last turn is gone: dropped, like an expired record."""
    ranked = [SearchResult(d, s, "keyword") for d, s in (("ep-1.t4", 0.9), ("ep-1.t0", 0.8), ("ep-1.t7", 0.7))]
    calls: list[object] = []
    real_run = turns.connector.run
    turns.connector.run = lambda op: calls.append(op) or real_run(op)  # type: ignore[method-assign]
    (hits,), _ = live_many("alice", [LiveRead(turns, ranked, 2, window=1)])
    assert [h.id for h in hits] == ["ep-1.t4", "ep-1.t0"] and len(calls) == 1
    assert [json.loads(h.payload or "")["content"] for h in hits] == ["line number 4", "line number 0"]
    matches = turns.lookup("alice", hits, neighbours=1)
    assert len(calls) == 1  # no read beyond live_many's
    assert [[t.position for t in m.window] for m in matches] == [[3, 4], [0, 1]]
    assert [[t.position for t in m.window] for m in turns.lookup("alice", hits, neighbours=2)] == [[2, 3, 4], [0, 1, 2]]
    assert len(calls) == 2  # a wider window than was read: read again
    ranked = [SearchResult("ep-1.t9", 0.9, "keyword"), SearchResult("ep-1.t2", 0.5, "keyword")]
    (hits,), _ = live_many("alice", [LiveRead(turns, ranked, 1, window=1)])
    assert [h.id for h in hits] == ["ep-1.t2"]  # t9 gone: the next page was read
    assert [t.position for t in turns.lookup("alice", hits, neighbours=1)[0].window] == [1, 2, 3]


def test_search_context_and_append_hand_off_to_a_worker_thread_once(
    app: tuple[TestClient, RoundTrips], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each thread hand-off waits for a free worker thread and for the GIL under load: a sync route
    whose response model FastAPI validated again took a second one (the routes return their JSON)."""
    client, _ = app
    monkeypatch.setattr(auth, "OFF_CACHE_S", 3600.0)
    hops: list[str] = []
    real = fastapi.routing.run_in_threadpool

    async def counted(func: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(func, "__name__", repr(func)))
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(fastapi.routing, "run_in_threadpool", counted)
    monkeypatch.setattr(deps, "run_in_threadpool", counted)
    calls = {
        "search": lambda: client.get("/api/memory/search", params={"q": QUESTION}, headers=user(USER)),
        "context": lambda: client.post("/api/memory/context", json={"query": QUESTION}, headers=user(USER)),
        "append": lambda: client.post(
            "/api/memory/sessions/live/turns",
            json={"turns": [{"role": "user", "content": "The bakery opens at seven."}]},
            headers=user(USER),
        ),
    }
    for name, call in calls.items():
        assert call().status_code == 200  # "auth is off" seen
        hops.clear()
        response = call()
        assert response.status_code == 200 and response.headers["content-type"] == "application/json"
        assert len(hops) == 1, (name, hops)
