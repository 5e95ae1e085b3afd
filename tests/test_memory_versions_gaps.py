"""Mutation gaps of issue 20 (docs/testing.md): behaviours of the turn store and of the memory versions
that no test pinned, each found by a surviving mutant. Real Redis; expected values are literals from the
README and the docstrings (doc ids ``<episode>.t<position>[.c<window>]``, the turn index's RRF weights
1 and 0.5 with k = 60, one MULTI/EXEC per episode's turn list, session journals on a Redis Cluster)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import Role, Turn
from agtos.storage.bm25_index import BM25Index
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.session_journal import IndexedSession, SessionJournal
from agtos.storage.turns import TurnStore
from agtos.storage.vector_index import VectorIndex
from agtos.tasks.verbatim_turns import stored_turns, turn_units
from tests.redis_process import RedisClusterProcesses


def said(i: int, content: str | None = None) -> Turn:
    return Turn(role=Role.user, content=content or f"we talked about topic number {i}", timestamp=1_000 + i)


def test_an_episodes_turn_list_is_replaced_in_one_transaction(
    turn_store: TurnStore, redis_url: str, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """DEL + RPUSH + EXPIRE of the episode's list run inside one MULTI/EXEC (seen by MONITOR): no reader
    sees the list empty, half written or without its TTL; the global users set is written outside it."""
    list_key = f"{key_prefix}:u:{{alice}}:turns:ep-1"
    sentinel = f"{key_prefix}:sentinel"
    turns = stored_turns("alice", "ep-1", "s-1", [said(i) for i in range(2)])
    turn_store.save(turns, [], None)  # a re-save replaces the list: DEL runs on an existing key
    monitor_client = redis.Redis.from_url(redis_url, socket_timeout=10)
    inside: dict[str, bool] = {}  # client -> between its MULTI and EXEC
    writes: list[tuple[str, bool]] = []  # (command, inside a transaction) of the writes to the list
    with monitor_client.monitor() as monitor:
        turn_store.save(turns, [], None)
        raw_redis.get(sentinel)
        while sentinel not in (seen := monitor.next_command())["command"]:
            client, name = f"{seen['client_address']}:{seen['client_port']}", seen["command"].split(" ", 1)[0]
            if name in ("MULTI", "EXEC"):
                inside[client] = name == "MULTI"
            elif (list_key in seen["command"] and name in ("DEL", "RPUSH", "EXPIRE")) or (
                name == "SADD" and key_prefix in seen["command"]
            ):
                writes.append((name, inside.get(client, False)))
    monitor_client.close()
    assert writes == [("DEL", True), ("RPUSH", True), ("EXPIRE", True), ("SADD", False)]
    assert raw_redis.llen(list_key) == 2


def test_a_long_turn_is_indexed_window_by_window(turn_store: TurnStore) -> None:
    """A turn longer than the embedder's window is indexed as several windows, ``<episode>.t<n>`` for
    the first and ``<episode>.t<n>.c<k>`` for the k-th after it; a word only the second window holds
    finds that window, and the lookup gives back the one turn."""
    long_turn = said(1, " ".join(["apple"] * 250 + ["zebra"]))  # 251 tokens and the date and name: 2 windows
    turns = stored_turns("alice", "ep-1", "s-1", [said(0), long_turn])
    units = turn_units(turns)
    assert [(u.position, u.chunk) for u in units] == [(0, 0), (1, 0), (1, 1)]
    turn_store.save(turns, units, None)
    assert sorted(turn_store.bm25.ids("alice")) == ["ep-1.t0", "ep-1.t1", "ep-1.t1.c1"]
    hits = turn_store.search("alice", "zebra", None, "bm25", 5)
    assert [h.id for h in hits] == ["ep-1.t1.c1"]
    (match,) = turn_store.lookup("alice", hits, neighbours=0)
    assert (match.turn.position, match.doc_ids) == (1, ("ep-1.t1.c1",))
    # a shorter re-save drops both windows of the long turn
    turn_store.save(turns[:1], turn_units(turns[:1]), None)
    assert sorted(turn_store.bm25.ids("alice")) == ["ep-1.t0"]


def test_the_turn_index_fuses_bm25_at_half_the_vector_weight(coordinator: MemoryCoordinator) -> None:
    """README (recall on long conversations, (2)): the turn index's RRF weighs BM25 0.5 against the vector
    list's 1, with k = 60; a turn ranked first in both lists scores 1/61 + 0.5/61."""
    turns_store = coordinator.semantic.turns
    embedder = coordinator.semantic.embedder
    turns = stored_turns("alice", "ep-1", "s-1", [said(0, "I adopted a grey cat called Miso")])
    units = turn_units(turns)
    turns_store.save(turns, units, embedder.embed([u.text for u in units]))
    query = "grey cat Miso"
    (hit,) = turns_store.search("alice", query, embedder.embed_one(query), "hybrid", 5)
    assert hit.id == "ep-1.t0" and hit.match_type == "hybrid"
    assert hit.score == pytest.approx(1 / 61 + 0.5 / 61)
    assert turns_store.max_fused_score == pytest.approx(1.5 / 61)


@pytest.fixture
def cluster_connector(cluster: RedisClusterProcesses, tmp_path: Path) -> Iterator[RedisConnector]:
    connector = RedisConnector(cluster.url, tmp_path / "data", 5.0)
    yield connector
    connector.close()


def test_session_journals_work_on_a_redis_cluster(
    cluster: RedisClusterProcesses, cluster_connector: RedisConnector
) -> None:
    """README (scale-out): on a Redis Cluster a user's journal keys share one hash slot and the global
    index of live journals has a slot of its own, so the journal's scripts must not name it (CROSSSLOT):
    turns are appended, listed as live, read back and cleared, and the index follows, for users whose
    keys sit on different masters."""
    journal = SessionJournal(cluster_connector, GlobalKeys("agtos-j"), 3_600)
    users = [f"user{i}" for i in range(6)]
    for user in users:
        assert journal.append(user, "s1", [said(0), said(1)]).length == 2
    assert sum(1 for n in cluster.key_counts() if n) >= 2  # the users' journals sit on several masters
    assert sorted((e.user_id, e.session_id) for e in journal.idle(0)) == [(u, "s1") for u in users]
    assert [t.content for t in journal.turns("user3", "s1")] == [said(0).content, said(1).content]
    assert journal.clear("user3", "s1") == 0
    assert journal.turns("user3", "s1") == []
    left = journal.idle(0)
    assert sorted(e.user_id for e in left) == [u for u in users if u != "user3"]
    assert all(isinstance(e, IndexedSession) for e in left)


def test_turn_hits_are_read_on_a_redis_cluster(cluster_connector: RedisConnector) -> None:
    """On a Redis Cluster the turn store reads each hit's turn with its own command (no script over keys
    of several slots): a keyword search finds the turn and carries the stored turn, with or without its
    neighbours."""
    keys = GlobalKeys("agtos-t")
    store = TurnStore(
        cluster_connector,
        keys,
        VectorIndex(cluster_connector, keys, "turn", 384),
        BM25Index(cluster_connector, keys, "turn"),
        2_592_000,
    )
    said_ = [said(0, "hello there"), said(1, "we adopted a grey cat"), said(2, "lovely")]
    turns = stored_turns("alice", "ep-1", "s-1", said_)
    store.save(turns, turn_units(turns), None)
    (hit,) = store.search("alice", "grey cat", None, "bm25", 1)
    assert hit.id == "ep-1.t1" and hit.payload is not None
    assert json.loads(hit.payload)["content"] == "we adopted a grey cat"
    (match,) = store.lookup("alice", [hit], neighbours=1)
    assert [t.position for t in match.window] == [0, 1, 2]
