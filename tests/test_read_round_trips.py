"""Redis round trips of a search and of a context through the HTTP routes (issue 15, reads under load).

Under load a request thread waits for each Redis reply and then for the GIL again, so the number of
round trips a read makes is what its latency grows with. Counted on the app's own Redis client: each
command sent alone and each pipeline (MULTI/EXEC or not) is one round trip. Expected, per request,
once the index mirrors are loaded:

* search (2): the mirrors' version checks (one Lua script) with the user's latest sessions (one pipeline); the records
  of every hit: episodes, turns, the episodes of the turn hits, and the memories of the facts of
  those episodes whose facts this process has seen, with the memories that superseded them (one
  pipeline; the memories to prefer current facts). The hits' facts not seen yet are read after (a
  third round trip: a Lua script reads their memories and the memories that superseded them);
* context (3): the user's latest sessions with the profile (one pipeline); the version checks (one
  Lua script); the records of every hit, turns with their neighbours, and the memories as above (one
  pipeline).

Before these were pipelined: search 7 (8 with a superseded fact), context 14 (a LINDEX per turn
hit and then an LRANGE of its window again, the speakers' turns read on every call, one MGET per
namespace); until 2026-12-05 the memories of the hits' facts were read after the hits (search 3,
context 4), and those that superseded them after that (search 4).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from typing import Any

import fastapi.routing
import pytest
from fastapi.testclient import TestClient

import agtos.serving.auth as auth
import agtos.serving.offload as offload
from agtos.memory import recall
from agtos.schemas import Turn
from agtos.storage.bm25_index import BM25Index
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.semantic_store import LiveRead, SearchResult, SemanticStore, live_and_linked, live_many
from agtos.storage.turns import TurnStore
from agtos.storage.vector_index import VectorIndex
from agtos.tasks.verbatim_turns import stored_turns, turn_units
from benchmarks.round_trips import RoundTrips
from tests.helpers import end_session, isolated_app, user
from tests.redis_process import RedisClusterProcesses
from tests.test_bitemporal import JAN_8_2024, MAR_15_2024, session
from tests.test_recall_evidence import QUESTION, USER, session_turns

SEARCH_ROUND_TRIPS = 2
CONTEXT_ROUND_TRIPS = 3
LEO = "leo"  # a blog on WordPress (January), moved to Ghost (March: the fact superseded), a newsletter (May)
MAY_14_2024 = 1_715_673_600_000  # 2024-05-14 08:00 UTC


@pytest.fixture(scope="module")
def app(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, RoundTrips]]:
    """Five sessions of the two-person chat (session 8's evidence among them), ended inline."""
    with isolated_app(redis_url, tmp_path_factory.mktemp("trips")) as (client, coordinator, _):
        for n in (1, 2, 5, 8, 13):
            sid = f"week-{n:02d}"
            ended = end_session(client, USER, sid, session_turns(n))
            assert ended["saved"], ended
        session(client, LEO, "s-wp", JAN_8_2024, "My food blog runs on WordPress and traffic is flat.")
        session(client, LEO, "s-ghost", MAR_15_2024, "I finally migrated the blog from WordPress to Ghost.")
        said = (
            "Traffic to my food blog doubled after the newsletter.",
            "I send the newsletter every Friday morning.",
        )
        session(client, LEO, "s-news", MAY_14_2024, *said)
        yield client, RoundTrips(coordinator.connector.client)


def counted(trips: RoundTrips, call: Any) -> list[str]:
    call()  # the first call loads the index mirrors and the speakers' names
    trips.sent.clear()
    response = call()
    assert response.status_code == 200, response.text
    return list(trips.sent)


def shown(response: Any) -> list[tuple[Any, ...]]:
    """What a search answered: session, score, match type and highlights of each hit."""
    assert response.status_code == 200, response.text
    hits = response.json()["results"]
    return [(h["sessionId"], h["score"], h["matchType"], json.dumps(h["highlights"])) for h in hits]


# a question in the present tense: one in the past ("did") reads no facts (recall.asks_what_happened)
@pytest.mark.parametrize(
    "query", ["Which city is the bakery of Jon's sister in?", "kitchen cabinets and the contractor"]
)
def test_a_search_makes_two_redis_round_trips_once_its_hits_facts_are_known(
    app: tuple[TestClient, RoundTrips], query: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three in a process that has not seen the hits' facts (or saw other facts for those
    episodes): their memories are read after the hits; the answer is the same."""
    client, trips = app
    monkeypatch.setattr(auth, "OFF_CACHE_S", 3600.0)  # "auth is off" is not asked again during the count

    def search() -> Any:
        return client.get("/api/memory/search", params={"q": query}, headers=user(USER))

    sent = counted(trips, search)
    assert len(sent) == SEARCH_ROUND_TRIPS, sent
    warm = shown(search())
    recall._FACT_MEMORIES.clear()  # a fresh process
    trips.sent.clear()
    assert shown(search()) == warm and len(trips.sent) == SEARCH_ROUND_TRIPS + 1, trips.sent
    assert trips.sent[-1] == "EVALSHA"
    for key in list(recall._FACT_MEMORIES):  # facts seen for these episodes that they no longer hold
        recall._FACT_MEMORIES[key] = ("mem-0000000000000000",)
    trips.sent.clear()
    assert shown(search()) == warm and len(trips.sent) == SEARCH_ROUND_TRIPS + 1, trips.sent
    trips.sent.clear()
    assert shown(search()) == warm and len(trips.sent) == SEARCH_ROUND_TRIPS, trips.sent


def test_a_hit_whose_fact_a_session_not_listed_superseded_costs_no_extra_round_trip(
    app: tuple[TestClient, RoundTrips], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The WordPress session's fact was superseded by the Ghost session's, which is not among the two
    hits: the superseding memory is read with the hits' facts' memories, not in a round trip after.
    With all three sessions listed, the WordPress one goes below the Ghost one, as without the reads
    made early (``tests/test_bitemporal.py``)."""
    client, trips = app
    monkeypatch.setattr(auth, "OFF_CACHE_S", 3600.0)
    memories = client.get("/api/memory/memories", params={"limit": 100}, headers=user(LEO)).json()["memories"]
    (wordpress,) = [m for m in memories if "WordPress and traffic" in m["text"]]
    (ghost,) = [m for m in memories if "to Ghost" in m["text"]]
    assert wordpress["supersededBy"] == ghost["id"]

    def search(q: str, limit: int) -> Any:
        return client.get("/api/memory/search", params={"q": q, "limit": limit}, headers=user(LEO))

    recall._FACT_MEMORIES.clear()
    traffic = "Is the traffic of my food blog flat?"
    assert [h[0] for h in shown(search(traffic, 2))] == ["s-news", "s-wp"]
    sent = counted(trips, lambda: search(traffic, 2))
    assert len(sent) == SEARCH_ROUND_TRIPS, sent
    platform = "Which blogging platform is my site on?"
    for _ in range(2):  # the facts' memories read after the hits, then with them
        trips.sent.clear()
        assert [h[0] for h in shown(search(platform, 10))] == ["s-ghost", "s-wp", "s-news"]
    assert len(trips.sent) == SEARCH_ROUND_TRIPS, trips.sent


def test_a_search_reads_the_memories_prefetch_names_with_its_hits(app: tuple[TestClient, RoundTrips]) -> None:
    """``search_many(prefetch=...)`` gives ``prefetch`` the ids of the episodes whose records it reads
    (the episode hits' page and the turn hits' episodes) and reads the memories it names, with the
    memories that superseded them, in the hits' round trip."""
    client, trips = app
    semantic = client.app.state.coordinator.semantic  # type: ignore[attr-defined]
    memories = client.get("/api/memory/memories", params={"limit": 100}, headers=user(LEO)).json()["memories"]
    by_text = {m["text"]: m["id"] for m in memories}
    wordpress, ghost = (
        by_text["The user's food blog runs on WordPress and traffic is flat"],
        by_text["User finally migrated the blog from WordPress to Ghost"],
    )
    given: list[list[str]] = []

    def prefetch(episode_ids: list[str]) -> list[str]:
        given.append(episode_ids)
        return [wordpress, "mem-0000000000000000", wordpress]

    limits = {"episode": 1, "turn": 10}
    semantic.search_many(LEO, "food blog traffic", limits, "bm25", turn_episodes=True)  # mirrors loaded
    trips.sent.clear()
    found = semantic.search_many(LEO, "food blog traffic", limits, "bm25", turn_episodes=True, prefetch=prefetch)
    assert len(trips.sent) == 2, trips.sent  # the version checks, the records
    episodes = found["episode"]
    (hit,) = episodes.results
    assert episodes.related and given == [[hit.id, *episodes.related]]
    assert {i: json.loads(raw)["text"] for i, raw in episodes.memories.items()} == {
        wordpress: "The user's food blog runs on WordPress and traffic is flat",
        ghost: "User finally migrated the blog from WordPress to Ghost",
    }
    assert found["turn"].memories == {}
    with_prefetch = trips.sent[-1]
    trips.sent.clear()
    plain = semantic.search_many(LEO, "food blog traffic", limits, "bm25", turn_episodes=True)
    assert plain["episode"].memories == {} and plain["episode"].results == episodes.results
    assert with_prefetch == trips.sent[-1].replace("x3", "x4"), (with_prefetch, trips.sent)  # one command more


@pytest.mark.parametrize("query", [QUESTION, "kitchen cabinets and the contractor"])
def test_a_context_makes_three_redis_round_trips(
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


def counted_submit(submit: Callable[..., Any], hop: str, hops: list[str], func: Any, *args: Any, **kwargs: Any) -> Any:
    """An executor's ``submit`` that records ``hop`` first."""
    hops.append(hop)
    return submit(func, *args, **kwargs)


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
    for pool, hop in ((offload.EXECUTOR, "in_thread"), (offload.READS, "in_read_thread")):
        # the hot routes' own hand-off, and the cheap reads' and the key check's (agtos.serving.offload)
        monkeypatch.setattr(pool, "submit", functools.partial(counted_submit, pool.submit, hop, hops))
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


# -- records read with the records they link to (get_linked): one round trip -------------------------

#: memory id -> its ``superseded_by`` as stored (None: current)
LINKS = {
    "m-a": "m-b",  # linked to a record asked for and found: not read again
    "m-b": None,
    "m-c": "m-d",  # linked to a record not asked for: read
    "m-d": None,
    "m-e": "m-gone",  # linked to a record that is not there
    "m-f": "m-d",  # linked to one already linked: listed once
    "m-g": "m-x",  # linked to a record asked for but not found: read (still not there)
    "m-h": "bad:id",  # not a record id: not read (a key of that name exists)
    "m-i": "",
}
ASKED = ["m-x", "m-c", "m-a", "m-b", "m-e", "m-f", "m-g", "m-h", "m-i", "m-hash", "m-c"]


def linked_store(connector: RedisConnector, prefix: str) -> SemanticStore:
    """A memory store holding :data:`LINKS`, a record named ``bad:id`` and a hash at ``m-hash``'s key."""
    keys = GlobalKeys(prefix)
    store = SemanticStore(
        connector, keys, "memory", VectorIndex(connector, keys, "memory", 4), BM25Index(connector, keys, "memory")
    )
    store.put_records("alice", {i: json.dumps({"id": i, "superseded_by": s}) for i, s in LINKS.items()})
    base = keys.user("alice").base
    connector.run(lambda r: r.set(f"{base}:memory:bad:id", '{"id": "bad:id"}'))
    connector.run(lambda r: r.hset(f"{base}:memory:m-hash", "id", "m-hash"))
    return store


def check_linked(store: SemanticStore) -> None:
    """Read alone (``get_linked``: EVALSHA) and in a pipeline with other reads (``live_and_linked``: EVAL)."""
    got = store.get_linked("alice", ASKED, "superseded_by")
    assert list(got) == ["m-c", "m-a", "m-b", "m-e", "m-f", "m-g", "m-h", "m-i", "m-d"]  # asked, then linked
    assert {i: json.loads(raw) for i, raw in got.items()} == {i: {"id": i, "superseded_by": LINKS[i]} for i in got}
    linked = (store, list(dict.fromkeys(ASKED)), "superseded_by")
    assert live_and_linked("alice", [], None, linked) == ([], {}, got)
    assert live_and_linked("alice", [], (store, ["m-b", "m-zz"]), linked)[1:] == ({"m-b": got["m-b"]}, got)
    assert list(store.get_linked("alice", ["m-c", "m-a"], "id")) == ["m-c", "m-a"]  # the field asked for
    assert list(store.get_linked("bob", ["m-c"], "superseded_by")) == []  # another user's keys


def test_records_are_read_with_the_records_they_link_to_in_one_round_trip(redis_url: str, key_prefix: str) -> None:
    connector = RedisConnector(redis_url, None, 5.0)
    try:
        store = linked_store(connector, key_prefix)
        check_linked(store)
        trips = RoundTrips(connector.client)
        assert store.get_linked("alice", [], "superseded_by") == {} and trips.sent == []
        assert live_and_linked("alice", [], None, (store, [], "superseded_by")) == ([], {}, {}) and trips.sent == []
        store.get_linked("alice", ASKED, "superseded_by")
        assert trips.sent == ["EVALSHA"]
    finally:
        connector.close()


def test_records_are_read_with_the_records_they_link_to_on_a_redis_cluster(
    cluster: RedisClusterProcesses, key_prefix: str
) -> None:
    """The script reads keys it is not given (the linked records): every key of one user is in one
    slot (hash tag), which a cluster needs."""
    connector = RedisConnector(cluster.url, None, 5.0)
    try:
        check_linked(linked_store(connector, key_prefix))
    finally:
        connector.close()
