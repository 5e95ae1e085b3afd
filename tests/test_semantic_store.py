"""SemanticStore: records plus BM25 and vector indexes, hybrid search and expiry."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import numpy as np
import pytest
import redis

from agtos.config import Settings
from agtos.storage.bm25_index import BM25Index
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.semantic_store import SearchResult, SemanticStore
from agtos.storage.vector_index import VectorIndex

DIM = 16


def vec(*weights: float) -> np.ndarray:
    v = np.zeros(DIM, np.float32)
    v[: len(weights)] = weights
    return v


@pytest.fixture
def store(settings: Settings) -> Iterator[SemanticStore]:
    connector = RedisConnector(settings.redis_url, settings.data_dir)
    keys = GlobalKeys(settings.key_prefix)
    yield SemanticStore(
        connector,
        keys,
        "memory",
        VectorIndex(connector, keys, "memory", DIM),
        BM25Index(connector, keys, "memory"),
    )
    connector.close()


def put(store: SemanticStore, doc_id: str, text: str, vector: np.ndarray, user: str = "alice", **kw) -> None:
    store.upsert(user, doc_id, text, vector, json.dumps({"id": doc_id, "text": text}), **kw)


def seed(store: SemanticStore) -> None:
    put(store, "kw", "The zyxtrel library renders invoices.", vec(0, 0, 1))  # keyword only
    put(store, "sem", "Weekend hiking in the Alps.", vec(1, 0.15))  # vector only
    put(store, "both", "zyxtrel dashboards for hiking clubs.", vec(1, 0.3))  # both
    put(store, "none", "Completely unrelated grocery list.", vec(0, 1))


def test_modes_and_match_types(store: SemanticStore) -> None:
    seed(store)
    query = vec(1, 0.2)
    vector = store.search("alice", "zyxtrel", query, mode="vector", limit=5, min_similarity=0.5)
    assert [r.id for r in vector] == ["sem", "both"]
    assert all(r.match_type == "semantic" and r.score == r.similarity for r in vector)

    keyword = store.search("alice", "zyxtrel", query, mode="bm25", limit=5)
    assert {r.id for r in keyword} == {"kw", "both"}
    assert all(r.match_type == "keyword" and r.similarity is None and r.score > 0 for r in keyword)

    hybrid = store.search("alice", "zyxtrel", query, mode="hybrid", limit=5, min_similarity=0.5)
    by_id = {r.id: r for r in hybrid}
    assert hybrid[0].id == "both" and by_id["both"].match_type == "hybrid"
    assert by_id["sem"].match_type == "semantic" and by_id["sem"].similarity == pytest.approx(
        float(np.dot(query, vec(1, 0.15)) / np.linalg.norm(query) / np.linalg.norm(vec(1, 0.15)))
    )
    # in the keyword list only, where it ties with "both" (one "zyxtrel" in five words each): the two share rank 1.5
    keyword_weight = store.rrf_weights[1]
    assert by_id["kw"] == SearchResult("kw", pytest.approx(keyword_weight / 61.5), "keyword", None)
    assert "none" not in by_id  # below the similarity threshold and no keyword match
    assert len(store.search("alice", "zyxtrel", query, mode="hybrid", limit=1)) == 1
    # hybrid without a vector degrades to keywords; vector mode needs one
    assert {r.id for r in store.search("alice", "zyxtrel", None, limit=5)} == {"kw", "both"}
    with pytest.raises(ValueError):
        store.search("alice", "zyxtrel", None, mode="vector")


def test_get_many_delete_and_isolation(store: SemanticStore) -> None:
    seed(store)
    put(store, "bob1", "zyxtrel for bob", vec(1, 0.2), user="bob")
    got = store.get_many("alice", ["kw", "missing", "sem"])
    assert set(got) == {"kw", "sem"} and json.loads(got["kw"])["id"] == "kw"
    assert store.get_many("bob", ["kw"]) == {}
    assert {r.id for r in store.search("bob", "zyxtrel", vec(1, 0.2), limit=10)} == {"bob1"}

    assert store.delete("alice", "both") is True
    assert store.delete("alice", "both") is False
    assert store.vectors.count("alice") == 3 and store.bm25.count("alice") == 3
    for mode in ("hybrid", "vector", "bm25"):
        assert "both" not in {r.id for r in store.search("alice", "zyxtrel", vec(1, 0.3), mode=mode)}


def test_validation_happens_before_any_write(store: SemanticStore) -> None:
    with pytest.raises(ValueError, match="dimension"):
        put(store, "x", "text", np.ones(DIM + 1, np.float32))
    with pytest.raises(ValueError):
        put(store, "bad:id", "text", vec(1))
    assert store.get_many("alice", ["x"]) == {} and store.count("alice") == 0


def test_expired_record_never_shows_and_is_removed_from_indexes(store: SemanticStore, raw_redis: redis.Redis) -> None:
    seed(store)
    put(store, "brief", "zyxtrel reminder that expires", vec(1, 0.25), ttl_seconds=60)
    key = store.keys.user("alice").record("memory", "brief")
    assert 0 < raw_redis.ttl(key) <= 60
    assert "brief" in {r.id for r in store.search("alice", "zyxtrel", vec(1, 0.25), limit=10)}

    raw_redis.pexpire(key, 1)
    time.sleep(0.02)
    for mode in ("hybrid", "vector", "bm25"):
        hits = store.search("alice", "zyxtrel", vec(1, 0.25), mode=mode, limit=10)
        assert "brief" not in {r.id for r in hits}
    assert store.vectors.count("alice") == 4 and store.bm25.count("alice") == 4
    assert "brief" not in set(store.bm25.ids("alice"))


def test_expired_hits_in_the_first_page_are_replaced_by_the_next_live_ones(
    store: SemanticStore, raw_redis: redis.Redis
) -> None:
    for i in range(12):
        put(store, f"n{i}", f"zyxtrel note {i} " + "zyxtrel " * (12 - i), vec(1, i / 20))
    want = [hit.id for hit in store.search("alice", "zyxtrel", None, mode="bm25", limit=12)]
    for doc_id in want[:3]:  # the three best hits expire
        raw_redis.delete(store.keys.user("alice").record("memory", doc_id))
    hits = store.search("alice", "zyxtrel", None, mode="bm25", limit=5)
    assert [hit.id for hit in hits] == want[3:8]
    assert all(hit.payload and hit.id in hit.payload for hit in hits)
    assert store.bm25.count("alice") == 9  # the expired ones left the index


def test_prune_sweeps_records_never_searched(store: SemanticStore, raw_redis: redis.Redis) -> None:
    seed(store)
    raw_redis.delete(store.keys.user("alice").record("memory", "none"))
    assert store.prune("alice") == 1
    assert store.count("alice") == 3 and store.bm25.count("alice") == 3
    assert store.prune("alice") == 0


def test_upsert_without_vector_indexes_text_only(store: SemanticStore) -> None:
    put(store, "m1", "zyxtrel notes", vec(1))
    store.upsert("alice", "m1", "zyxtrel notes, edited", None, json.dumps({"id": "m1"}))
    assert store.vectors.count("alice") == 0 and store.bm25.count("alice") == 1
    hits = store.search("alice", "zyxtrel", vec(1), mode="hybrid", limit=5)
    assert [(r.id, r.match_type) for r in hits] == [("m1", "keyword")]
