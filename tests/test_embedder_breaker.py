"""Issue 15 leftovers: a remote embedder that stops answering must not hold searches.

An Ollama-style embedder served by a local stub that can be switched to accept requests and never
answer (a hung model server). Through the HTTP API: a search answers 200 within the query bound
(``AGTOS_EMBEDDING_QUERY_TIMEOUT_S``) from the keyword index, its hits marked ``keyword``; after
``AGTOS_EMBEDDING_BREAKER_FAILURES`` silent calls the breaker opens and later searches do not call the
service at all (``/health`` says degraded); a session ended meanwhile is stored and found by keyword;
once the stub answers again, the first search after the cool-down brings the vector hits back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agtos.config import EmbeddingConfig, Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.providers.embeddings import EmbeddingError, OllamaEmbedder
from agtos.serving.app import create_app
from tests.helpers import talk, user
from tests.stub_servers import JsonAnswer, JsonPostServer, hash_embedding

QUERY_TIMEOUT_S = 1.0
COOLDOWN_S = 3.0
SLACK_S = 1.5  # a search's own work on a shared 2-core box, on top of the embedder's bound
ALICE = "alice"


class HangableEmbedServer(JsonPostServer):
    """Ollama's ``POST /api/embed`` (hashed bag-of-words vectors, :func:`hash_embedding`) on a random
    loopback port; after :meth:`hang`, every request is read and never answered until :meth:`answer`
    or :meth:`close`."""

    def __init__(self) -> None:
        self.hanging = threading.Event()
        self.released = threading.Event()
        self.requests = 0
        self.delay_s = 0.0  # before each answer
        self._lock = threading.Lock()
        super().__init__(self._answer)

    def _answer(self, path: str, body: dict[str, Any]) -> JsonAnswer:
        with self._lock:
            self.requests += 1
        if self.hanging.is_set():
            self.released.wait()  # accepted, read, never answered
            return None
        time.sleep(self.delay_s)
        return 200, {"model": body["model"], "embeddings": [hash_embedding(text) for text in body["input"]]}

    def hang(self) -> None:
        self.released.clear()
        self.hanging.set()

    def answer(self) -> None:
        self.hanging.clear()
        self.released.set()

    def close(self) -> None:
        self.answer()
        super().close()


@pytest.fixture
def embed_server() -> Iterator[HangableEmbedServer]:
    server = HangableEmbedServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def api(settings: Settings, embed_server: HangableEmbedServer) -> Iterator[TestClient]:
    """The API with the stub as its Ollama embedder: queries wait 1 s, 2 silent calls open the breaker for 3 s."""
    embedding = EmbeddingConfig(
        provider="ollama",
        model="in-house",
        base_url=embed_server.url,
        query_timeout_s=QUERY_TIMEOUT_S,
        breaker_cooldown_s=COOLDOWN_S,
    )
    coordinator = MemoryCoordinator(settings.with_overrides(embedding=embedding))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            yield client
    finally:
        coordinator.close()


def search(api: TestClient, q: str) -> tuple[float, dict[str, Any]]:
    """Seconds the search took and its body (asserting a 200)."""
    started = time.monotonic()
    response = api.get("/api/memory/search", params={"q": q, "limit": 5}, headers=user(ALICE))
    took = time.monotonic() - started
    assert response.status_code == 200, response.text
    return took, response.json()


def match_types(body: dict[str, Any]) -> set[str]:
    return {hit["matchType"] for hit in body["results"]}


def remember_the_garden(api: TestClient) -> None:
    talk(
        api,
        ALICE,
        "garden",
        ("user", "I planted tomatoes and basil in the garden behind the house this spring."),
        ("assistant", "Tomatoes and basil grow well together in a sunny garden."),
    )


def open_the_breaker(api: TestClient, embed_server: HangableEmbedServer) -> None:
    """Two searches the silent stub holds for the query bound each: the breaker's threshold (2)."""
    embed_server.hang()
    for q in ("tomatoes in the garden", "basil this spring"):
        took, body = search(api, q)
        assert QUERY_TIMEOUT_S * 0.9 <= took < QUERY_TIMEOUT_S + SLACK_S, took  # it did wait for the service
        assert body["count"] >= 1 and match_types(body) == {"keyword"}, body


def test_a_search_answers_within_the_query_bound_from_the_keyword_index(
    api: TestClient, embed_server: HangableEmbedServer
) -> None:
    remember_the_garden(api)
    _, answered = search(api, "what did I plant in the garden")
    assert answered["count"] == 1 and match_types(answered) == {"hybrid"}  # vector and keyword evidence
    assert answered["degraded"] is None
    embed_server.hang()
    took, body = search(api, "basil and tomatoes")  # not cached: it asks the silent service
    assert took < QUERY_TIMEOUT_S + SLACK_S, f"search held {took:.1f} s by a silent embedder"
    assert [hit["sessionId"] for hit in body["results"]] == ["garden"]
    assert match_types(body) == {"keyword"}  # found by keyword only: the vector side is missing
    assert body["available"] is True
    assert body["degraded"] == "embedder unavailable: keyword search only"  # the reply says so, and no URL


def test_the_open_breaker_fails_searches_fast_and_health_says_degraded(
    api: TestClient, embed_server: HangableEmbedServer
) -> None:
    remember_the_garden(api)
    open_the_breaker(api, embed_server)
    asked = embed_server.requests
    queries = [f"garden question number {i}" for i in range(8)]
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda q: search(api, q), queries))
    took = time.monotonic() - started
    assert embed_server.requests == asked  # none of them waited on the service
    assert took < QUERY_TIMEOUT_S + SLACK_S, f"8 concurrent searches took {took:.2f} s with the breaker open"
    assert all(match_types(body) == {"keyword"} and body["count"] == 1 for _, body in results)
    health = api.get("/health").json()
    assert health["status"] == "degraded" and "semantic" in health["degraded"]
    assert health["tiers"]["semantic"]["degradedTo"] == "keyword search (embedder unavailable)"
    assert health["tiers"]["semantic"]["searchMode"] == "bm25"
    context = api.post(
        "/api/memory/context", json={"query": "what grows in my garden?", "token_budget": 200}, headers=user(ALICE)
    )
    assert context.status_code == 200, context.text
    assert "basil" in context.json()["context"]  # the keyword evidence still fills it
    assert context.json()["degraded"] == "embedder unavailable: keyword search only"


def test_a_session_ended_while_open_is_stored_and_found_by_keyword(
    api: TestClient, embed_server: HangableEmbedServer
) -> None:
    remember_the_garden(api)
    open_the_breaker(api, embed_server)
    started = time.monotonic()
    talk(api, ALICE, "bikes", ("user", "My bicycle has a flat tyre, I need a new inner tube."))
    assert time.monotonic() - started < QUERY_TIMEOUT_S + SLACK_S  # its embedding failed fast
    _, body = search(api, "bicycle inner tube")
    assert [hit["sessionId"] for hit in body["results"]] == ["bikes"]
    episodes = api.get("/api/memory/episodes", headers=user(ALICE)).json()
    assert episodes["count"] == 2


def test_the_breaker_closes_after_the_cool_down_and_vector_hits_come_back(
    api: TestClient, embed_server: HangableEmbedServer
) -> None:
    remember_the_garden(api)
    open_the_breaker(api, embed_server)
    embed_server.answer()
    asked = embed_server.requests
    _, body = search(api, "vegetables I grow at home")  # within the cool-down: not asked yet
    assert embed_server.requests == asked
    time.sleep(COOLDOWN_S)
    _, body = search(api, "tomatoes basil garden")  # the trial call: answered, the breaker closes
    assert embed_server.requests == asked + 1
    assert match_types(body) == {"hybrid"} and body["degraded"] is None
    embed_server.delay_s = 0.3  # closed: calls in flight together all go out
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda i: search(api, f"spring garden planting {i}"), range(4)))
    assert embed_server.requests == asked + 5
    assert all(match_types(body) == {"hybrid"} for _, body in results)
    context = api.post("/api/memory/context", json={"query": "my garden", "token_budget": 200}, headers=user(ALICE))
    assert context.json()["degraded"] is None


def test_after_the_cool_down_one_trial_call_goes_out_and_the_rest_fail_fast(
    api: TestClient, embed_server: HangableEmbedServer
) -> None:
    remember_the_garden(api)
    open_the_breaker(api, embed_server)
    time.sleep(COOLDOWN_S)
    asked = embed_server.requests
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda i: search(api, f"garden trial question {i}"), range(6)))
    assert embed_server.requests == asked + 1  # one trial, still silent (the others did not wait): it opens again
    assert max(took for took, _ in results) >= QUERY_TIMEOUT_S * 0.9  # the trial's search waited the bound
    assert all(match_types(body) == {"keyword"} for _, body in results)
    embed_server.answer()
    time.sleep(COOLDOWN_S)  # the failed trial opened it again: the next trial, answered, closes it
    assert match_types(search(api, "garden after the outage")[1]) == {"hybrid"}


def test_an_embedder_silent_from_the_start_costs_one_query_bound(
    api: TestClient, embed_server: HangableEmbedServer
) -> None:
    """Its dimension probe (the first use) waits the query bound, not the batch timeout (30 s)."""
    embed_server.hang()
    started = time.monotonic()
    remember_the_garden(api)  # stored for keyword search only (the models' first load included)
    assert time.monotonic() - started < 10.0
    took, body = search(api, "tomatoes and basil")
    assert took < SLACK_S  # the embedder is known to be unavailable: not asked again
    assert [hit["sessionId"] for hit in body["results"]] == ["garden"]


def test_batches_keep_the_long_timeout_and_a_query_the_short_one(embed_server: HangableEmbedServer) -> None:
    embedder = OllamaEmbedder(
        "in-house", embed_server.url, timeout_s=2.5, query_timeout_s=0.5, breaker_failures=0
    )  # breaker off: every call waits for the service
    assert embedder.embed_one("warm").shape == (64,)
    embed_server.hang()
    for call, bound in ((lambda: embedder.embed_one("a question"), 0.5), (lambda: embedder.embed(["a", "b"]), 2.5)):
        started = time.monotonic()
        with pytest.raises(EmbeddingError, match=f"no answer within {bound:g} s"):
            call()
        assert bound * 0.9 <= time.monotonic() - started < bound + 1.0


def test_the_bounds_and_the_breaker_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "AGTOS_EMBEDDING_QUERY_TIMEOUT_S",
        "AGTOS_EMBEDDING_BREAKER_FAILURES",
        "AGTOS_EMBEDDING_BREAKER_COOLDOWN_S",
    ):
        monkeypatch.delenv(name, raising=False)
    defaults = EmbeddingConfig.from_env()
    assert (defaults.query_timeout_s, defaults.breaker_failures, defaults.breaker_cooldown_s) == (2.0, 2, 10.0)
    monkeypatch.setenv("AGTOS_EMBEDDING_QUERY_TIMEOUT_S", "0.5")
    monkeypatch.setenv("AGTOS_EMBEDDING_BREAKER_FAILURES", "0")
    monkeypatch.setenv("AGTOS_EMBEDDING_BREAKER_COOLDOWN_S", "45")
    read = Settings.from_env().embedding
    assert (read.query_timeout_s, read.breaker_failures, read.breaker_cooldown_s) == (0.5, 0, 45.0)
    monkeypatch.setenv("AGTOS_EMBEDDING_QUERY_TIMEOUT_S", "0")
    with pytest.raises(ValueError, match="AGTOS_EMBEDDING_QUERY_TIMEOUT_S must be > 0, not '0'"):
        EmbeddingConfig.from_env()
