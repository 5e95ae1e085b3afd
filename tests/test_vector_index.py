"""VectorIndex: Redis-backed vectors, in-process exact/HNSW search, cross-process freshness."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import redis

from agtos.config import Settings
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.vector_index import VectorIndex

DIM = 384
MakeIndex = Callable[..., VectorIndex]


def unit_rows(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    m = rng.standard_normal((n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def basis(i: int, dim: int = DIM) -> np.ndarray:
    v = np.zeros(dim, np.float32)
    v[i] = 1.0
    return v


@pytest.fixture
def make_index(settings: Settings) -> Iterator[MakeIndex]:
    """Each call is a fresh VectorIndex on its own connection, as another API process would be."""
    connectors: list[RedisConnector] = []

    def make(**kwargs: Any) -> VectorIndex:
        connector = RedisConnector(settings.redis_url, settings.data_dir)
        connectors.append(connector)
        return VectorIndex(connector, GlobalKeys(settings.key_prefix), "memory", kwargs.pop("dim", DIM), **kwargs)

    yield make
    for connector in connectors:
        connector.close()


def test_nearest_by_construction_threshold_and_remove(make_index: MakeIndex) -> None:
    index = make_index()
    ids = [f"m{i}" for i in range(10)]
    index.add_many("alice", ids, np.stack([basis(i) for i in range(10)]))
    query = basis(3) + 0.2 * basis(4)
    hits = index.search("alice", query, limit=3)
    assert [d for d, _ in hits[:2]] == ["m3", "m4"]
    assert hits[0][1] == pytest.approx(1 / np.sqrt(1.04), abs=1e-5)
    assert [d for d, _ in index.search("alice", query, limit=10, min_similarity=0.5)] == ["m3"]
    assert index.search("alice", query, limit=10) == index.exact_search("alice", query, limit=10)
    assert index.count("alice") == 10

    assert index.remove("alice", "m3") is True
    assert index.remove("alice", "m3") is False
    assert index.search("alice", query, limit=1)[0][0] == "m4"
    index.add("alice", "m4", basis(8) + basis(9))  # replace
    assert index.search("alice", basis(8) + basis(9), limit=1)[0] == ("m4", pytest.approx(1.0))
    assert index.search("alice", basis(4), limit=1, min_similarity=0.5) == []
    assert index.count("alice") == 9
    assert sorted(index.ids("alice")) == sorted(set(ids) - {"m3"})


def test_validation_errors(make_index: MakeIndex) -> None:
    index = make_index()
    with pytest.raises(ValueError, match="dimension 3"):
        index.add("alice", "m1", [1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="dimension 10"):
        index.search("alice", np.ones(10), limit=3)
    with pytest.raises(ValueError, match="non-zero"):
        index.add("alice", "m1", np.zeros(DIM))
    with pytest.raises(ValueError, match="shape"):
        index.add_many("alice", ["a", "b"], np.ones((3, DIM)))
    assert index.count("alice") == 0
    assert index.stats()["backend"] == "usearch"  # this Redis has no RediSearch module


def test_survives_restart_and_sees_other_process_writes(make_index: MakeIndex) -> None:
    rng = np.random.default_rng(1)
    vectors = unit_rows(rng, 200)
    first = make_index()
    first.add_many("alice", [f"d{i}" for i in range(200)], vectors)
    queries = unit_rows(rng, 5)
    before = [first.search("alice", q, limit=10, min_similarity=-1.0) for q in queries]

    second = make_index()  # a restarted / other API process: rebuilt from Redis
    assert [second.search("alice", q, limit=10, min_similarity=-1.0) for q in queries] == before

    target = basis(5)
    first.add("alice", "fresh", target)  # written by the first, seen by the second at once
    assert second.search("alice", target, limit=1)[0] == ("fresh", pytest.approx(1.0))
    second.remove("alice", "fresh")
    assert first.search("alice", target, limit=1)[0][0] != "fresh"
    first.add("alice", "d0", target)  # an update of an existing id
    assert second.search("alice", target, limit=1)[0] == ("d0", pytest.approx(1.0))


def test_float16_blobs_are_half_the_bytes_and_read_beside_float32_ones(
    make_index: MakeIndex, raw_redis: redis.Redis, settings: Settings
) -> None:
    rng = np.random.default_rng(4)
    vectors = unit_rows(rng, 50)
    old = make_index()  # float32 blobs, as every index wrote them before
    old.add_many("alice", [f"d{i}" for i in range(25)], vectors[:25])
    half = make_index(storage_dtype="f2")
    half.add_many("alice", [f"d{i}" for i in range(25, 50)], vectors[25:])
    [key] = raw_redis.keys(f"{settings.key_prefix}:*vec:data")
    data: dict[bytes, bytes] = raw_redis.hgetall(key)  # type: ignore[assignment]
    assert sorted({len(blob) for blob in data.values()}) == [2 * DIM, 4 * DIM]
    assert np.frombuffer(data[b"d30"], dtype="<f2").tolist() == vectors[30].astype(np.float16).tolist()
    for reader in (half, make_index()):  # a fresh process reloads both formats from Redis
        for i in (3, 30):
            doc_id, sim = reader.search("alice", vectors[i], limit=1)[0]
            assert doc_id == f"d{i}"
            assert sim == pytest.approx(1.0, abs=1e-3)
    with pytest.raises(ValueError, match="storage_dtype"):
        make_index(storage_dtype="f8")


def test_prepared_shard_carries_other_process_writes(make_index: MakeIndex) -> None:
    """prepare() does the version check ahead of the search (as while a query is embedded)."""
    writer, reader = make_index(), make_index()
    writer.add_many("alice", ["a", "b"], np.stack([basis(1), basis(2)]))
    assert reader.search("alice", basis(1), limit=1)[0][0] == "a"
    writer.add("alice", "c", basis(3))  # unseen by reader's mirror until it syncs
    writer.remove("alice", "a")
    shard = reader.prepare("alice")
    assert shard is not None and set(shard.rows) == {"b", "c"}
    assert reader.search("alice", basis(3), limit=1, prepared=shard)[0] == ("c", pytest.approx(1.0))
    assert "a" not in {d for d, _ in reader.search("alice", basis(1), limit=3, prepared=shard)}


def test_trimmed_change_log_and_wiped_index_force_reload(
    make_index: MakeIndex, raw_redis: redis.Redis, key_prefix: str
) -> None:
    writer, reader = make_index(max_change_log=3), make_index(max_change_log=3)
    writer.add_many("alice", ["a", "b"], np.stack([basis(0), basis(1)]))
    assert reader.search("alice", basis(0), limit=1)[0][0] == "a"
    for i in range(2, 8):  # more changes than the log keeps
        writer.add("alice", f"n{i}", basis(i))
    assert raw_redis.zcard(writer._key("alice", "changes")) == 3
    assert {d for d, _ in reader.search("alice", basis(2), limit=10, min_similarity=-1)} == {
        "a", "b", *(f"n{i}" for i in range(2, 8))
    }  # fmt: skip

    for key in raw_redis.scan_iter(match=f"{key_prefix}:u:{{alice}}:*"):
        raw_redis.delete(key)  # e.g. the user was deleted, then writes start again
    writer.add_many("alice", [f"z{i}" for i in range(8)], np.stack([basis(20 + i) for i in range(8)]))
    assert {d for d, _ in reader.search("alice", basis(20), limit=10, min_similarity=-1)} == {f"z{i}" for i in range(8)}


def test_users_are_isolated(make_index: MakeIndex) -> None:
    index = make_index()
    index.add("alice", "a1", basis(1))
    index.add("bob", "b1", basis(1))
    assert [d for d, _ in index.search("alice", basis(1), limit=5)] == ["a1"]
    assert [d for d, _ in index.search("bob", basis(1), limit=5)] == ["b1"]
    index.remove("bob", "b1")
    assert index.count("alice") == 1 and index.count("bob") == 0


def test_hnsw_recall_at_10_and_incremental_updates(make_index: MakeIndex) -> None:
    rng = np.random.default_rng(7)
    n = 5_000
    vectors = unit_rows(rng, n)
    index = make_index(hnsw_min_size=1_000, build_in_background=False, build_threads=0)
    index.add_many("alice", [f"v{i}" for i in range(n)], vectors)
    index.search("alice", vectors[0], limit=1)  # loads the shard and builds the graph
    stats = index.stats()
    assert stats["hnswUsers"] == 1 and stats["docs"] == n and stats["memoryBytes"] > vectors.nbytes

    queries = unit_rows(rng, 50)
    found = 0
    for q in queries:
        approx = {d for d, _ in index.search("alice", q, limit=10, min_similarity=-1)}
        exact = {d for d, _ in index.exact_search("alice", q, limit=10, min_similarity=-1)}
        found += len(approx & exact)
    assert found / (10 * len(queries)) >= 0.95

    index.add("alice", "new", queries[0])
    index.remove("alice", "v1")
    assert index.search("alice", queries[0], limit=1)[0] == ("new", pytest.approx(1.0, abs=1e-5))
    assert "v1" not in {d for d, _ in index.search("alice", vectors[1], limit=10)}


def test_background_build_swaps_in_graph(make_index: MakeIndex) -> None:
    rng = np.random.default_rng(3)
    vectors = unit_rows(rng, 600, dim=32)
    index = make_index(dim=32, hnsw_min_size=500)
    index.add_many("alice", [f"v{i}" for i in range(600)], vectors)
    index.search("alice", vectors[0], limit=1)  # exact while the graph builds
    index.add("alice", "during", vectors[5])  # replayed into the new graph
    assert index.wait_for_builds("alice", timeout_s=30)
    assert index.stats()["hnswUsers"] == 1
    top2 = {d for d, _ in index.search("alice", vectors[5], limit=2)}
    assert top2 == {"v5", "during"}


def test_least_recently_used_shards_are_dropped_and_reloaded(make_index: MakeIndex) -> None:
    index = make_index(max_loaded_users=2)
    for user in ("u1", "u2", "u3"):
        index.add(user, "d", basis(1))
        assert index.search(user, basis(1), limit=1)[0][0] == "d"
    assert index.stats()["loadedUsers"] == 2
    assert index.search("u1", basis(1), limit=1)[0][0] == "d"  # reloaded from Redis


def test_concurrent_writers_and_readers_agree_with_redis(make_index: MakeIndex) -> None:
    index = make_index(dim=8)
    rng = np.random.default_rng(5)
    vectors = unit_rows(rng, 200, dim=8)
    index.add("alice", "seed", vectors[0])
    errors: list[BaseException] = []

    def writer(part: int) -> None:
        try:
            for i in range(part * 50, part * 50 + 50):
                index.add("alice", f"d{i}", vectors[i])
                index.search("alice", vectors[i], limit=3)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(p,)) for p in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    q = vectors[17]
    fresh = make_index(dim=8)
    assert index.count("alice") == 201
    mine, theirs = index.exact_search("alice", q, 201, -1), fresh.exact_search("alice", q, 201, -1)
    # the same documents and scores; float32 sums may differ in the last bit between two copies
    assert sorted(d for d, _ in mine) == sorted(d for d, _ in theirs)
    assert dict(mine) == pytest.approx(dict(theirs), abs=1e-6)
    assert index.search("alice", q, limit=1)[0] == ("d17", pytest.approx(1.0))
