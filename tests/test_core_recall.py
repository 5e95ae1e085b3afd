"""Recall: score scaling to 0-1, the recency re-rank, query-expansion fusion, the semantic tier's
writes (batches, merges, deletes) and context assembly, against literals from the spec (RRF k = 60,
the original query weighted double, a 30-day half-life at weight 0.1, threshold 0.15) and ``bm25s``."""

from __future__ import annotations

import numpy as np
import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.recall import SearchHit
from agtos.memory.semantic import SemanticMemory
from agtos.providers.embeddings import EmbeddingError
from agtos.schemas import Episode, IngestItem, Memory, ProfileUpdate
from agtos.serving.app import create_app
from agtos.tasks.ranking import display_score, recency_weight, rerank_by_recency
from agtos.tasks.tokens import count_tokens
from tests.helpers import BrokenEmbedder, bm25_oracle, talk, user

DAY_MS = 86_400_000
NOW_MS = 1_700_000_000_000


# -- display_score --------------------------------------------------------------------
def test_display_score_scales_every_mode_into_0_1() -> None:
    assert display_score(1 / 61, "hybrid", 2 / 61) == 0.5
    assert display_score(1 / 61, "hybrid") == 0.5  # default maximum: rank 1 in both lists, k = 60
    assert display_score(1 / 61, "hybrid", 0.0) == 0.5
    assert display_score(1 / 61, "hybrid", 3 / 61) == 0.3333
    assert display_score(3 / 61, "hybrid", 2 / 61) == 1.0  # capped
    assert display_score(3.0, "bm25") == 0.75  # s / (s + 1)
    assert display_score(2.0, "bm25") == 0.6667
    assert display_score(0.0, "bm25") == 0.0
    assert display_score(0.123456, "vector", 5.0) == 0.1235  # a cosine already is in 0-1


# -- recency re-rank --------------------------------------------------------------------
def hit(eid: str, score: float, timestamp: int) -> SearchHit:
    return SearchHit(Episode(id=eid, user_id="u", summary=eid, timestamp=timestamp), score, "keyword")


def ids(hits: list[SearchHit]) -> list[str]:
    return [h.episode.id for h in hits]


@pytest.mark.parametrize(
    ("days", "factor"),
    [(30, 0.98 + 0.02 * 0.5), (60, 0.98 + 0.02 * 0.25), (15, 0.98 + 0.02 * 0.5**0.5)],
)
def test_recency_weight_of_an_older_hit_follows_the_30_day_half_life(days: int, factor: float) -> None:
    old = hit("old", 1.0, NOW_MS - days * DAY_MS)
    assert ids(rerank_by_recency([hit("new", factor - 0.001, NOW_MS), old])) == ["old", "new"]
    assert ids(rerank_by_recency([old, hit("new", factor + 0.001, NOW_MS)])) == ["new", "old"]
    strong = 0.9 + 0.1 * 0.5 ** (days / 30)  # the weight of a question about the present: 0.1
    assert ids(rerank_by_recency([hit("new", strong - 0.001, NOW_MS), old], 0.1)) == ["old", "new"]
    assert ids(rerank_by_recency([old, hit("new", strong + 0.001, NOW_MS)], 0.1)) == ["new", "old"]


@pytest.mark.parametrize(
    ("query", "weight"),
    [
        ("Which city do I live in these days?", 0.1),
        ("What car do I drive now?", 0.1),
        ("Is she still at Globex?", 0.1),
        ("What's the latest cost estimate?", 0.1),
        ("When did Gina lose her job?", 0.02),
        ("Where did Jon's sister open her bakery?", 0.02),
        ("Where is the snowy range?", 0.02),  # 'now' inside a word is not the present
    ],
)
def test_questions_about_the_present_weigh_recency_more(query: str, weight: float) -> None:
    assert recency_weight(query) == weight


def test_recency_rerank_uses_absolute_age_and_is_stable() -> None:
    # a second apart: the better score wins; equal weights keep the input order
    moments = [hit("newer", 0.5, NOW_MS), hit("older", 0.5001, NOW_MS - 1_000)]
    assert ids(rerank_by_recency(moments)) == ["older", "newer"]
    same = [hit("a", 0.5, NOW_MS), hit("b", 0.5, NOW_MS), hit("c", 0.7, NOW_MS - 1)]
    assert ids(rerank_by_recency(same)) == ["c", "a", "b"]
    single = [hit("only", 0.1, 0)]
    assert rerank_by_recency(single) is single and rerank_by_recency([]) == []


# -- search through the API -----------------------------------------------------------
def seed(coordinator: MemoryCoordinator, docs: dict[str, tuple[str, int]], user_id: str = "alice") -> None:
    """Episodes whose indexed text is exactly their summary (no keywords or topic)."""
    items = [
        IngestItem(
            user_id=user_id, episode=Episode(id=eid, user_id=user_id, summary=s, keywords=[], topic="", timestamp=t)
        )
        for eid, (s, t) in docs.items()
    ]
    assert coordinator.ingest(items).stored == len(docs)


def search(client: TestClient, q: str, mode: str | None = None, limit: int = 10, user_id: str = "alice") -> list[dict]:
    params: dict[str, str | int] = {"q": q, "limit": limit}
    if mode:
        params["mode"] = mode
    response = client.get("/api/memory/search", params=params, headers=user(user_id))
    assert response.status_code == 200, response.text
    return response.json()["results"]


def squash(score: float) -> float:
    return round(score / (score + 1), 4)


def test_bm25_search_scores_pool_and_limit(client: TestClient, coordinator: MemoryCoordinator) -> None:
    old = NOW_MS - 300 * DAY_MS
    words = "zebra quartz violin ocean harbour meadow lantern copper pebble".split()
    docs = {
        "ep-1": (" ".join(words[:7]), old),
        "ep-2": (" ".join(words[:8]), old),
        "ep-3": (" ".join(words[:9]), NOW_MS),  # newest, third by score
        "ep-4": (" ".join(words[1:5]), NOW_MS),
    }
    seed(coordinator, docs)
    oracle = bm25_oracle({e: s.split() for e, (s, _) in docs.items()}, ["zebra"])
    assert [e for e, _ in oracle] == ["ep-1", "ep-2", "ep-3"]
    results = search(client, "zebra", "bm25", limit=3)
    # shown with their best evidence's score (here their summaries alone: BM25 squashed into 0-1)
    assert {r["id"]: r["score"] for r in results} == {e: squash(s) for e, s in oracle}
    assert {r["matchType"] for r in results} == {"keyword"}
    assert {r["sessionId"] for r in results} == {""} and all(r["highlights"] == [] for r in results)
    # ranked by their evidence's weighted RRF, 0.5 / (60 + rank) scaled by rank 1's (1, 61/62, 61/63), and
    # recency breaks near ties only: 300 days cost ep-2 2 % (0.9642 < ep-3's 0.9683), not ep-1 (0.9800)
    assert [r["id"] for r in results] == ["ep-1", "ep-3", "ep-2"]
    # limit 1 re-ranks a pool of 2 candidates: ep-3 is not in it
    assert [r["id"] for r in search(client, "zebra", "bm25", limit=1)] == ["ep-1"]
    assert [r["id"] for r in search(client, "zebra", "bm25", limit=2)] == ["ep-1", "ep-3"]
    assert search(client, "zebra", "bm25", user_id="bob") == []


def test_hybrid_score_of_a_top_hit_in_both_lists_is_1(client: TestClient, coordinator: MemoryCoordinator) -> None:
    seed(coordinator, {"ep-1": ("zebra quartz violin", NOW_MS), "ep-2": ("ocean harbour lighthouse", NOW_MS)})
    top = search(client, "zebra quartz violin")[0]
    assert top["id"] == "ep-1" and top["score"] == 1.0 and top["matchType"] == "hybrid"


# -- query expansion: weighted RRF of the original and its rephrasings ----------------
FUSION_DOCS = {
    "ep-a": ("alpha", NOW_MS),
    "ep-d": ("alpha delta echo golf", NOW_MS),
    "ep-b": ("bravo xray", NOW_MS),
    "ep-c": ("bravo hotel india juliet kilo", NOW_MS),
    "ep-x": ("xray", NOW_MS),
}


def rrf_oracle(lists: list[list[str]], weights: list[float], k: int = 60) -> list[str]:
    """Weighted reciprocal rank fusion written out from its definition: sum of w / (k + rank)."""
    scores: dict[str, float] = {}
    for ranked, w in zip(lists, weights, strict=True):
        for rank, doc in enumerate(ranked, start=1):
            scores[doc] = scores.get(doc, 0.0) + w / (k + rank)
    return sorted(scores, key=lambda d: -scores[d])


def expanding(coordinator: MemoryCoordinator, phrases: list[str], of: str = "alpha") -> SemanticMemory:
    """The coordinator's semantic tier with a query expander that rephrases ``of`` as ``phrases``."""
    return SemanticMemory(
        coordinator.connector,
        coordinator.keys,
        coordinator.episodes,
        lambda: coordinator.semantic.embedder,
        expander=lambda query: phrases if query == of else [],
    )


def test_expansions_are_fused_with_the_original_weighted_double(coordinator: MemoryCoordinator) -> None:
    seed(coordinator, FUSION_DOCS)
    terms = {e: s.split() for e, (s, _) in FUSION_DOCS.items()}
    found = expanding(coordinator, ["bravo", "xray"]).search("episode", "alice", "alpha", 3, "bm25")
    # alpha → [a, d], bravo → [b, c], xray → [x, b]: a 2/61, b 1/61 + 1/62, d 2/62, x 1/61, c 1/62
    assert [h.id for h in found.results] == ["ep-a", "ep-b", "ep-d"]
    assert found.mode == "bm25" and found.degraded is None
    # each hit keeps the score of the first list it appears in (b: its "bravo" BM25 score)
    bravo = dict(bm25_oracle(terms, ["bravo"]))
    alpha = dict(bm25_oracle(terms, ["alpha"]))
    assert {h.id: h.score for h in found.results} == pytest.approx(
        {"ep-a": alpha["ep-a"], "ep-b": bravo["ep-b"], "ep-d": alpha["ep-d"]}
    )
    five = expanding(coordinator, ["bravo", "xray"]).search("episode", "alice", "alpha", 5, "bm25")
    assert [h.id for h in five.results] == ["ep-a", "ep-b", "ep-d", "ep-x", "ep-c"]


def test_hybrid_expansion_fuses_the_hybrid_lists_of_each_phrase(coordinator: MemoryCoordinator) -> None:
    seed(coordinator, FUSION_DOCS)
    plain = [coordinator.semantic.search("episode", "alice", q, 5, "hybrid").results for q in ("alpha", "bravo")]
    found = expanding(coordinator, ["bravo"]).search("episode", "alice", "alpha", 5, "hybrid")
    assert found.mode == "hybrid" and found.max_score == pytest.approx(2 / 61)
    expected = rrf_oracle([[h.id for h in hits] for hits in plain], [2.0, 1.0])[:5]
    assert [h.id for h in found.results] == expected
    first_seen: dict[str, float] = {}
    for h in plain[0] + plain[1]:
        first_seen.setdefault(h.id, h.score)
    assert {h.id: h.score for h in found.results} == pytest.approx({d: first_seen[d] for d in expected})


def test_search_without_an_embedder_says_it_fell_back_to_keywords(settings: Settings) -> None:
    coordinator = MemoryCoordinator(settings, embedder=BrokenEmbedder())  # type: ignore[arg-type]
    try:
        seed(coordinator, {"ep-1": ("zebra quartz", NOW_MS)})
        found = coordinator.semantic.search("episode", "alice", "zebra", 5)
        assert found.mode == "bm25" and [h.id for h in found.results] == ["ep-1"]
        assert found.degraded == "embedder unavailable, keyword search only: embedder unavailable: model file missing"
        asked = coordinator.semantic.search("episode", "alice", "zebra", 5, "bm25")  # never needs the embedder
        assert asked.mode == "bm25" and asked.degraded is None and [h.id for h in asked.results] == ["ep-1"]
    finally:
        coordinator.close()


def test_similarity_threshold_defaults_to_0_15_and_can_be_overridden(coordinator: MemoryCoordinator) -> None:
    seed(coordinator, FUSION_DOCS)
    query = "a thunderstorm rolled over the valley"
    vectors = coordinator.semantic.embedder.embed([query, *[s for s, _ in FUSION_DOCS.values()]])
    cosines = {
        e: float(np.dot(vectors[0], v) / np.linalg.norm(vectors[0]) / np.linalg.norm(v))
        for e, v in zip(FUSION_DOCS, vectors[1:], strict=True)
    }
    found = coordinator.semantic.search("episode", "alice", query, 5, "vector")
    assert {h.id for h in found.results} == {e for e, c in cosines.items() if c >= 0.15}
    everything = coordinator.semantic.search("episode", "alice", query, 5, "vector", min_similarity=-1.0)
    assert {h.id for h in everything.results} == set(FUSION_DOCS)
    assert {h.id: h.score for h in everything.results} == pytest.approx(cosines, abs=1e-4)
    strict = coordinator.semantic.search("episode", "alice", query, 5, "vector", min_similarity=0.99)
    assert strict.results == []


# -- writes: batches, merges, deletes -------------------------------------------------
def test_store_batch_routes_vector_rows_to_their_records(coordinator: MemoryCoordinator) -> None:
    semantic = coordinator.semantic
    episodes = [
        Episode(id="ep-1", user_id="alice", summary="Planned a hiking week in the Alps", keywords=[], topic=""),
        Episode(id="ep-2", user_id="bob", summary="Baked a chocolate cake for a birthday", keywords=[], topic=""),
        Episode(id="ep-3", user_id="alice", summary="Filed the quarterly tax return", keywords=[], topic=""),
    ]
    memories = [
        Memory(id="mem-1", user_id="bob", text="Prefers answers in metric units"),
        Memory(id="mem-2", user_id="alice", text="Is allergic to peanuts"),
    ]
    texts = [e.summary for e in episodes] + [m.text for m in memories]
    assert semantic.store_batch(episodes, memories, semantic.embedder.embed(texts)) == 2
    for user_id, namespace, doc_id, text in [
        ("alice", "episode", "ep-1", texts[0]),
        ("bob", "episode", "ep-2", texts[1]),
        ("alice", "episode", "ep-3", texts[2]),
        ("bob", "memory", "mem-1", texts[3]),
        ("alice", "memory", "mem-2", texts[4]),
    ]:
        top = semantic.search(namespace, user_id, text, 1, "vector").results[0]
        assert top.id == doc_id and top.score == pytest.approx(1.0, abs=1e-3)
    assert coordinator.episodes.get("bob", "ep-2") is not None
    # without vectors, text only
    assert semantic.store_batch([], [Memory(id="mem-3", user_id="alice", text="Owns a grey cat")], None) == 1
    assert [h.id for h in semantic.search("memory", "alice", "grey cat", 5, "bm25").results] == ["mem-3"]


def test_storing_a_known_memory_merges_sources_and_keeps_first_seen(coordinator: MemoryCoordinator) -> None:
    semantic = coordinator.semantic

    def stored(user_id: str) -> Memory:
        return Memory.model_validate_json(semantic.records("memory", user_id, ["mem-units"])["mem-units"])

    def units(user_id: str, sources: list[str], created_at: int, importance: float) -> Memory:
        return Memory(
            id="mem-units",
            user_id=user_id,
            text="Prefers metric units",
            source_episode_ids=sources,
            created_at=created_at,
            importance=importance,
        )

    semantic.store_batch([], [units("alice", ["ep-1", "ep-2"], 1_000, 0.8)], None)
    assert (
        semantic.store_batch(
            [], [units("alice", ["ep-2", "ep-3"], 2_000, 0.4), units("bob", ["ep-9"], 3_000, 0.1)], None
        )
        == 2
    )
    alice = stored("alice")
    assert alice.source_episode_ids == ["ep-1", "ep-2", "ep-3"]
    assert alice.created_at == 1_000 and alice.importance == 0.8
    bob = stored("bob")
    assert bob.source_episode_ids == ["ep-9"] and bob.created_at == 3_000 and bob.importance == 0.1
    semantic.store_batch([], [units("alice", ["ep-4"], 4_000, 0.95)], None)
    alice = stored("alice")
    assert alice.source_episode_ids == ["ep-1", "ep-2", "ep-3", "ep-4"] and alice.importance == 0.95
    assert alice.created_at == 1_000


def test_forgetting_an_episode_removes_its_record_and_index_entries(
    client: TestClient, coordinator: MemoryCoordinator, raw_redis: redis.Redis, key_prefix: str
) -> None:
    seed(coordinator, {"ep-1": ("zebra quartz", NOW_MS), "ep-2": ("zebra violin", NOW_MS)})
    timeline = f"{key_prefix}:u:{{alice}}:episodes:by_time"
    assert raw_redis.zscore(timeline, "ep-1") is not None
    coordinator.semantic.store_batch([], [Memory(id="ep-2", user_id="alice", text="zebra stripes")], None)
    forget = {"kind": "episode", "id": "ep-1"}
    assert client.post("/api/memory/forget", json=forget, headers=user("alice")).status_code == 200
    assert client.post("/api/memory/forget", json=forget, headers=user("alice")).status_code == 404
    assert raw_redis.zscore(timeline, "ep-1") is None  # no trace left in the timeline (before a listing prunes it)
    listed = client.get("/api/memory/episodes", headers=user("alice")).json()["episodes"]
    assert [e["id"] for e in listed] == ["ep-2"]
    assert [r["id"] for r in search(client, "zebra", "bm25")] == ["ep-2"]
    # a memory that shares an episode's id: forgetting it leaves the episode alone
    assert (
        client.post("/api/memory/forget", json={"kind": "memory", "id": "ep-2"}, headers=user("alice")).status_code
        == 200
    )
    assert [e["id"] for e in client.get("/api/memory/episodes", headers=user("alice")).json()["episodes"]] == ["ep-2"]
    assert coordinator.semantic.search("memory", "alice", "zebra", 5, "bm25").results == []
    again = client.post("/api/memory/forget", json={"kind": "memory", "id": "ep-2"}, headers=user("alice"))
    assert again.status_code == 404 and again.json() == {"message": "no memory 'ep-2' for this user"}


def test_forgetting_an_episode_of_which_only_a_turn_is_left_finds_it(
    client: TestClient, coordinator: MemoryCoordinator
) -> None:
    """The record and its index entry gone (expired, pruned) while its one verbatim turn is still
    stored and indexed: forget finds the turn (200) and removes it."""
    ended = talk(client, "tara", "s1", ("user", "I am planning a trip to Oslo in the spring to see the fjords."))
    episode_id = ended["episode"]["id"]
    turns = coordinator.semantic.turns
    assert len(turns.episode_turns("tara", episode_id)) == 1 and f"{episode_id}.t0" in turns.bm25.ids("tara")
    coordinator.episodes.delete("tara", episode_id)
    assert coordinator.semantic.store("episode").delete("tara", episode_id)
    forget = {"kind": "episode", "id": episode_id}
    assert client.post("/api/memory/forget", json=forget, headers=user("tara")).status_code == 200
    assert turns.episode_turns("tara", episode_id) == [] and f"{episode_id}.t0" not in turns.bm25.ids("tara")
    assert client.post("/api/memory/forget", json=forget, headers=user("tara")).status_code == 404


# -- context assembly -----------------------------------------------------------------
def context(client: TestClient, query: str, user_id: str = "alice", **body: object) -> dict:
    response = client.post("/api/memory/context", json={"query": query, **body}, headers=user(user_id))
    assert response.status_code == 200, response.text
    return response.json()


def public_item(item: dict) -> dict:
    """A context item without its provenance keys (timestamp, episodeId, sessionId)."""
    return {k: item[k] for k in ("tier", "id", "text", "relevance")}


def test_context_takes_only_the_profile_lines_that_share_a_word_with_the_query(client: TestClient) -> None:
    profile = {
        "name": "Alice",
        "communication_style": "terse answers",
        "preferences": ["metric units in every recipe"],
        "patterns": ["cooks on sundays"],
        "facts": ["lives in Lyon"],
    }
    assert client.put("/api/memory/profile", json=profile, headers=user("alice")).status_code == 200
    body = context(client, "which units for the recipe", token_budget=8_000)
    assert body["available"] is True
    assert [public_item(i) for i in body["items"]] == [
        {"tier": "profile", "id": "profile-2", "text": "metric units in every recipe", "relevance": 0.9}
    ]
    assert body["items"][0]["episodeId"] is None and body["items"][0]["sessionId"] is None
    assert "### About the user\n- metric units in every recipe" in body["context"]
    assert context(client, "what is the weather like", token_budget=8_000)["items"] == []
    assert context(client, "which units for the recipe", user_id="bob")["items"] == []


MARATHON = (
    "Trained for the Berlin half marathon with interval runs, long tempo runs on Sundays, a taper week "
    "before race day and carbohydrate loading the evening before the start"
)


def test_context_takes_the_session_summary_memories_and_episodes(
    client: TestClient, coordinator: MemoryCoordinator
) -> None:
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message number {i}"} for i in range(31)]
    assert client.post("/api/memory/sessions/s1/turns", json={"turns": turns}, headers=user("alice")).status_code == 200
    seed(coordinator, {"ep-1": (MARATHON, NOW_MS - DAY_MS)})
    memory = Memory(id="mem-1", user_id="alice", text="Runs the Berlin marathon every autumn")
    coordinator.semantic.store_batch([], [memory], coordinator.semantic.embedder.embed([memory.text]))
    query = "Berlin marathon training"
    body = context(client, query, session_id="s1", token_budget=8_000)
    items = {i["id"]: i for i in body["items"]}
    assert set(items) == {"summary-0", "mem-1", "ep-1"}
    assert items["summary-0"]["tier"] == "working" and items["summary-0"]["relevance"] == 0.9
    assert items["summary-0"]["text"].startswith("Summary of earlier conversation: ")
    # the only memory ranks first in both the vector and the keyword list: RRF 2/61, the maximum
    assert items["mem-1"]["tier"] == "semantic" and items["mem-1"]["relevance"] == 1.0
    hits = search(client, query)
    assert items["ep-1"]["tier"] == "episodic" and items["ep-1"]["relevance"] == hits[0]["score"]
    assert items["ep-1"]["episodeId"] == "ep-1" and items["ep-1"]["timestamp"] == NOW_MS - DAY_MS
    assert "- (13 November 2023) Trained for the Berlin half marathon" in body["context"]
    assert body["tokens"] == count_tokens(body["context"])
    # without the session id, or for another user's session id, no working-memory item
    assert "summary-0" not in {i["id"] for i in context(client, query, token_budget=8_000)["items"]}
    assert context(client, query, user_id="bob", session_id="s1")["items"] == []
    small = context(client, query, session_id="s1", token_budget=50)
    assert 0 < small["tokens"] <= 50 and len(small["items"]) < 3


def test_context_defaults_to_800_tokens_and_10_hits_per_tier(coordinator: MemoryCoordinator) -> None:
    # two relevant profile lines: bullets of 398 and 381 tokens; with the header (17) and the title (6)
    # the first fits 800 tokens (421), both need 802
    coordinator.update_profile("alice", ProfileUpdate(preferences=["alpha " * 397, "alpha bravo " * 190]))
    body = coordinator.build_context("alice", "alpha")
    assert body["tokens"] == 421 and [i["id"] for i in body["items"]] == ["profile-0"]
    assert count_tokens(body["context"]) == 421
    assert coordinator.build_context("alice", "alpha", budget_tokens=802)["tokens"] == 802
    assert coordinator.build_context("alice", "alpha", budget_tokens=801)["tokens"] == 421
    words = "quartz violin ocean harbour meadow lantern copper pebble willow cedar maple".split()
    memories = [Memory(id=f"mem-{w}", user_id="bob", text=f"zebra {w}") for w in words]
    coordinator.semantic.store_batch([], memories, None)
    assert len(coordinator.build_context("bob", "zebra")["items"]) == 10
    seed(coordinator, {f"ep-{w}": (f"zebra {w}", NOW_MS) for w in words}, user_id="carol")
    assert len(coordinator.search_episodes("carol", "zebra")) == 10  # search's default limit
    assert len(coordinator.build_context("bob", "zebra", limit=11)["items"]) == 11


def test_context_scales_keyword_only_memory_scores(settings: Settings) -> None:
    coordinator = MemoryCoordinator(settings.with_overrides(search_mode="bm25"))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            memories = [
                Memory(id="mem-1", user_id="alice", text="zebra quartz"),
                Memory(id="mem-2", user_id="alice", text="violin ocean"),
            ]
            coordinator.semantic.store_batch([], memories, None)
            oracle = dict(bm25_oracle({m.id: m.text.split() for m in memories}, ["zebra"]))
            body = context(client, "zebra", token_budget=8_000)
            assert [public_item(i) for i in body["items"]] == [
                {"tier": "semantic", "id": "mem-1", "text": "zebra quartz", "relevance": squash(oracle["mem-1"])}
            ]
    finally:
        coordinator.close()


# -- the embedder's lifecycle and the stores it sizes ---------------------------------
class FlakyEmbedder:
    """Fails its first ``failures`` probes (``dim``), then embeds every text as a fixed 8-d vector."""

    name = "flaky"
    model = "none"

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.built = 0

    @property
    def dim(self) -> int:
        if self.failures > 0:
            self.failures -= 1
            raise OSError("model file missing")
        return 8

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 8), dtype=np.float32)


def test_a_failed_embedder_load_is_retried_after_30_seconds(
    coordinator: MemoryCoordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    flaky = FlakyEmbedder(failures=1)

    def factory() -> FlakyEmbedder:
        flaky.built += 1
        return flaky

    semantic = SemanticMemory(coordinator.connector, coordinator.keys, coordinator.episodes, factory)  # type: ignore[arg-type]
    # README defaults: hybrid search, threshold 0.15, HNSW expansion_search 256 with 1 build thread
    assert semantic.default_mode == "hybrid" and semantic.similarity_threshold == 0.15
    assert semantic.expander is None and semantic.embedder_error is None and flaky.built == 0
    clock = [1_000.0]
    monkeypatch.setattr("agtos.memory.semantic.time.monotonic", lambda: clock[0])
    with pytest.raises(EmbeddingError, match=r"^embedder unavailable: model file missing$"):
        semantic.embedder  # noqa: B018
    assert semantic.embedder_error == "model file missing" and flaky.built == 1
    clock[0] += 29.9
    assert semantic.embedder_available() is False and flaky.built == 1  # not retried within 30 s
    assert semantic.embed_or_none(["a text"]) is None
    assert semantic.store("memory").vectors.dim == 384  # sized for the default model meanwhile
    clock[0] += 0.2
    assert semantic.embedder_available() is True and flaky.built == 2
    assert semantic.embedder is flaky and semantic.embedder_error is None and flaky.built == 2
    assert semantic.embed_or_none([]) is None
    vectors = semantic.embed_or_none(["a", "b"])
    assert vectors is not None and vectors.shape == (2, 8)
    store = semantic.store("episode")
    assert store.vectors.dim == 8 and store.vectors.params.expansion_search == 256 and store.vectors.params.threads == 1
    assert semantic.store("episode") is semantic.store("episode")


def test_stores_take_the_hnsw_settings(settings: Settings) -> None:
    coordinator = MemoryCoordinator(settings.with_overrides(hnsw_ef_search=64, hnsw_build_threads=3))
    try:
        store = coordinator.semantic.store("episode")
        assert store.namespace == "episode" and store.vectors.dim == 384
        assert store.vectors.params.expansion_search == 64 and store.vectors.params.threads == 3
        assert coordinator.semantic.similarity_threshold == 0.15 and coordinator.semantic.default_mode == "hybrid"
    finally:
        coordinator.close()
