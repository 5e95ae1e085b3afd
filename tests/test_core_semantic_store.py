"""SemanticStore on a real Redis with spec literals: record keys, TTLs, delete, the search contract
(README: `hybrid` default, `limit` 10, RRF k = 60 over candidate pools of 4 x limit), expired hits
and a Redis that dies mid-search."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.semantic import SemanticMemory, SemanticSearch
from agtos.storage.bm25_index import BM25Index
from agtos.storage.keys import GlobalKeys
from agtos.storage.mirror_sync import plan_many
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.semantic_store import Ranked, SearchResult, SemanticStore, sync_mirrors
from agtos.storage.vector_index import VectorIndex
from tests.helpers import bm25_oracle, user_key_names
from tests.redis_process import RedisClusterProcesses, RedisProcess

DIM = 4
RANKED = [f"d{i}" for i in range(1, 13)]  # d1 is the closest to QUERY, d12 the farthest
QUERY = np.array([1.0, 0.0, 0.0, 0.0], np.float32)


def ranked_vector(rank: int) -> np.ndarray:
    """Cosine with QUERY strictly decreasing in ``rank`` (1 / sqrt(1 + (rank / 10)²))."""
    return np.array([1.0, rank / 10, 0.0, 0.0], np.float32)


def cosine(rank: int) -> float:
    return 1.0 / math.sqrt(1.0 + (rank / 10) ** 2)


def make_store(connector: RedisConnector, prefix: str, **kw: object) -> SemanticStore:
    keys = GlobalKeys(prefix)
    vectors = VectorIndex(connector, keys, "memory", DIM)
    return SemanticStore(connector, keys, "memory", vectors, BM25Index(connector, keys, "memory"), **kw)  # type: ignore[arg-type]


@pytest.fixture
def connector(settings: Settings) -> Iterator[RedisConnector]:
    conn = RedisConnector(settings.redis_url, settings.data_dir)
    yield conn
    conn.close()


@pytest.fixture
def store(connector: RedisConnector, key_prefix: str) -> SemanticStore:
    return make_store(connector, key_prefix)


def record_key(prefix: str, doc_id: str, user: str = "alice") -> str:
    return f"{prefix}:u:{{{user}}}:memory:{doc_id}"


def put(
    store: SemanticStore, doc_id: str, text: str, vector: np.ndarray | None, user: str = "alice", **kw: Any
) -> None:
    store.upsert(user, doc_id, text, vector, json.dumps({"id": doc_id}), **kw)


def put_ranked(store: SemanticStore, n: int, keyword_ids: tuple[str, ...] = ()) -> None:
    """``d1..dn`` at vector ranks 1..n; only ``keyword_ids`` contain the word "zyxtrel"."""
    for rank in range(1, n + 1):
        doc_id = f"d{rank}"
        put(store, doc_id, "zyxtrel note" if doc_id in keyword_ids else f"plain note {rank}", ranked_vector(rank))


def hits(results: list[SearchResult]) -> list[tuple[str, float, str]]:
    return [(r.id, r.score, r.match_type) for r in results]


# -- writes -------------------------------------------------------------------------------


def test_upsert_key_layout_ttl_and_users_set(store: SemanticStore, raw_redis: redis.Redis, key_prefix: str) -> None:
    put(store, "m1", "zyxtrel forever", ranked_vector(1))
    put(store, "m2", "zyxtrel for a second", ranked_vector(2), ttl_seconds=1)
    assert json.loads(raw_redis.get(record_key(key_prefix, "m1"))) == {"id": "m1"}
    assert raw_redis.ttl(record_key(key_prefix, "m1")) == -1  # memories are kept until deleted
    assert 0 < raw_redis.pttl(record_key(key_prefix, "m2")) <= 1_000  # 1 s is a valid TTL
    assert raw_redis.smembers(f"{key_prefix}:users") == {b"alice"}
    for bad in (0, -5):
        with pytest.raises(ValueError, match=r"^ttl_seconds must be positive$"):
            put(store, "m3", "never stored", ranked_vector(3), ttl_seconds=bad)
    assert raw_redis.exists(record_key(key_prefix, "m3")) == 0
    assert store.vectors.count("alice") == 2 and store.bm25.count("alice") == 2


def test_upsert_many_stores_records_with_ttl_and_indexes_both(
    store: SemanticStore, raw_redis: redis.Redis, key_prefix: str
) -> None:
    store.upsert_many("alice", [], None)
    assert not list(raw_redis.scan_iter(match=f"{key_prefix}:*"))  # nothing written, not even the users set
    docs = [(f"d{r}", f"zyxtrel note {r}", json.dumps({"id": f"d{r}"})) for r in (1, 2, 3)]
    store.upsert_many("alice", docs, np.stack([ranked_vector(r) for r in (1, 2, 3)]), ttl_seconds=600)
    for r in (1, 2, 3):
        assert 595 <= raw_redis.ttl(record_key(key_prefix, f"d{r}")) <= 600
    assert raw_redis.smembers(f"{key_prefix}:users") == {b"alice"}
    assert store.vectors.count("alice") == 3 and store.bm25.count("alice") == 3
    assert [r.id for r in store.search("alice", "", QUERY, mode="vector")] == ["d1", "d2", "d3"]
    assert [r.id for r in store.search("alice", "zyxtrel", None, mode="bm25")] == ["d1", "d2", "d3"]  # the texts

    store.upsert_many("bob", docs[:2], None)  # no embedder: text only, kept until deleted
    assert raw_redis.ttl(record_key(key_prefix, "d1", "bob")) == -1
    assert store.vectors.count("bob") == 0 and store.bm25.count("bob") == 2
    assert raw_redis.smembers(f"{key_prefix}:users") == {b"alice", b"bob"}


def test_index_many_without_vectors_indexes_text_only(store: SemanticStore) -> None:
    store.index_many("alice", ["e1", "e2"], ["zyxtrel one", "zyxtrel two"], None)
    assert store.vectors.count("alice") == 0 and store.bm25.count("alice") == 2
    store.index_many("alice", ["e1"], ["zyxtrel one"], np.stack([ranked_vector(1)]))
    assert store.vectors.count("alice") == 1 and store.bm25.count("alice") == 2
    with pytest.raises(ValueError):  # one text short: nothing is indexed under a wrong id
        store.index_many("bob", ["e1", "e2"], ["zyxtrel one"], None)
    assert store.bm25.count("bob") == 0


@pytest.mark.parametrize("wrong", ["vectors", "bm25"])
def test_both_indexes_must_be_of_the_store_namespace(connector: RedisConnector, key_prefix: str, wrong: str) -> None:
    keys = GlobalKeys(key_prefix)
    vectors = VectorIndex(connector, keys, "episode" if wrong == "vectors" else "memory", DIM)
    bm25 = BM25Index(connector, keys, "episode" if wrong == "bm25" else "memory")
    with pytest.raises(ValueError, match=r"^both indexes must use the namespace 'memory'$"):
        SemanticStore(connector, keys, "memory", vectors, bm25)


# -- delete -------------------------------------------------------------------------------


def test_delete_removes_the_record_and_both_index_entries(
    store: SemanticStore, raw_redis: redis.Redis, key_prefix: str
) -> None:
    put(store, "m1", "zyxtrel", ranked_vector(1))
    assert store.delete("alice", "m1") is True
    assert raw_redis.exists(record_key(key_prefix, "m1")) == 0
    assert store.vectors.count("alice") == 0 and store.bm25.count("alice") == 0
    assert store.delete("alice", "m1") is False


def test_delete_of_a_record_never_indexed_still_reports_it(
    store: SemanticStore, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """A record written but not indexed (a crash between the two writes) is deleted and reported."""
    put(store, "other", "zyxtrel", ranked_vector(1))  # the user has indexes, just not for m1
    raw_redis.set(record_key(key_prefix, "m1"), json.dumps({"id": "m1"}))
    assert store.delete("alice", "m1") is True
    assert raw_redis.exists(record_key(key_prefix, "m1")) == 0


@pytest.mark.parametrize("index", ["vectors", "bm25"])
def test_delete_cleans_an_index_entry_whose_record_is_gone(store: SemanticStore, index: str) -> None:
    """The record expired and only one index holds the id: delete still removes it (and says so)."""
    if index == "vectors":
        store.vectors.add("alice", "m1", ranked_vector(1))
    else:
        store.bm25.add("alice", "m1", "zyxtrel")
    assert store.delete("alice", "m1") is True
    assert store.vectors.count("alice") == 0 and store.bm25.count("alice") == 0
    assert store.delete("alice", "m1") is False


def test_delete_for_a_user_with_nothing_writes_nothing(
    store: SemanticStore, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """An opted-out (or unknown) user: no record, no index, and no key created by the delete."""
    assert store.delete("carol", "m1") is False
    assert user_key_names(raw_redis, key_prefix, "carol") == set()


# -- search -------------------------------------------------------------------------------


def test_search_defaults_hybrid_limit_10_all_positive_similarities(store: SemanticStore) -> None:
    put_ranked(store, 12, keyword_ids=("d1",))
    put(store, "opposite", "plain opposite", -ranked_vector(1))  # cosine < 0
    default = store.search("alice", "zyxtrel", QUERY)
    assert len(default) == 10  # README: limit 10 by default
    assert (default[0].id, default[0].match_type) == ("d1", "hybrid")  # hybrid is the default mode
    vector = store.search("alice", "", QUERY, mode="vector", limit=20)
    assert [r.id for r in vector] == RANKED  # min_similarity 0 by default: every positive cosine
    assert vector[-1].similarity == pytest.approx(cosine(12), abs=1e-6)


def test_hybrid_scores_are_rrf_k60_over_pools_of_4_x_limit(store: SemanticStore) -> None:
    """limit 2: both pools hold 8 candidates; d8 (vector rank 8) fuses, d9 (rank 9) does not. d8 and d9 have
    the same BM25 score: both take keyword rank 1.5 (issue 14: equal scores share their mean rank)."""
    put_ranked(store, 10, keyword_ids=("d8", "d9"))
    assert hits(store.search("alice", "zyxtrel", QUERY, limit=2)) == [
        ("d8", pytest.approx(1 / 68 + 1 / 61.5), "hybrid"),
        ("d1", pytest.approx(1 / 61), "semantic"),
    ]
    result = {r.id: r for r in store.search("alice", "zyxtrel", QUERY, limit=3)}  # pools of 12: d9 fuses too
    assert result["d9"].match_type == "hybrid" and result["d9"].score == pytest.approx(1 / 69 + 1 / 61.5)
    assert result["d9"].similarity == pytest.approx(cosine(9), abs=1e-6)


@pytest.mark.parametrize("factor", [1, 0])
def test_a_candidate_factor_of_1_or_less_fuses_pools_of_limit(
    connector: RedisConnector, key_prefix: str, factor: int
) -> None:
    """Pools of 1 x limit (0 is raised to 1): d2 (vector rank 2) is fused as a keyword hit only."""
    store = make_store(connector, key_prefix, candidate_factor=factor)
    put_ranked(store, 2, keyword_ids=("d2",))
    assert hits(store.search("alice", "zyxtrel", QUERY, limit=1)) == [("d1", pytest.approx(1 / 61), "semantic")]
    assert hits(store.search("alice", "zyxtrel", QUERY, limit=2)) == [
        ("d2", pytest.approx(1 / 62 + 1 / 61), "hybrid"),
        ("d1", pytest.approx(1 / 61), "semantic"),
    ]


def test_rrf_k_and_weights_given_to_the_store_are_used(connector: RedisConnector, key_prefix: str) -> None:
    store = make_store(connector, key_prefix, rrf_k=10, rrf_weights=(1.0, 0.5))
    put_ranked(store, 3, keyword_ids=("d1", "d3"))  # the same BM25 score: keyword rank 1.5 both
    assert hits(store.search("alice", "zyxtrel", QUERY, limit=3)) == [
        ("d1", pytest.approx(1 / 11 + 0.5 / 11.5), "hybrid"),
        ("d3", pytest.approx(1 / 13 + 0.5 / 11.5), "hybrid"),
        ("d2", pytest.approx(1 / 12), "semantic"),
    ]


def test_bm25_mode_scores_are_okapi_bm25_and_ignore_the_vector(store: SemanticStore) -> None:
    texts = {"k1": "zyxtrel invoices", "k2": "zyxtrel zyxtrel dashboards for hiking", "k3": "grocery list"}
    for doc_id, text in texts.items():
        put(store, doc_id, text, ranked_vector(1))
    oracle = bm25_oracle(
        {"k1": ["zyxtrel", "invoice"], "k2": ["zyxtrel", "zyxtrel", "dashboard", "hiking"], "k3": ["grocery", "list"]},
        ["zyxtrel"],
    )
    expected = [(doc_id, pytest.approx(score), "keyword") for doc_id, score in oracle]
    assert hits(store.search("alice", "zyxtrel", None, mode="bm25", limit=5)) == expected
    # a query vector the index cannot use (zero) does not matter to a keyword search
    assert hits(store.search("alice", "zyxtrel", np.zeros(DIM, np.float32), mode="bm25", limit=5)) == expected
    assert hits(store.search("alice", "zyxtrel", None, mode="bm25", limit=1)) == expected[:1]


def test_rank_makes_a_search_result_only_for_the_candidates_taken(store: SemanticStore) -> None:
    """limit 2: pools of 8, d3 also a keyword hit; each candidate taken (by index or slice) is the
    SearchResult of its RRF score, match type and cosine, in fused order; the search is its first page."""
    put_ranked(store, 12, keyword_ids=("d3",))
    ranked = store.rank("alice", "zyxtrel", QUERY, "hybrid", 2)
    assert len(ranked) == 8
    assert isinstance(ranked, Ranked) and all(isinstance(row, tuple) for row in ranked.rows)  # none made yet
    first = ranked[0]
    assert (first.id, first.score, first.match_type) == ("d3", pytest.approx(1 / 63 + 1 / 61), "hybrid")
    assert first.similarity == pytest.approx(cosine(3), abs=1e-6) and first.payload is None
    assert hits(ranked[1:3]) == [("d1", pytest.approx(1 / 61), "semantic"), ("d2", pytest.approx(1 / 62), "semantic")]
    assert [r.id for r in ranked[-2:]] == ["d7", "d8"] and ranked[-1] == ranked[7] == ranked[7:][0]
    assert hits(store.search("alice", "zyxtrel", QUERY, limit=2)) == hits(ranked[:2])
    keyword = store.rank("alice", "zyxtrel", QUERY, "bm25", 2)
    assert len(keyword) == 1 and (keyword[0].id, keyword[0].match_type, keyword[0].similarity) == (
        "d3",
        "keyword",
        None,
    )
    vector = store.rank("alice", "zyxtrel", QUERY, "vector", 1)
    assert [(r.id, r.match_type) for r in vector[:]] == [
        ("d1", "semantic"),
        ("d2", "semantic"),
        ("d3", "semantic"),
        ("d4", "semantic"),
    ]
    assert vector[0].similarity == vector[0].score == pytest.approx(cosine(1), abs=1e-6)
    assert len(store.rank("alice", "zyxtrel", QUERY, "hybrid", 0)) == 0


def test_search_argument_errors_and_limit_0(store: SemanticStore) -> None:
    put_ranked(store, 2, keyword_ids=("d1",))
    with pytest.raises(ValueError, match=r"^unknown search mode 'fuzzy'$"):
        store.search("alice", "zyxtrel", QUERY, mode="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^vector search needs a query vector$"):
        store.search("alice", "zyxtrel", None, mode="vector")
    for mode in ("hybrid", "vector", "bm25"):
        assert store.search("alice", "zyxtrel", QUERY, mode=mode, limit=0) == []
    assert store.search("alice", "zyxtrel", None, mode="vector", limit=0) == []  # nothing asked, nothing checked


def test_a_prepared_vector_shard_is_searched_as_prepared(
    store: SemanticStore, connector: RedisConnector, settings: Settings, key_prefix: str
) -> None:
    """``mirrors`` from ``sync_mirrors``: the version check already done is not redone."""
    put_ranked(store, 2)
    (mirrors,) = sync_mirrors("alice", [store], "vector")
    assert mirrors.bm25 is None and mirrors.vectors is not None  # a vector search reads no BM25 index
    (keyword,) = sync_mirrors("alice", [store], "bm25")
    assert keyword.vectors is None and keyword.bm25 is not None
    other = RedisConnector(settings.redis_url, settings.data_dir)  # another API process writes meanwhile
    put(make_store(other, key_prefix), "d0", "plain", QUERY)
    other.close()
    prepared = store.search("alice", "", QUERY, mode="vector", mirrors=mirrors)
    assert [r.id for r in prepared] == ["d1", "d2"]
    assert [r.id for r in store.search("alice", "", QUERY, mode="vector")] == ["d0", "d1", "d2"]


class CountingConnector(RedisConnector):
    """A connector that counts its Redis calls (each ``run`` is one round trip or one pipeline)."""

    calls = 0

    def run(self, op: Any) -> Any:
        self.calls += 1
        return super().run(op)


def two_namespaces(connector: RedisConnector, prefix: str) -> list[SemanticStore]:
    keys = GlobalKeys(prefix)
    return [
        SemanticStore(connector, keys, ns, VectorIndex(connector, keys, ns, DIM), BM25Index(connector, keys, ns))
        for ns in ("episode", "memory")
    ]


def test_sync_mirrors_checks_every_mirror_in_one_call_and_sees_another_process_s_writes(
    settings: Settings, key_prefix: str
) -> None:
    """Four mirrors (BM25 + vectors of two namespaces) loaded by process A; process B adds to both
    namespaces and deletes from one: A's next search sees all of it, after one version-check call."""
    a = CountingConnector(settings.redis_url, settings.data_dir)
    b = RedisConnector(settings.redis_url, settings.data_dir)
    mine, theirs = two_namespaces(a, key_prefix), two_namespaces(b, key_prefix)
    for store in theirs:
        put(store, "d2", "zyxtrel second", ranked_vector(2))
        put(store, "d3", "zyxtrel third", ranked_vector(3))
    for mirrors, store in zip(sync_mirrors("alice", mine, "hybrid"), mine, strict=True):
        assert [r.id for r in store.search("alice", "zyxtrel", QUERY, mirrors=mirrors)] == ["d2", "d3"]
    for store in theirs:  # another API process writes after A's mirrors are loaded
        put(store, "d1", "zyxtrel first", ranked_vector(1))
    theirs[1].delete("alice", "d3")
    a.calls = 0
    synced = sync_mirrors("alice", mine, "hybrid")
    assert a.calls == 1 + 4  # one version check for the four mirrors, then one re-read of each changed mirror
    a.calls = 0
    assert sync_mirrors("alice", mine, "hybrid") and a.calls == 1  # all fresh: that one check only
    expected = {"episode": ["d1", "d2", "d3"], "memory": ["d1", "d2"]}
    for mirrors, store in zip(synced, mine, strict=True):
        for mode in ("hybrid", "vector", "bm25"):
            found = store.search("alice", "zyxtrel", QUERY, mode=mode, mirrors=mirrors)  # type: ignore[arg-type]
            assert [r.id for r in found] == expected[store.namespace], (store.namespace, mode)
    a.close()
    b.close()


def test_a_plan_made_before_this_process_moved_its_mirror_is_made_again(
    store: SemanticStore, settings: Settings, key_prefix: str
) -> None:
    """A version check whose mirror changed before it was applied (another thread synced or wrote)
    is not applied: the index checks again, so a later write by another process is seen."""
    put_ranked(store, 2)
    store.search("alice", "", QUERY, mode="vector")  # the mirror is loaded
    (check,) = [c for c in [store.vectors.sync_check("alice")] if c is not None]
    (plan,) = plan_many(store.connector, [check])
    assert plan.action == "fresh"
    put(store, "d3", "plain", ranked_vector(3))  # this process's own write moves the mirror on
    other = RedisConnector(settings.redis_url, settings.data_dir)
    put(make_store(other, key_prefix), "d0", "plain", QUERY)  # then another process writes
    other.close()
    assert not plan.fits(check.mirror)
    shard = store.vectors.synced("alice", plan)
    assert [d for d, _ in shard.search(np.asarray(QUERY), 5)] == ["d0", "d1", "d2", "d3"]


def test_upsert_many_works_on_a_redis_cluster(cluster: RedisClusterProcesses, tmp_path: Path) -> None:
    """The records (one user's slot) and the global users set (another slot) are never one transaction."""
    conn = RedisConnector(cluster.url, tmp_path)
    store = make_store(conn, "h7")
    users = [f"user{i}" for i in range(4)]  # slots spread: some differ from the users set's slot
    for user in users:
        docs = [(f"d{r}", f"zyxtrel note {r}", json.dumps({"id": f"d{r}"})) for r in (1, 2)]
        store.upsert_many(user, docs, np.stack([ranked_vector(1), ranked_vector(2)]))
        assert [r.id for r in store.search(user, "zyxtrel", QUERY, limit=5)] == ["d1", "d2"]
    assert conn.client.smembers("h7:users") == {u.encode() for u in users}
    conn.close()


# -- hits whose record is gone ------------------------------------------------------------


def drop_records(raw: redis.Redis, prefix: str, *ranks: int) -> None:
    raw.delete(*(record_key(prefix, f"d{r}") for r in ranks))


def vector_ids(store: SemanticStore, limit: int) -> list[str]:
    return [r.id for r in store.search("alice", "", QUERY, mode="vector", limit=limit)]


def test_a_search_reads_only_limit_records_when_none_expired(
    store: SemanticStore, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """Gone records past the first ``limit`` hits are not read, so they stay indexed until prune."""
    put_ranked(store, 6)
    drop_records(raw_redis, key_prefix, 3, 4)
    assert vector_ids(store, 2) == ["d1", "d2"]
    assert store.vectors.count("alice") == 6
    assert store.prune("alice") == 2
    assert store.vectors.count("alice") == 4


def test_refill_pages_read_twice_the_missing_hits(
    store: SemanticStore, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """limit 3, d1 gone: the second page is d4-d5 (2 x 1 missing), so d6 (gone too) is not seen yet."""
    put_ranked(store, 9)
    drop_records(raw_redis, key_prefix, 1, 6)
    assert vector_ids(store, 3) == ["d2", "d3", "d4"]
    assert store.vectors.count("alice") == 8 and store.bm25.count("alice") == 8


def test_pages_continue_past_runs_of_gone_hits(store: SemanticStore, raw_redis: redis.Redis, key_prefix: str) -> None:
    put_ranked(store, 9)
    drop_records(raw_redis, key_prefix, 1, 4, 5)
    assert vector_ids(store, 3) == ["d2", "d3", "d6"]
    assert store.vectors.count("alice") == 6 and store.bm25.count("alice") == 6


def test_prune_counts_across_batches(store: SemanticStore, raw_redis: redis.Redis, key_prefix: str) -> None:
    put_ranked(store, 5)
    drop_records(raw_redis, key_prefix, 1, 3, 5)
    assert store.prune("alice", batch_size=2) == 3
    assert sorted(store.vectors.ids("alice")) == ["d2", "d4"] and sorted(store.bm25.ids("alice")) == ["d2", "d4"]
    assert store.prune("alice", batch_size=2) == 0


def test_prune_of_a_single_gone_record(store: SemanticStore, raw_redis: redis.Redis, key_prefix: str) -> None:
    put_ranked(store, 1)
    drop_records(raw_redis, key_prefix, 1)
    assert store.prune("alice") == 1
    assert store.vectors.count("alice") == 0 and store.bm25.count("alice") == 0


# -- Redis dies between the reads and the index clean-up ------------------------------------


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    server = RedisProcess(tmp_path / "redis").start()
    yield server
    server.kill()


def die_after_vector_removal(store: SemanticStore, server: RedisProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    """The next clean-up removes the vectors, then Redis dies before the BM25 entries go."""
    remove_vectors = store.vectors.remove_many

    def remove_then_die(user_id: str, ids: list[str]) -> int:
        removed = remove_vectors(user_id, ids)
        server.kill()
        return removed

    monkeypatch.setattr(store.vectors, "remove_many", remove_then_die)


def test_redis_dying_during_the_clean_up_keeps_the_live_hits_and_logs(
    private_redis: RedisProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    conn = RedisConnector(private_redis.url, tmp_path, timeout_s=0.2)
    store = make_store(conn, "h7")
    put_ranked(store, 4)
    redis.Redis.from_url(private_redis.url).delete(record_key("h7", "d1"), record_key("h7", "d3"))
    die_after_vector_removal(store, private_redis, monkeypatch)
    with caplog.at_level(logging.WARNING, logger="agtos.storage.semantic_store"):
        assert vector_ids(store, 2) == ["d2", "d4"]
    assert [r.getMessage() for r in caplog.records] == ["could not drop 2 expired memory ids from the indexes"]
    conn.close()


def test_redis_dying_during_prune_reports_nothing_removed(
    private_redis: RedisProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = RedisConnector(private_redis.url, tmp_path, timeout_s=0.2)
    store = make_store(conn, "h7")
    put_ranked(store, 3)
    redis.Redis.from_url(private_redis.url).delete(record_key("h7", "d2"))
    die_after_vector_removal(store, private_redis, monkeypatch)
    assert store.prune("alice") == 0
    conn.close()


def test_sync_mirrors_of_two_namespaces_works_on_a_redis_cluster(
    cluster: RedisClusterProcesses, tmp_path: Path
) -> None:
    """The one version check spans two namespaces' keys: one user's hash tag keeps them in one slot."""
    conn = RedisConnector(cluster.url, tmp_path)
    stores = two_namespaces(conn, "h8")
    for user in ("user0", "user1", "user2"):
        for store in stores:
            put(store, "d1", "zyxtrel first", ranked_vector(1), user=user)
        for store, mirrors in zip(stores, sync_mirrors(user, stores, "hybrid"), strict=True):
            assert [r.id for r in store.search(user, "zyxtrel", QUERY, mirrors=mirrors)] == ["d1"]
    conn.close()


# -- the query embedding, beside the other work of a search -------------------------------------------


@pytest.fixture
def counted(coordinator: MemoryCoordinator, monkeypatch: pytest.MonkeyPatch) -> tuple[SemanticMemory, list[str]]:
    """The coordinator's semantic tier with three memories indexed, and the texts its embedder embeds one by one."""
    sem = coordinator.semantic
    texts = {"m1": "Gina adopted a grey cat", "m2": "Jon opened a dance studio", "m3": "Gina lost her job"}
    store = sem.store("memory")
    for (doc_id, text), vector in zip(texts.items(), sem.embedder.embed(list(texts.values())), strict=True):
        store.upsert("alice", doc_id, text, vector, json.dumps({"id": doc_id}))
    seen: list[str] = []
    embed_one = sem.embedder.embed_one
    monkeypatch.setattr(sem.embedder, "embed_one", lambda text: seen.append(text) or embed_one(text))
    return sem, seen


def shown(found: dict[str, SemanticSearch]) -> list[tuple[str, float, str]]:
    return hits(found["memory"].results)


def test_a_search_uses_the_embedding_started_early_for_its_query(counted: tuple[SemanticMemory, list[str]]) -> None:
    sem, seen = counted
    plain = shown(sem.search_many("alice", "which cat did she get", {"memory": 3}))
    early = sem.embed_soon("which cat did she get")
    assert early is not None and early.queries == ("which cat did she get",)
    assert shown(sem.search_many("alice", "which cat did she get", {"memory": 3}, embedding=early)) == plain
    assert seen == ["which cat did she get"] * 2  # the plain search's, then the early one only
    assert plain[0][0] == "m1" and plain[0][2] == "hybrid"


def test_an_early_embedding_of_other_words_is_not_used(counted: tuple[SemanticMemory, list[str]]) -> None:
    sem, seen = counted
    stale = sem.embed_soon("what did Gina adopt")
    assert stale is not None and stale.vectors.result()[0] is not None
    found = shown(sem.search_many("alice", "what did adopt", {"memory": 3}, embedding=stale))
    assert seen == ["what did Gina adopt", "what did adopt"]
    assert found == shown(sem.search_many("alice", "what did adopt", {"memory": 3}))


def test_nothing_is_embedded_early_for_a_keyword_search_or_an_expanded_query(
    counted: tuple[SemanticMemory, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    sem, seen = counted
    assert sem.embed_soon("which pet", "bm25") is None
    monkeypatch.setattr(sem, "default_mode", "bm25")
    assert sem.embed_soon("which pet") is None
    pending = sem.embed_soon("which pet", "hybrid")
    assert pending is not None and pending.vectors.result()[0] is not None
    monkeypatch.setattr(sem, "expander", lambda q: [f"{q} animal"])
    assert sem.embed_soon("which pet", "hybrid") is None
    assert seen == ["which pet"]


def test_the_record_key_memo_stays_within_its_bound(store: SemanticStore, key_prefix: str) -> None:
    """The per-process memo of record keys is bounded (65,536 entries), and a key read from it is the
    key layout's own (``{prefix}:u:{<user>}:{kind}:{id}``, the braces a hash tag: README)."""
    from agtos.storage import semantic_store

    semantic_store._RECORD_KEYS.clear()
    for n in range(65_536):
        store._record_key("alice", f"m{n}")
    assert len(semantic_store._RECORD_KEYS) == 65_536
    assert store._record_key("alice", "m7") == f"{key_prefix}:u:{{alice}}:memory:m7"  # from the memo
    assert store._record_key("alice", "m-over") == f"{key_prefix}:u:{{alice}}:memory:m-over"
    assert len(semantic_store._RECORD_KEYS) <= 65_536
