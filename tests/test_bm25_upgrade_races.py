"""The BM25 tokenizer upgrade (issue 14) against what other processes do meanwhile: a document
deleted or written again between the upgrade's read and its write is not restored or reverted, a
user forgotten mid-upgrade ends with no keys at all, and a second upgrader that takes over an expired
lock leaves every term stemmed once (stems are not stable under stemming again: "incredible" →
"incred" → "incr").

Expected terms are the Snowball English stems of the words (snowballstem.org); expected scores come
from bm25s (tests.helpers.bm25_oracle) over the texts' current terms."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agtos.config import Settings
from agtos.storage import bm25_index
from agtos.storage.bm25_index import BM25Index
from agtos.storage.bm25_mirror import decode_terms
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.users import UserDirectory
from agtos.tasks import bm25
from tests.helpers import bm25_oracle
from tests.test_bm25_mirror import connectors  # noqa: F401  (two connections: two API processes)
from tests.test_bm25_stems import CORPUS, plural_folding_only


def store_as_older_version(
    connector: RedisConnector, keys: GlobalKeys, user: str, corpus: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``corpus`` in ``user``'s index as a process of the older tokenizer stored it (no version recorded)."""
    index = BM25Index(connector, keys, "turn")
    with monkeypatch.context() as patched:
        patched.setattr(bm25, "tokenize", plural_folding_only)
        patched.setattr(bm25, "TOKENIZER_VERSION", 1)
        index.add_many(user, list(corpus.items()))
    index.connector.run(lambda r: r.hdel(index._key(user, "meta"), "tok"))


def stored_terms(index: BM25Index, user: str) -> dict[str, dict[str, int]]:
    return {d: decode_terms(raw) for d, raw in index.connector.scan_hash(index._key(user, "terms"))}


def between_read_and_write(monkeypatch: pytest.MonkeyPatch, action: Callable[[], None]) -> None:
    """Run ``action`` once, after the upgrade has read the first document's terms and before it writes
    them (``upgraded_terms`` converts each document read)."""
    convert, done = bm25_index.upgraded_terms, [False]

    def hooked(terms: dict[str, int], version: int) -> dict[str, int]:
        if not done[0]:
            done[0] = True
            action()
        return convert(terms, version)

    monkeypatch.setattr(bm25_index, "upgraded_terms", hooked)


@pytest.fixture
def keys(
    settings: Settings,
    connectors: tuple[RedisConnector, RedisConnector],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> GlobalKeys:
    """``CORPUS`` in ana's turn index as the older tokenizer stored it."""
    keys = GlobalKeys(settings.key_prefix)
    store_as_older_version(connectors[0], keys, "ana", CORPUS, monkeypatch)
    return keys


def test_a_document_deleted_or_rewritten_during_the_upgrade_is_not_restored_or_reverted(
    keys: GlobalKeys,
    connectors: tuple[RedisConnector, RedisConnector],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    other = BM25Index(connectors[0], keys, "turn")  # another API process
    monkeypatch.setattr(bm25_index, "UPGRADE_LOCK_MS", 300)  # how long a write may wait for the lock

    def meanwhile() -> None:
        assert other.remove("ana", "dog")  # the memory deleted (or the episode forgotten)
        other.add("ana", "cook", "We baked sourdough bread")  # the record's text changed

    between_read_and_write(monkeypatch, meanwhile)
    upgrader = BM25Index(connectors[1], keys, "turn")
    assert [d for d, _ in upgrader.search("ana", "baked bread", 3)] == ["cook"]

    assert stored_terms(other, "ana") == {
        "cook": {"bake": 1, "sourdough": 1, "bread": 1},
        "trip": {"travel": 1, "lisbon": 1, "sister": 1},
        "job": {"incred": 1, "new": 1, "order": 1, "4521": 1, "gpt-4": 1, "licenc": 1},
        "city": {"citi": 1, "cheap": 1, "flight": 1},
    }
    postings = [other._key("ana", f"t:{term}") for term in ("adopt", "puppi", "shelter")]
    assert connectors[0].run(lambda r: r.exists(*postings)) == 0  # the deleted document's postings stay gone
    assert connectors[0].run(lambda r: r.hget(other._key("ana", "meta"), "tok")) == b"5"
    corpus = {**{d: t for d, t in CORPUS.items() if d != "dog"}, "cook": "We baked sourdough bread"}
    want = bm25_oracle({d: bm25.tokenize(t) for d, t in corpus.items()}, ["bread", "lisbon", "cheap", "4521"], 4)
    from_redis = BM25Index(connectors[0], keys, "turn", max_postings=100_000, mirror=False)
    for searcher in (from_redis, BM25Index(connectors[0], keys, "turn"), upgrader):
        assert searcher.search("ana", "adoption puppies shelter", 3) == []
        assert searcher.search("ana", "cooking pie afternoon", 3) == []
        got = searcher.search("ana", "bread lisbon cheap 4521", 4)
        assert [d for d, _ in got] == [d for d, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9)


def test_a_user_forgotten_during_the_upgrade_ends_with_no_keys(
    keys: GlobalKeys,
    connectors: tuple[RedisConnector, RedisConnector],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def forget_all() -> None:
        UserDirectory(connectors[0], keys).delete_all("ana")

    between_read_and_write(monkeypatch, forget_all)
    upgrader = BM25Index(connectors[1], keys, "turn")
    assert upgrader.search("ana", "pie", 3) == []
    pattern = keys.user("ana").all_pattern()
    assert connectors[0].run(lambda r: list(r.scan_iter(match=pattern, count=1_000))) == []
    assert BM25Index(connectors[0], keys, "turn", mirror=False).search("ana", "cheap flights", 3) == []


def test_a_document_written_while_another_process_upgrades_is_stemmed_once_and_the_rest_upgraded(
    keys: GlobalKeys,
    connectors: tuple[RedisConnector, RedisConnector],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A write does not wait for the upgrade: what it writes is current, and neither the upgrader that
    reads it later (here: one that takes over after the first went away) nor the write's own version
    record may change that, or leave the other documents unconverted."""
    monkeypatch.setattr(bm25_index, "UPGRADE_LOCK_MS", 300)  # how long a write may wait for the lock
    writer = BM25Index(connectors[0], keys, "turn")
    lock = writer._key("ana", "upgrade")
    connectors[0].run(lambda r: r.set(lock, "another process", px=10_000))
    writer.add("ana", "story", "An incredible story")
    connectors[0].run(lambda r: r.delete(lock))  # it went away before it was done
    upgrader = BM25Index(connectors[1], keys, "turn")
    assert [d for d, _ in upgrader.search("ana", "cooked", 3)] == ["cook"]
    assert [d for d, _ in upgrader.search("ana", "incredible", 3)] == ["story", "job"]
    terms = stored_terms(upgrader, "ana")
    assert terms["story"] == {"incred": 1, "stori": 1}
    assert terms["job"] == {"incred": 1, "new": 1, "order": 1, "4521": 1, "gpt-4": 1, "licenc": 1}


UNSTABLE = {  # each text has a word whose stem stems again to another term
    "a": "An incredible view of the harbour",
    "b": "Her responsiveness at work",
    "c": "The tax is divisible by four",
    "d": "A reversible jacket",
    "e": "Incredible pasta in Naples",
    "f": "Reversible decisions",
}


class StallingConnector(RedisConnector):
    """A process that stalls once, after its upgrade wrote its first batch: its lock expires and
    ``stall`` runs (another process) before it goes on."""

    def __init__(self, url: str, data_dir: Any, meta: str, lock: str, stall: Callable[[], None]) -> None:
        super().__init__(url, data_dir)
        self.meta, self.lock, self.stall, self.stalled = meta, lock, stall, False
        self.version: Any = None

    def run(self, fn: Callable[[Any], Any]) -> Any:
        if not self.stalled:
            version = super().run(lambda r: r.hget(self.meta, "ver"))
            if self.version is None:
                self.version = version
            elif version != self.version:  # a batch was written
                self.stalled = True
                super().run(lambda r: r.delete(self.lock))  # its lock expired
                self.stall()
        return super().run(fn)


def test_a_second_upgrader_after_an_expired_lock_leaves_every_term_stemmed_once(
    keys: GlobalKeys,
    settings: Settings,
    connectors: tuple[RedisConnector, RedisConnector],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store_as_older_version(connectors[0], keys, "ben", UNSTABLE, monkeypatch)
    second = BM25Index(connectors[1], keys, "turn")
    monkeypatch.setattr(bm25_index, "WRITE_BATCH", 2)  # 3 batches
    seen: list[list[str]] = []
    stalling = StallingConnector(
        str(settings.redis_url),
        settings.data_dir,
        second._key("ben", "meta"),
        second._key("ben", "upgrade"),
        lambda: seen.append([d for d, _ in second.search("ben", "incredible", 5)]),
    )
    try:
        first = BM25Index(stalling, keys, "turn")
        first.search("ben", "harbour", 3)
        assert stalling.stalled
        assert sorted(seen[0]) == ["a", "e"]  # the second process upgraded what the first had left
        assert [d for d, _ in first.search("ben", "incredible", 5)] == [
            d for d, _ in second.search("ben", "incredible", 5)
        ]
    finally:
        stalling.close()
    assert stored_terms(second, "ben") == {
        "a": {"incred": 1, "view": 1, "harbour": 1},
        "b": {"respons": 1, "work": 1},
        "c": {"tax": 1, "divis": 1, "four": 1},
        "d": {"revers": 1, "jacket": 1},
        "e": {"incred": 1, "pasta": 1, "napl": 1},
        "f": {"revers": 1, "decis": 1},
    }
    meta = connectors[0].run(lambda r: r.hgetall(second._key("ben", "meta")))
    assert meta[b"tok"] == b"5"
    assert connectors[0].run(lambda r: r.exists(second._key("ben", "upgraded"))) == 0
