"""Tests written for bugs planted in the BM25 tokenizer upgrade of b4b001f (issue 20; docs/testing.md,
"Planted bugs in the code landed on 2026-12-06 (evening)"): the ``upgraded`` set kept only while an
upgrade is under way, stems merged into one term's count, a process that lost its lock stops, and a user
forgotten just before or after an upgrade's batches keeps no key.

Expected terms are the Snowball English stems of the words (snowballstem.org: "incredible" → "incred",
and "incred" → "incr" if stemmed twice; "cooking", "cooked", "cook" → "cook")."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.storage import bm25_index
from agtos.storage.bm25_index import BM25Index
from agtos.storage.keys import GlobalKeys
from agtos.storage.mirror_sync import plan_many
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.users import UserDirectory
from tests.helpers import user
from tests.test_bm25_mirror import connectors  # noqa: F401  (two connections: two API processes)
from tests.test_bm25_stems import CORPUS
from tests.test_bm25_upgrade_races import StallingConnector, store_as_older_version, stored_terms


def test_writes_into_a_current_index_leave_no_upgraded_set(client: TestClient, raw_redis: Any, key_prefix: str) -> None:
    """Planted: the write script's ``was < version`` as ``<=``, so every write into a current index added
    its documents to ``bm25:upgraded`` (the set of an upgrade under way), which then grew for ever."""
    for text in ("User adopted a cat named Miso", "User cooks pasta on Fridays", "User travels to Lisbon"):
        assert client.post("/api/memory/memories", json={"text": text}, headers=user("una")).status_code == 201
    listed = client.get("/api/memory/memories", headers=user("una")).json()["memories"]
    assert len(listed) == 3
    found = client.get("/api/memory/search", params={"q": "cooking pasta"}, headers=user("una"))
    assert found.status_code == 200
    assert [k for k in raw_redis.scan_iter(match=f"{key_prefix}:*:bm25:upgraded", count=1_000)] == []


def test_an_older_documents_terms_that_stem_alike_add_up(
    settings: Settings,
    connectors: tuple[RedisConnector, RedisConnector],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Planted in ``upgraded_terms``: ``out[stem] = tf`` for ``+=``, so "cooking", "cooked" and "cook" of
    one document (three version-1 terms) became "cook" once, not three times."""
    keys = GlobalKeys(settings.key_prefix)
    corpus = {"a": "Cooking pasta, cooked rice, cook books", "b": "Books about rice"}
    store_as_older_version(connectors[0], keys, "uri", corpus, monkeypatch)
    index = BM25Index(connectors[1], keys, "turn")
    assert [d for d, _ in index.search("uri", "cook", 2)] == ["a"]
    assert stored_terms(index, "uri") == {
        "a": {"cook": 3, "pasta": 1, "rice": 1, "book": 1},
        "b": {"book": 1, "rice": 1},
    }
    lengths = connectors[0].run(lambda r: r.hgetall(index._key("uri", "len")))
    assert lengths == {b"a": b"6", b"b": b"2"}


#: a stored value over 64 bytes (Redis's hash-max-listpack-value) makes the hash a hashtable, which HSCAN
#: pages as asked (a listpack comes whole in one reply)
MANY = {f"d{i}": f"An incredible view, number {i:050d}" for i in range(100)}


def test_an_upgrader_that_lost_its_lock_stops_before_reading_stemmed_terms(
    settings: Settings,
    connectors: tuple[RedisConnector, RedisConnector],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Planted in ``_upgrade_batch``: the lock's renewal answer ignored, so a process whose lock expired
    (and another took it, upgraded everything and finished) went on: the pages it read after that hold
    current terms, no longer in ``upgraded`` (the end clears it), and it stemmed them again ("incr").
    The first process reads its later HSCAN pages after the other's upgrade."""
    keys = GlobalKeys(settings.key_prefix)
    store_as_older_version(connectors[0], keys, "vic", MANY, monkeypatch)
    second = BM25Index(connectors[1], keys, "turn")
    monkeypatch.setattr(bm25_index, "WRITE_BATCH", 10)
    seen: list[tuple[str, float]] = []  # the other process's search, which upgrades everything
    stalling = StallingConnector(
        str(settings.redis_url),
        settings.data_dir,
        second._key("vic", "meta"),
        second._key("vic", "upgrade"),
        lambda: seen.extend(second.search("vic", "incredible", 5)),
    )
    try:
        first = BM25Index(stalling, keys, "turn")
        first.search("vic", "harbour", 3)
        assert stalling.stalled and len(seen) == 5
    finally:
        stalling.close()
    want = {f"d{i}": {"incred": 1, "view": 1, "number": 1, f"{i:050d}": 1} for i in range(100)}
    assert stored_terms(second, "vic") == want


def forgotten_at(monkeypatch: pytest.MonkeyPatch, connector: RedisConnector, keys: GlobalKeys, where: str) -> None:
    """Forget-all of vic once: ``before`` the upgrade takes its lock (after it found the index older) or
    ``after`` its last batch (before it records the upgrade done)."""
    original = getattr(BM25Index, "_upgrade_locked" if where == "before" else "_upgrade_batch")

    def forget() -> None:
        UserDirectory(connector, keys).delete_all("vic")

    def before(self: BM25Index, user_id: str) -> Any:
        forget()
        return original(self, user_id)

    def after(self: BM25Index, *args: Any) -> Any:
        done = original(self, *args)
        forget()
        return done

    monkeypatch.setattr(BM25Index, original.__name__, before if where == "before" else after)


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_user_forgotten_around_the_upgrades_batches_keeps_no_key(
    where: str,
    settings: Settings,
    connectors: tuple[RedisConnector, RedisConnector],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Planted: the begin script's ``HLEN > 0`` as ``>= 0`` (an index emptied meanwhile given an epoch:
    its ``meta`` re-created), and the end script's epoch check dropped (``tok`` written into the
    ``meta`` of a user forgotten after the last batch). Either leaves a key of a forgotten user."""
    keys = GlobalKeys(settings.key_prefix)
    store_as_older_version(connectors[0], keys, "vic", {"a": "An incredible view"}, monkeypatch)
    forgotten_at(monkeypatch, connectors[0], keys, where)
    index = BM25Index(connectors[1], keys, "turn")
    index.search("vic", "view", 3)
    pattern = keys.user("vic").all_pattern()
    assert connectors[0].run(lambda r: list(r.scan_iter(match=pattern, count=1_000))) == []


def test_a_mirror_synced_with_a_plan_made_before_its_upgrade_reads_the_upgraded_terms(
    settings: Settings,
    connectors: tuple[RedisConnector, RedisConnector],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Planted in ``BM25Index.synced``: the version check's plan (made for all of a search's indexes in
    one round trip, before this call upgraded the terms) kept, so the mirror read the older terms as
    fresh. A process loads the older index while another holds the upgrade lock, that one goes away
    without upgrading, and the next search (plan first, as ``semantic_store.sync_with_reads``) upgrades."""
    keys = GlobalKeys(settings.key_prefix)
    store_as_older_version(connectors[0], keys, "wes", CORPUS, monkeypatch)
    index = BM25Index(connectors[1], keys, "turn")
    lock = index._key("wes", "upgrade")
    connectors[0].run(lambda r: r.set(lock, "another process", px=10_000))
    assert index.search("wes", "cooked", 3) == []  # "cooking" as the older tokenizer stored it
    connectors[0].run(lambda r: r.delete(lock))  # it went away before it was done
    check = index.sync_check("wes")
    assert check is not None
    (plan,) = plan_many(connectors[1], [check])
    mirror = index.synced("wes", plan)
    assert [d for d, _ in index.search("wes", "cooked", 3, synced=mirror)] == ["cook"]
