"""Semantic memory end to end: real ONNX embeddings, real Redis indexes, hybrid RRF search."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import Episode, IngestItem
from agtos.serving.app import create_app
from tests.helpers import user

CORPUS = {
    "ep-hike": (
        "Planned a week of hiking in the Swiss Alps near Zermatt with mountain huts",
        ["hiking", "alps"],
    ),
    "ep-router": ("Configured the XJ-9000 router firmware and port forwarding", ["router", "firmware"]),
    "ep-cake": ("Baked a chocolate birthday cake with raspberry filling for Mia", ["baking", "cake"]),
    "ep-tax": (
        "Filed the quarterly VAT return and checked invoices with the accountant",
        ["tax", "invoices"],
    ),
    "ep-run": ("Trained for the Berlin half marathon with interval runs", ["running", "marathon"]),
}


def seed(coordinator: MemoryCoordinator, user_id: str = "alice") -> None:
    items = [
        IngestItem(
            user_id=user_id,
            episode=Episode(id=eid, user_id=user_id, summary=summary, keywords=kw, topic=kw[0], importance=0.6),
        )
        for eid, (summary, kw) in CORPUS.items()
    ]
    report = coordinator.ingest(items)
    assert report.stored == len(CORPUS) and report.degraded is None


def search(client: TestClient, q: str, mode: str, user_id: str = "alice", limit: int = 5) -> list[dict]:
    response = client.get("/api/memory/search", params={"q": q, "mode": mode, "limit": limit}, headers=user(user_id))
    assert response.status_code == 200, response.text
    return response.json()["results"]


def test_vector_mode_finds_a_paraphrase(client: TestClient, coordinator: MemoryCoordinator) -> None:
    seed(coordinator)
    results = search(client, "trekking holiday among high peaks", "vector")
    assert results[0]["id"] == "ep-hike" and results[0]["matchType"] == "semantic"
    assert search(client, "trekking holiday among high peaks", "bm25") == []  # no shared (stemmed) words


def test_bm25_mode_finds_an_exact_rare_token(client: TestClient, coordinator: MemoryCoordinator) -> None:
    seed(coordinator)
    results = search(client, "XJ-9000", "bm25")
    assert results[0]["id"] == "ep-router" and results[0]["matchType"] == "keyword"


def test_hybrid_finds_both_kinds(client: TestClient, coordinator: MemoryCoordinator) -> None:
    seed(coordinator)
    assert search(client, "trekking holiday among high peaks", "hybrid")[0]["id"] == "ep-hike"
    top = search(client, "XJ-9000 router", "hybrid")[0]
    assert top["id"] == "ep-router" and top["matchType"] == "hybrid" and 0 < top["score"] <= 1


def test_similarity_threshold_filters_vector_hits(settings: Settings) -> None:
    strict = MemoryCoordinator(settings.with_overrides(similarity_threshold=0.9))
    try:
        seed(strict)
        assert strict.search_episodes("alice", "trekking holiday among high peaks", 5, "vector") == []
        loose = strict.search_episodes("alice", "trekking holiday among high peaks", 5, "bm25")
        assert loose == []
    finally:
        strict.close()


def test_index_survives_an_api_restart(settings: Settings, coordinator: MemoryCoordinator) -> None:
    seed(coordinator)
    restarted = MemoryCoordinator(settings)  # fresh process state: indexes rebuilt from Redis
    try:
        with TestClient(create_app(coordinator=restarted)) as client:
            assert search(client, "trekking holiday among high peaks", "vector")[0]["id"] == "ep-hike"
            assert search(client, "XJ-9000", "bm25")[0]["id"] == "ep-router"
    finally:
        restarted.close()


def test_delete_removes_from_both_indexes(client: TestClient, coordinator: MemoryCoordinator) -> None:
    seed(coordinator)
    assert coordinator.semantic.delete("episode", "alice", "ep-router")
    for mode in ("bm25", "vector", "hybrid"):
        assert "ep-router" not in [r["id"] for r in search(client, "XJ-9000 router firmware", mode)]
    listed = client.get("/api/memory/episodes", headers=user("alice")).json()
    assert "ep-router" not in [e["id"] for e in listed["episodes"]]


def test_users_are_isolated_in_search(client: TestClient, coordinator: MemoryCoordinator) -> None:
    seed(coordinator, "alice")
    for mode in ("bm25", "vector", "hybrid"):
        assert search(client, "XJ-9000 router", mode, user_id="bob") == []


def test_session_end_indexes_episode_and_memories(client: TestClient, coordinator: MemoryCoordinator) -> None:
    turns = [
        {"role": "user", "content": "I prefer metric units and I'm vegetarian."},
        {"role": "assistant", "content": "Noted: metric units, vegetarian."},
    ]
    client.post("/api/memory/sessions/s1/turns", json={"turns": turns}, headers=user("vera"))
    ended = client.post("/api/memory/sessions/s1/end", headers=user("vera")).json()
    assert ended["saved"] is True
    memories = coordinator.search_memories("vera", "which measurement system does the user like?", 5)
    assert any("metric units" in m.text for m in memories)
    assert all(m.source_episode_ids == [ended["episode"]["id"]] for m in memories)


@pytest.mark.parametrize("budget", [60, 400])
def test_context_assembly_dedupes_ranks_and_fits_budget(client: TestClient, budget: int) -> None:
    for sid in ("a", "b"):  # the same preference learned in two sessions
        turns = [
            {"role": "user", "content": "I prefer metric units."},
            {"role": "assistant", "content": "Sure."},
        ]
        client.post(f"/api/memory/sessions/{sid}/turns", json={"turns": turns}, headers=user("carl"))
        client.post(f"/api/memory/sessions/{sid}/end", headers=user("carl"))
    body = client.post(
        "/api/memory/context",
        json={"query": "what units should I use?", "token_budget": budget},
        headers=user("carl"),
    ).json()
    assert body["tokens"] <= budget and body["available"] is True
    texts = [i["text"] for i in body["items"]]
    assert sum("metric units" in t.lower() for t in texts if "User prefers" in t) == 1  # deduplicated
    assert "## Memory" in body["context"] and "metric units" in body["context"]


def test_context_rejects_bad_input(client: TestClient) -> None:
    for payload in ({"query": ""}, {"query": "x", "token_budget": 10}, {"query": "x", "session_id": "a b"}):
        response = client.post("/api/memory/context", json=payload)
        assert response.status_code == 422 and response.json()["message"]


def test_recency_breaks_near_ties_by_absolute_age() -> None:
    from agtos.memory.recall import SearchHit
    from agtos.tasks.ranking import recency_weight, rerank_by_recency

    day = 86_400_000

    def hit(eid: str, score: float, ts: int) -> SearchHit:
        return SearchHit(Episode(id=eid, user_id="u", summary="s", timestamp=ts), score, "hybrid")

    now = 1_800_000_000_000
    moments_apart = [hit("older", 0.50, now - 5), hit("newer", 0.49, now)]
    assert [h.episode.id for h in rerank_by_recency(moments_apart)] == ["older", "newer"]
    month_apart = [hit("superseded", 0.50, now - 60 * day), hit("update", 0.48, now)]
    assert [h.episode.id for h in rerank_by_recency(month_apart)] == ["superseded", "update"]
    present = recency_weight("Which city do I live in now?")  # a question about the present state
    assert [h.episode.id for h in rerank_by_recency(month_apart, present)] == ["update", "superseded"]
    strong_old = [hit("strong", 0.80, now - 365 * day), hit("weak-new", 0.50, now)]
    assert [h.episode.id for h in rerank_by_recency(strong_old)] == ["strong", "weak-new"]


def test_hnsw_ef_search_comes_from_env(monkeypatch: pytest.MonkeyPatch, settings: Settings) -> None:
    monkeypatch.setenv("AGTOS_HNSW_EF_SEARCH", "64")
    assert Settings.from_env().hnsw_ef_search == 64
    coordinator = MemoryCoordinator(settings.with_overrides(hnsw_ef_search=64))
    try:
        vectors = coordinator.semantic.store("episode").vectors
        assert vectors.stats()["params"]["expansionSearch"] == 64
        assert vectors.params.new_index(vectors.dim).expansion_search == 64
    finally:
        coordinator.close()
    for bad in ("5", "100000"):
        monkeypatch.setenv("AGTOS_HNSW_EF_SEARCH", bad)
        with pytest.raises(ValueError, match="AGTOS_HNSW_EF_SEARCH"):
            Settings.from_env()
