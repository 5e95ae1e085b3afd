"""The RediSearch vector backend (``FT.SEARCH … KNN``), run against a Redis that has the module with
vector fields: ``AGTOS_TEST_REDISEARCH_URL``, else the private Redis 8.2 + Redis Stack 7.4
``redisearch.so`` of the dev extra. Elsewhere every test here skips with an 'optional backend:' reason
(Debian's redis-redisearch 1.2 has no vector fields)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.vector_index import VectorIndex
from tests.helpers import delete_prefix, talk, user

pytestmark = pytest.mark.optional_backend
DIM = 8
MakeIndex = Callable[..., VectorIndex]


def ft_indexes(client: redis.Redis, prefix: str) -> list[str]:
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in client.execute_command("FT._LIST")]
    return sorted(n for n in names if n.startswith(prefix + ":"))


@pytest.fixture
def prefix(redisearch_url: str) -> Iterator[str]:
    """A fresh namespace on the RediSearch server; its keys and FT indexes are dropped afterwards."""
    name = f"agtos-test-{uuid.uuid4().hex[:10]}"
    yield name
    client = redis.Redis.from_url(redisearch_url)
    for index in ft_indexes(client, name):
        client.execute_command("FT.DROPINDEX", index)
    delete_prefix(redisearch_url, name)


@pytest.fixture
def make_index(redisearch_url: str, prefix: str, tmp_path: Path) -> Iterator[MakeIndex]:
    connectors: list[RedisConnector] = []

    def make(**kwargs: object) -> VectorIndex:
        connector = RedisConnector(redisearch_url, tmp_path)
        connectors.append(connector)
        return VectorIndex(connector, GlobalKeys(prefix), "memory", DIM, **kwargs)  # type: ignore[arg-type]

    yield make
    for connector in connectors:
        connector.close()


def numpy_top(vectors: dict[str, np.ndarray], query: np.ndarray, k: int) -> list[tuple[str, float]]:
    """The exact cosine top-k with similarity >= 0 (search's default floor), computed independently."""
    q = query / np.linalg.norm(query)
    sims = {doc: float(v @ q / np.linalg.norm(v)) for doc, v in vectors.items()}
    return [kv for kv in sorted(sims.items(), key=lambda kv: -kv[1]) if kv[1] >= 0][:k]


def test_knn_matches_numpy_and_keeps_users_apart(make_index: MakeIndex, redisearch_url: str, prefix: str) -> None:
    rng = np.random.default_rng(7)
    index = make_index()
    ann = {f"a{i}": rng.normal(size=DIM).astype(np.float32) for i in range(30)}
    annie = {f"n{i}": rng.normal(size=DIM).astype(np.float32) for i in range(10)}  # "ann" is a prefix of "annie"
    index.add_many("ann", list(ann), np.stack(list(ann.values())))
    index.add_many("annie", list(annie), np.stack(list(annie.values())))
    assert index.stats()["backend"] == "redisearch"
    assert len(ft_indexes(redis.Redis.from_url(redisearch_url), prefix)) == 2  # one FT index per user

    query = rng.normal(size=DIM).astype(np.float32)
    expected = numpy_top(ann, query, 5)
    hits = index.search("ann", query, 5)
    assert [doc for doc, _ in hits] == [doc for doc, _ in expected]
    assert [sim for _, sim in hits] == pytest.approx([sim for _, sim in expected], abs=1e-5)
    assert {doc for doc, _ in index.search("annie", query, 40, min_similarity=-1.0)} == set(annie)  # none of ann's

    third = expected[2][1]
    assert [doc for doc, _ in index.search("ann", query, 5, min_similarity=third - 1e-4)] == [
        doc for doc, _ in expected[:3]
    ]
    assert index.remove("ann", expected[0][0]) is True
    after = index.search("ann", query, 4)
    assert [doc for doc, _ in after] == [doc for doc, _ in expected[1:5]]
    assert index.count("ann") == 29


def test_an_index_created_later_takes_in_the_stored_vectors(make_index: MakeIndex) -> None:
    rng = np.random.default_rng(11)
    stored = {f"d{i}": rng.normal(size=DIM).astype(np.float32) for i in range(12)}
    make_index(use_redisearch=False).add_many("carl", list(stored), np.stack(list(stored.values())))
    query = rng.normal(size=DIM).astype(np.float32)
    later = make_index()  # detects the module; its FT index does not exist yet
    hits = later.search("carl", query, 12)
    expected = numpy_top(stored, query, 12)
    assert 3 <= len(expected) < 12 and [doc for doc, _ in hits] == [doc for doc, _ in expected]  # floor at 0


def test_api_search_health_and_forget_on_redisearch(redisearch_url: str, prefix: str, tmp_path: Path) -> None:
    settings = Settings(redis_url=redisearch_url, key_prefix=prefix, data_dir=tmp_path / "d", config_dir=tmp_path / "c")
    coordinator = MemoryCoordinator(settings)
    sessions = {
        "dora": "I am planning a two-week sailing trip along the coast of Croatia in June with my sister.",
        "dorian": "I have been baking sourdough bread every weekend and I want a better starter recipe.",
    }
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            episode = {}
            for uid, text in sessions.items():
                ended = talk(client, uid, "s1", ("user", text), ("assistant", "Noted, I will remember that."))
                assert ended["saved"] is True, ended
                episode[uid] = ended["episode"]["id"]
            health = client.get("/health").json()["checks"]["memory-semantic"]
            assert health["healthy"] is True and health["backend"] == "redisearch"

            def vector_search(uid: str, q: str) -> list[str]:
                found = client.get("/api/memory/search", params={"q": q, "mode": "vector"}, headers=user(uid))
                assert found.status_code == 200, found.text
                return [r["id"] for r in found.json()["results"]]

            assert vector_search("dora", "boat holiday on the Adriatic sea") == [episode["dora"]]
            assert vector_search("dorian", "bread starter") == [episode["dorian"]]
            raw = redis.Redis.from_url(redisearch_url)
            assert any("{dora}" in name for name in ft_indexes(raw, prefix))

            forgot = client.post("/api/memory/forget", json={"kind": "all"}, headers=user("dora"))
            assert forgot.status_code == 200, forgot.text
            assert vector_search("dora", "boat holiday on the Adriatic sea") == []
            assert not any("{dora}" in name for name in ft_indexes(raw, prefix))  # no index named after her
            assert any("{dorian}" in name for name in ft_indexes(raw, prefix))  # the other user's stays
            assert vector_search("dorian", "bread starter") == [episode["dorian"]]
            # she comes back: this process had created her (now dropped) index; search must still work
            back = talk(client, "dora", "s2", ("user", sessions["dora"]), ("assistant", "Noted again."))
            assert vector_search("dora", "boat holiday on the Adriatic sea") == [back["episode"]["id"]]
    finally:
        coordinator.close()
