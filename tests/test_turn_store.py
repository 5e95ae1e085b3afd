"""TurnStore on a real Redis with the bundled embedder: the per-episode list and its TTL, doc ids that
name (episode, position), lookups with neighbours, re-saves, forget and expiry leaving no index entry."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from agtos.memory.coordinator import MemoryCoordinator
from agtos.providers.embeddings import Embedder, build_embedder
from agtos.schemas import Episode, IngestItem, Role, StoredTurn, Turn
from agtos.storage.bm25_index import BM25Index
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.semantic_store import SearchResult
from agtos.storage.turns import TurnStore, parse_turn_doc_id, turn_doc_id
from agtos.storage.vector_index import VectorIndex
from agtos.tasks.text import episode_text
from agtos.tasks.verbatim_turns import stored_turns, turn_units

T0 = 1_683_556_200_000  # 8 May 2023 14:30 UTC
CHAT = [
    ("Caroline", "I went to the LGBTQ support group yesterday"),
    ("Melanie", "That sounds lovely. How did it go?"),
    ("Caroline", "Really moving. I want to adopt kids one day"),
    ("Melanie", "I painted a lake sunrise last week"),
    ("Caroline", "Send me a picture of the painting!"),
]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return build_embedder()


@pytest.fixture
def store(redis_url: str, key_prefix: str, embedder: Embedder) -> Iterator[TurnStore]:
    connector = RedisConnector(redis_url, None, 5.0)
    keys = GlobalKeys(key_prefix)
    vectors = VectorIndex(connector, keys, "turn", embedder.dim)
    yield TurnStore(connector, keys, vectors, BM25Index(connector, keys, "turn"), ttl_seconds=2_592_000)
    connector.close()


def turns_of(episode_id: str, chat: list[tuple[str, str]] = CHAT, user_id: str = "alice") -> list[StoredTurn]:
    said = [
        Turn(role="user" if i % 2 == 0 else "assistant", name=name, content=text, timestamp=T0 + i * 60_000)
        for i, (name, text) in enumerate(chat)
    ]
    return stored_turns(user_id, episode_id, f"s-{episode_id}", said)


def save(store: TurnStore, embedder: Embedder, turns: list[StoredTurn]) -> None:
    units = turn_units(turns)
    store.save(turns, units, embedder.embed([u.text for u in units]))


def indexed_ids(store: TurnStore, user_id: str = "alice") -> set[str]:
    return set(store.vectors.ids(user_id)) | set(store.bm25.ids(user_id))


def test_doc_ids_name_episode_and_position() -> None:
    assert turn_doc_id("ep-1a", 3) == "ep-1a.t3" and turn_doc_id("ep-1a", 3, 2) == "ep-1a.t3.c2"
    assert parse_turn_doc_id("ep-1a.t3") == ("ep-1a", 3)
    assert parse_turn_doc_id("ep.t5.t12.c1") == ("ep.t5", 12)  # an episode id that looks like a doc id
    assert parse_turn_doc_id("mem-1") is None and parse_turn_doc_id("ep-1.tx") is None


def test_turns_are_one_list_per_episode_with_the_episode_ttl(
    store: TurnStore, embedder: Embedder, raw_redis: redis.Redis, key_prefix: str
) -> None:
    save(store, embedder, turns_of("ep-1"))
    key = f"{key_prefix}:u:{{alice}}:turns:ep-1"
    assert raw_redis.type(key) == b"list" and raw_redis.llen(key) == 5
    assert 2_592_000 - 5 <= raw_redis.ttl(key) <= 2_592_000  # 30 days, as the episode
    kept = store.episode_turns("alice", "ep-1")
    assert [(t.position, t.name, t.content, t.timestamp) for t in kept] == [
        (i, name, text, T0 + i * 60_000) for i, (name, text) in enumerate(CHAT)
    ]
    assert kept[0].dates[0].date == "2023-05-07" and kept[3].dates[0].text == "last week"
    assert indexed_ids(store) == {f"ep-1.t{i}" for i in range(5)}
    assert store.episode_turns("bob", "ep-1") == [] and indexed_ids(store, "bob") == set()


def test_a_hit_maps_back_to_its_turn_with_neighbours(store: TurnStore, embedder: Embedder) -> None:
    save(store, embedder, turns_of("ep-1"))
    found = store.search("alice", "adopt kids", embedder.embed_one("adopt kids"), limit=3)
    assert found[0].id == "ep-1.t2"
    (match, *_) = store.lookup("alice", found[:1], neighbours=1)
    assert (match.turn.episode_id, match.turn.session_id, match.turn.position) == ("ep-1", "s-ep-1", 2)
    assert [t.position for t in match.window] == [1, 2, 3] and match.doc_ids == ("ep-1.t2",)
    hits = [
        SearchResult("ep-1.t4", 0.5, "keyword"),
        SearchResult("ep-9.t0", 0.9, "keyword"),  # no such episode: left out
        SearchResult("ep-1.t4.c1", 0.7, "semantic"),  # another window of the same turn: merged
        SearchResult("ep-1.t0", 0.6, "keyword"),
    ]
    matches = store.lookup("alice", hits, neighbours=2)
    assert [(m.turn.position, m.score, m.doc_ids) for m in matches] == [
        (4, 0.7, ("ep-1.t4", "ep-1.t4.c1")),
        (0, 0.6, ("ep-1.t0",)),
    ]
    assert [[t.position for t in m.window] for m in matches] == [[2, 3, 4], [0, 1, 2]]


def test_without_neighbours_a_searched_hit_s_turn_is_not_read_again(store: TurnStore, embedder: Embedder) -> None:
    """A search's hits carry their turn: ``neighbours=0`` builds the match from it (no Redis call);
    a hit without one is still read, and one whose turn is gone is left out."""
    save(store, embedder, turns_of("ep-1"))
    found = store.search("alice", "adopt kids", embedder.embed_one("adopt kids"), limit=2)
    calls: list[object] = []
    real_run = store.connector.run
    store.connector.run = lambda op: calls.append(op) or real_run(op)  # type: ignore[method-assign]
    matches = store.lookup("alice", found, neighbours=0)
    assert calls == []
    assert [(m.turn.position, m.turn.name, m.window) for m in matches][:1] == [(2, "Caroline", [matches[0].turn])]
    bare = [SearchResult("ep-1.t3", 0.4, "keyword"), SearchResult("ep-9.t0", 0.9, "keyword")]
    assert [(m.turn.position, m.turn.content) for m in store.lookup("alice", bare, neighbours=0)] == [
        (3, "I painted a lake sunrise last week")
    ]
    assert len(calls) == 1


def test_a_shorter_resave_drops_the_old_units(store: TurnStore, embedder: Embedder) -> None:
    save(store, embedder, turns_of("ep-1"))
    save(store, embedder, turns_of("ep-1", CHAT[:2]))
    assert indexed_ids(store) == {"ep-1.t0", "ep-1.t1"}
    assert len(store.episode_turns("alice", "ep-1")) == 2


def test_delete_episode_removes_the_list_and_every_index_entry(
    store: TurnStore, embedder: Embedder, raw_redis: redis.Redis, key_prefix: str
) -> None:
    save(store, embedder, turns_of("ep-1"))
    save(store, embedder, turns_of("ep-2", CHAT[:2]))
    assert store.delete_episode("alice", "ep-1") == 5
    assert not raw_redis.exists(f"{key_prefix}:u:{{alice}}:turns:ep-1")
    assert indexed_ids(store) == {"ep-2.t0", "ep-2.t1"}
    assert store.bm25.search("alice", "adopt kids", 10) == []


def test_expired_turns_leave_the_indexes(
    store: TurnStore, embedder: Embedder, raw_redis: redis.Redis, key_prefix: str
) -> None:
    save(store, embedder, turns_of("ep-1"))
    save(store, embedder, turns_of("ep-2", CHAT[:2]))
    raw_redis.pexpire(f"{key_prefix}:u:{{alice}}:turns:ep-1", 1)
    time.sleep(0.05)
    assert [h.id for h in store.search("alice", "adopt kids", None, mode="bm25")] == []  # and dropped on sight
    assert "ep-1.t2" not in indexed_ids(store)
    assert store.prune("alice") == 4  # the other four turns of the expired episode
    assert indexed_ids(store) == {"ep-2.t0", "ep-2.t1"}


def test_turns_are_not_upserted_as_plain_records(store: TurnStore) -> None:
    with pytest.raises(TypeError, match=r"use TurnStore\.save"):
        store.upsert_many("alice", [("ep-1.t0", "text", "{}")], None)


def test_ingested_episode_vectors_and_float16_turn_vectors(
    coordinator: MemoryCoordinator, embedder: Embedder, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """A session's episode gets its vector from its turns and facts (its summary is not embedded
    again) and is what a question about it finds; a ready episode without turns is embedded by its
    text; turn vectors are stored as float16, the others as float32."""
    said = [Turn(role=Role.user, name=n, content=c, timestamp=T0 + i * 60_000) for i, (n, c) in enumerate(CHAT)]
    ready = Episode(id="ep-ready", user_id="alice", session_id="s-ready", summary="Alice repaired her bicycle brakes.")
    coordinator.ingest(
        [IngestItem(user_id="alice", session_id="s-chat", turns=said), IngestItem(user_id="alice", episode=ready)]
    )
    [chat] = [e for e in coordinator.list_episodes("alice") if e.session_id == "s-chat"]
    episodes = coordinator.services.semantic.store("episode").vectors
    stored = episodes.vectors("alice", [chat.id, "ep-ready"])
    [kept] = [e for e in coordinator.list_episodes("alice") if e.id == "ep-ready"]
    assert float(stored["ep-ready"] @ embedder.embed([episode_text(kept)])[0]) > 0.999
    for question, expected in (("adopting children, LGBTQ support group", chat.id), ("bike brakes fixed", "ep-ready")):
        assert episodes.search("alice", embedder.embed([question])[0], limit=1)[0][0] == expected
    lengths = {
        kind: {len(b) for b in raw_redis.hvals(key)}
        for kind in ("turn", "episode")
        for key in raw_redis.keys(f"{key_prefix}:u:{{alice}}:{kind}:*vec:data")
    }
    assert lengths == {"turn": {2 * 384}, "episode": {4 * 384}}


def test_the_turn_list_key_memo_stays_within_its_bound(store: TurnStore, key_prefix: str) -> None:
    """The per-process memo of episode turn-list keys is bounded (65,536 entries), and a key read from it
    is the key layout's own (``{prefix}:u:{<user>}:turns:<id>``, the braces a hash tag)."""
    from agtos.storage import turns

    turns._LIST_KEYS.clear()
    for n in range(65_536):
        store._list_key("alice", f"ep-{n}")
    assert len(turns._LIST_KEYS) == 65_536
    assert store._list_key("alice", "ep-7") == f"{key_prefix}:u:{{alice}}:turns:ep-7"  # from the memo
    assert store._list_key("alice", "ep-over") == f"{key_prefix}:u:{{alice}}:turns:ep-over"
    assert len(turns._LIST_KEYS) <= 65_536
