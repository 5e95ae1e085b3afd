"""Changing the embedder (``AGTOS_EMBEDDING_PROVIDER``/``_MODEL``) never makes search rank another
embedder's vectors, and ``agtos reindex`` brings the vector hits back.

Through the HTTP app and the CLI, with a local Ollama-style ``/api/embed`` stub serving three toy
models: ``mini-a`` (384-d hashed bag of words, :func:`hash_embedding`), ``mini-b`` (384-d, the same
hashing after a word shuffle: a *different model* of the same dimension, in whose space "piano
Chopin nocturnes" lands exactly where ``mini-a`` put "tomatoes basil garden") and ``wide`` (768-d).
Ten sessions are stored with ``mini-a``; then the app is started again with another model on the
same Redis data. Expected values are literals: the session ids of the topics, the ``/health`` line.

Measured before the fix (2026-12-07): after ``mini-a`` → ``mini-b`` a vector search for "piano Chopin
nocturnes" answered the *garden* session as its top semantic hit; after ``mini-a`` → ``wide`` the
stored episode vectors (384-d float32, 1,536 bytes) were loaded as 768-d float16 garbage (7 of 8 in
the first measurement; the turn vectors skipped) and "marathon running kilometres" answered the
*book* session; ``/health`` said ``ok`` with nothing about it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from agtos.cli import app as cli_app
from agtos.config import EmbeddingConfig, Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.vector_index import VectorIndex
from tests.helpers import delete_prefix, talk, user
from tests.stub_servers import JsonAnswer, JsonPostServer, hash_embedding
from tests.test_redisearch import ft_indexes

ALICE, BOB = "alice", "bob"
TOPICS = {  # session id -> (what the user said, a query that names it)
    "garden": ("I planted tomatoes and basil in the garden behind the house", "tomatoes basil garden"),
    "car": ("My car is a blue Volvo estate bought in Oslo", "blue Volvo car"),
    "piano": ("I practise piano every evening, mostly Chopin nocturnes", "piano Chopin nocturnes"),
    "dog": ("Our dog Rex is a border collie who loves frisbee", "dog border collie frisbee"),
    "job": ("I work as a nurse on the night shift at the hospital", "nurse night shift hospital"),
    "trip": ("Next summer we fly to Lisbon and then take a train to Porto", "Lisbon Porto train"),
    "diet": ("I stopped eating meat and now cook lentil curry a lot", "lentil curry meat"),
    "book": ("I am reading a thriller by Jo Nesbo about a detective", "Nesbo thriller detective"),
    "run": ("I am training for a marathon, running forty kilometres a week", "marathon running kilometres"),
    "flat": ("We are renovating the kitchen with oak cabinets and white tiles", "kitchen oak cabinets tiles"),
}
#: mini-b's word shuffle: its vector of "piano chopin nocturnes" is mini-a's of "tomatoes basil garden"
SHUFFLE = {"piano": "tomatoes", "chopin": "basil", "nocturnes": "garden"}
SHUFFLE |= {v: k for k, v in SHUFFLE.items()}
STALE_A = "vectors of {} made by ollama:mini-a (384-d): run `agtos reindex`"


def mini_b(text: str) -> list[float]:
    return hash_embedding(" ".join(SHUFFLE.get(w, w) for w in re.findall(r"\w+", text.lower())), 384)


def synonyms(text: str) -> str:
    """What every toy model knows: "PostgreSQL" means what "Postgres" does (their entity names dedup by vector)."""
    return re.sub(r"(?i)\bpostgresql\b", "Postgres", text)


MODELS: dict[str, Callable[[str], list[float]]] = {
    "mini-a": lambda text: hash_embedding(synonyms(text), 384),
    "mini-b": lambda text: mini_b(synonyms(text)),
    "wide": lambda text: hash_embedding(synonyms(text), 768),
}


class EmbedServer(JsonPostServer):
    """Ollama's ``POST /api/embed`` on a loopback port, the vectors of the model the request names;
    ``fail_after``: answer HTTP 500 once that many texts were embedded (None: never)."""

    def __init__(self) -> None:
        self.texts = 0
        self.fail_after: int | None = None
        super().__init__(self._answer)

    def _answer(self, path: str, body: dict[str, Any]) -> JsonAnswer:
        failing = self.fail_after is not None and self.texts >= self.fail_after
        self.texts += len(body["input"])
        return 500 if failing else 200, {"embeddings": [MODELS[body["model"]](t) for t in body["input"]]}


@pytest.fixture
def embed_server() -> Iterator[EmbedServer]:
    server = EmbedServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def serve(settings: Settings, embed_server: EmbedServer) -> Iterator[Callable[..., TestClient]]:
    """``serve(model, on=settings)``: the API on the test's Redis data (``on``'s) with the stub's
    ``model`` as its embedder (each call a new process in effect: new mirrors, read from Redis)."""
    opened: list[tuple[MemoryCoordinator, TestClient]] = []

    def start(model: str, on: Settings = settings) -> TestClient:
        embedding = EmbeddingConfig(provider="ollama", model=model, base_url=embed_server.url, breaker_failures=0)
        coordinator = MemoryCoordinator(on.with_overrides(embedding=embedding))
        client = TestClient(create_app(coordinator=coordinator)).__enter__()
        opened.append((coordinator, client))
        return client

    yield start
    for coordinator, client in reversed(opened):
        client.__exit__(None, None, None)
        coordinator.close()


@pytest.fixture
def cli(
    monkeypatch: pytest.MonkeyPatch, settings: Settings, embed_server: EmbedServer, tmp_path: Path
) -> Callable[..., Any]:
    """``cli(model, *args)``: ``agtos *args`` with the stub's ``model`` as the configured embedder."""

    def run(model: str, *args: str) -> Any:
        env = {
            "REDIS_URL": str(settings.redis_url),
            "AGTOS_KEY_PREFIX": settings.key_prefix,
            "AGTOS_DATA_DIR": str(tmp_path / "data"),
            "AGTOS_CONFIG_DIR": str(tmp_path / "cfg"),
            "AGTOS_EMBEDDING_PROVIDER": "ollama",
            "AGTOS_EMBEDDING_MODEL": model,
            "AGTOS_EMBEDDING_BASE_URL": embed_server.url,
            "AGTOS_EMBEDDING_BREAKER_FAILURES": "0",
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return CliRunner().invoke(cli_app, list(args))

    return run


@pytest.fixture
def ft_prefix(redisearch_url: str, key_prefix: str) -> Iterator[str]:
    """The test's namespace on the RediSearch server; its FT indexes and keys dropped afterwards."""
    yield key_prefix
    client = redis.Redis.from_url(redisearch_url)
    for index in ft_indexes(client, key_prefix):
        client.execute_command("FT.DROPINDEX", index)
    delete_prefix(redisearch_url, key_prefix)


def remember(api: TestClient, user_id: str = ALICE, topics: dict[str, tuple[str, str]] = TOPICS) -> None:
    for session_id, (said, _) in topics.items():
        talk(api, user_id, session_id, ("user", said + "."), ("assistant", "Noted."))


def search(api: TestClient, q: str, mode: str, user_id: str = ALICE) -> list[tuple[str, str]]:
    """``(session id, match type)`` of each hit, best first."""
    response = api.get("/api/memory/search", params={"q": q, "limit": 3, "mode": mode}, headers=user(user_id))
    assert response.status_code == 200, response.text
    return [(hit["sessionId"], hit["matchType"]) for hit in response.json()["results"]]


def vector_tops(api: TestClient, user_id: str = ALICE) -> dict[str, str | None]:
    """Each topic's query -> the session of its top vector hit (None: no hit)."""
    tops = {}
    for session_id, (_, q) in TOPICS.items():
        hits = search(api, q, "vector", user_id)
        tops[session_id] = hits[0][0] if hits else None
    return tops


def health(api: TestClient) -> dict[str, Any]:
    response = api.get("/health")
    assert response.status_code == 200, response.text
    return dict(response.json())


def semantic_tier(api: TestClient) -> dict[str, Any]:
    return dict(health(api)["tiers"]["semantic"])


def test_another_model_of_the_same_dimension_never_ranks_the_old_vectors(serve: Callable[[str], TestClient]) -> None:
    remember(serve("mini-a"))
    api = serve("mini-b")
    assert search(api, "piano Chopin nocturnes", "vector") == []  # the old vectors are not mini-b's: no ranking
    assert search(api, "piano Chopin nocturnes", "hybrid") == [("piano", "keyword")]  # found by keyword
    assert health(api)["checks"]["memory-semantic"]["docs"] == 0  # nor held in memory (the episode mirror)
    assert semantic_tier(api)["staleVectors"] == STALE_A.format("1 user")


def test_a_wider_model_never_reads_old_float32_vectors_as_float16(serve: Callable[[str], TestClient]) -> None:
    remember(serve("mini-a"))
    api = serve("wide")
    assert vector_tops(api) == dict.fromkeys(TOPICS)  # 384-d float32 blobs are 768-d float16 by length alone
    assert search(api, "blue Volvo car", "hybrid") == [("car", "keyword")]
    assert health(api)["checks"]["memory-semantic"]["docs"] == 0  # none loaded (7 of 8 were, as garbage)
    assert semantic_tier(api)["staleVectors"] == STALE_A.format("1 user")


def test_new_sessions_after_a_switch_are_found_by_vector_and_old_ones_by_keyword(
    serve: Callable[[str], TestClient],
) -> None:
    old = {k: TOPICS[k] for k in ("garden", "car")}
    remember(serve("mini-a"), topics=old)
    remember(serve("mini-a"), BOB, old)
    api, other = serve("mini-b"), serve("mini-b")
    assert search(other, "piano Chopin nocturnes", "vector") == []  # its mirror loaded before the switch
    remember(api, topics={"piano": TOPICS["piano"]})  # a write of mini-b's vectors: alice's old ones go
    assert search(api, "piano Chopin nocturnes", "vector") == [("piano", "semantic")]  # not the garden
    assert search(other, "piano Chopin nocturnes", "vector") == [("piano", "semantic")]  # reloaded at once
    assert search(api, "tomatoes basil garden", "vector") == []
    assert search(api, "tomatoes basil garden", "hybrid") == [("garden", "keyword")]
    assert semantic_tier(api)["staleVectors"] == STALE_A.format("2 users")  # bob untouched, alice waiting


def test_a_process_still_on_the_old_model_writes_while_a_new_one_serves(serve: Callable[[str], TestClient]) -> None:
    old_process = serve("mini-a")
    remember(old_process, topics={"car": TOPICS["car"]})
    new_process = serve("mini-b")
    assert search(new_process, "blue Volvo car", "vector") == []  # its mirror of alice's vectors: loaded
    remember(old_process, topics={"garden": TOPICS["garden"]})  # mini-a's vectors, read by the new one's sync
    assert search(new_process, "piano Chopin nocturnes", "vector") == []  # not the garden, mini-a's vector
    assert search(old_process, "tomatoes basil garden", "vector") == [("garden", "semantic")]


def test_reindex_brings_the_vector_hits_back_and_is_idempotent(
    serve: Callable[[str], TestClient], cli: Callable[..., Any], embed_server: EmbedServer
) -> None:
    remember(serve("mini-a"))
    remember(serve("mini-a"), BOB, {"car": TOPICS["car"]})
    before = vector_tops(serve("mini-a"))
    assert before == {k: k for k in TOPICS}
    checked = cli("mini-b", "reindex", "--check")
    assert checked.exit_code == 1 and STALE_A.format("2 users") in checked.output
    done = cli("mini-b", "reindex", "--user", ALICE)
    assert done.exit_code == 0, done.output
    assert "reindexed 1 of 1 user(s)" in done.output
    api = serve("mini-b")
    assert vector_tops(api) == before
    assert search(api, "piano Chopin nocturnes", "vector")[0] == ("piano", "semantic")
    assert semantic_tier(api)["staleVectors"] == STALE_A.format("1 user")  # bob's still wait
    assert cli("mini-b", "reindex").exit_code == 0
    embedded = embed_server.texts
    again = cli("mini-b", "reindex")
    assert (again.exit_code, embed_server.texts) == (0, embedded + 1)  # its embedder's dimension probe alone
    assert "every vector was made by the configured embedder" in again.output
    assert "staleVectors" not in semantic_tier(serve("mini-b"))


def test_an_interrupted_reindex_goes_on_where_it_stopped(
    serve: Callable[[str], TestClient], cli: Callable[..., Any], embed_server: EmbedServer
) -> None:
    remember(serve("mini-a"))
    embed_server.texts, embed_server.fail_after = 0, 3  # the embedder fails a few texts in
    stopped = cli("wide", "reindex")
    assert stopped.exit_code == 1 and "run `agtos reindex` again" in stopped.output
    embed_server.fail_after = None
    resumed = cli("wide", "reindex")
    assert resumed.exit_code == 0 and "reindexed 1 of 1 user(s)" in resumed.output  # the rest was left to do
    api = serve("wide")
    assert vector_tops(api) == {k: k for k in TOPICS}
    assert "staleVectors" not in semantic_tier(api)


def test_a_reindex_stopped_between_an_episode_and_its_turns_does_the_turns(
    serve: Callable[[str], TestClient], cli: Callable[..., Any], settings: Settings, raw_redis: redis.Redis
) -> None:
    remember(serve("mini-a"), topics={"garden": TOPICS["garden"]})
    assert cli("wide", "reindex").exit_code == 0
    [turns] = raw_redis.keys(f"{settings.key_prefix}:*:turn:_idx:vec:data")
    [meta] = raw_redis.keys(f"{settings.key_prefix}:*:turn:_idx:vec:meta")
    units = sorted(raw_redis.hkeys(turns))
    assert len(units) == 2  # the user's turn and the assistant's
    raw_redis.hdel(turns, units[0])  # as a reindex stopped after the episode's vector left it
    raw_redis.hset(meta, "reindex", "ollama:mini-a|384")
    assert cli("wide", "reindex").exit_code == 0
    assert sorted(raw_redis.hkeys(turns)) == units


def test_vectors_written_before_spaces_were_recorded_stay_searchable(
    serve: Callable[[str], TestClient], settings: Settings, raw_redis: redis.Redis
) -> None:
    remember(serve("mini-a"))
    for key in raw_redis.scan_iter(match=f"{settings.key_prefix}:*vec:meta"):  # as an older version left them
        raw_redis.hdel(key, "space", "dtype")
    raw_redis.delete(f"{settings.key_prefix}:meta:vector_legacy_embedder")
    api = serve("mini-a")  # the first process of this version: its embedder made them
    assert vector_tops(api) == {k: k for k in TOPICS}
    assert "staleVectors" not in semantic_tier(api)
    other = serve("mini-b")
    assert search(other, "piano Chopin nocturnes", "vector") == []  # mini-a's, not mini-b's: never ranked
    assert semantic_tier(other)["staleVectors"] == STALE_A.format("1 user")


def test_stored_vectors_are_read_only_by_their_own_embedder(settings: Settings) -> None:
    """An edit that keeps a memory's text keeps its stored vector (``VectorIndex.vectors``): never one
    another embedder made (the edit would write it back under the new embedder's name)."""
    connector = RedisConnector(settings.redis_url, settings.data_dir)
    try:
        keys = GlobalKeys(settings.key_prefix)
        made_by_a = VectorIndex(connector, keys, "memory", 4, identity="ollama:mini-a")
        made_by_a.add(ALICE, "m1", [1.0, 0.0, 0.0, 0.0])
        assert made_by_a.vectors(ALICE, ["m1"])["m1"].tolist() == [1.0, 0.0, 0.0, 0.0]
        assert VectorIndex(connector, keys, "memory", 4, identity="ollama:mini-b").vectors(ALICE, ["m1"]) == {}
    finally:
        connector.close()


def test_redisearch_never_ranks_another_embedders_vectors(
    serve: Callable[..., TestClient], redisearch_url: str, ft_prefix: str, tmp_path: Path
) -> None:
    on = Settings(redis_url=redisearch_url, key_prefix=ft_prefix, data_dir=tmp_path / "d", config_dir=tmp_path / "c")
    remember(serve("mini-a", on), topics={k: TOPICS[k] for k in ("garden", "car")})
    api = serve("mini-b", on)
    assert semantic_tier(api)["staleVectors"] == STALE_A.format("1 user")
    assert search(api, "piano Chopin nocturnes", "vector") == []  # the FT index holds mini-a's vectors
    remember(api, topics={"piano": TOPICS["piano"]})  # the switch drops that FT index with its documents
    assert search(api, "piano Chopin nocturnes", "vector") == [("piano", "semantic")]
    assert search(serve("mini-b", on), "blue Volvo car", "hybrid") == [("car", "keyword")]


# -- entity-name vectors and the search's signal (issue 15, a4) --------------------------------------
#: two sessions naming one database two ways: no alias joins them, the toy models' vectors do
POSTGRES = ("We store all our analytics data in Postgres.", "We moved the analytics warehouse to PostgreSQL last year.")
#: a search's ``degraded`` while some of the user's records wait for ``agtos reindex``
STALE_SEARCH = "embedder changed: records not yet reindexed match by keyword only (run `agtos reindex`)"


def databases(api: TestClient) -> list[tuple[str, list[str], int]]:
    """``(name, aliases, episodes)`` of alice's entities named like Postgres."""
    response = api.get("/api/entities", params={"limit": 100, "type": "thing"}, headers=user(ALICE))
    assert response.status_code == 200, response.text
    found = response.json()["entities"]
    return [(e["name"], e["aliases"], e["episodeCount"]) for e in found if "postgres" in e["name"].lower()]


def test_reindex_embeds_entity_names_again_so_they_dedup_by_vector(
    serve: Callable[[str], TestClient], cli: Callable[..., Any]
) -> None:
    talk(serve("mini-a"), ALICE, "pg1", ("user", POSTGRES[0]), ("assistant", "Noted."))
    assert cli("wide", "reindex").exit_code == 0
    api = serve("wide")
    talk(api, ALICE, "pg2", ("user", POSTGRES[1]), ("assistant", "Noted."))
    assert databases(api) == [("Postgres", ["PostgreSQL"], 2)]  # not a second entity: the old name was re-embedded
    assert cli("wide", "reindex", "--check").exit_code == 0


def test_check_counts_entity_vectors_an_old_process_wrote(
    serve: Callable[[str], TestClient], cli: Callable[..., Any]
) -> None:
    old = serve("mini-a")
    talk(old, ALICE, "pg1", ("user", POSTGRES[0]), ("assistant", "Noted."))
    checked = cli("wide", "reindex", "--check")
    assert checked.exit_code == 1, checked.output
    assert "users waiting per index: entity 1, episode 1, memory 1, turn 1" in checked.output
    assert cli("wide", "reindex").exit_code == 0
    [(name, _, _)] = databases(old)
    entity_id = next(
        e["id"] for e in old.get("/api/entities", headers=user(ALICE)).json()["entities"] if e["name"] == name
    )
    renamed = old.put(f"/api/entities/{entity_id}", json={"name": "Postgres DB"}, headers=user(ALICE))
    assert renamed.status_code == 200, renamed.text  # the process still on mini-a writes its name vector
    checked = cli("wide", "reindex", "--check")
    assert checked.exit_code == 1, checked.output
    assert STALE_A.format("1 user") in checked.output and "users waiting per index: entity 1" in checked.output
    assert cli("wide", "reindex").exit_code == 0
    assert cli("wide", "reindex", "--check").exit_code == 0


def degraded(api: TestClient, q: str, mode: str = "hybrid") -> str | None:
    """The ``degraded`` of alice's search, context and ask for ``q`` (all three must agree)."""
    found = api.get("/api/memory/search", params={"q": q, "mode": mode}, headers=user(ALICE))
    assert found.status_code == 200, found.text
    if mode != "hybrid":
        return found.json()["degraded"]  # type: ignore[no-any-return]
    context = api.post("/api/memory/context", json={"query": q}, headers=user(ALICE))
    asked = api.post("/api/memory/ask", json={"question": q}, headers=user(ALICE))
    assert (context.status_code, asked.status_code) == (200, 200), (context.text, asked.text)
    said = {found.json()["degraded"], context.json()["degraded"], asked.json()["degraded"]}
    assert len(said) == 1, said
    return said.pop()


def test_search_context_and_ask_say_when_older_records_match_by_keyword_only(
    serve: Callable[[str], TestClient], cli: Callable[..., Any], embed_server: EmbedServer
) -> None:
    remember(serve("mini-a"), topics={k: TOPICS[k] for k in ("garden", "car")})
    assert degraded(serve("mini-a"), "tomatoes basil garden") is None
    api = serve("mini-b")
    before = embed_server.texts
    assert degraded(api, "tomatoes basil garden") == STALE_SEARCH
    assert embed_server.texts - before > 2  # the queries (2), then /ask scored its evidence with it: the embedder is up
    assert degraded(api, "tomatoes basil garden", "vector") == STALE_SEARCH
    assert degraded(api, "tomatoes basil garden", "bm25") is None  # keyword search was asked for
    remember(api, topics={"piano": TOPICS["piano"]})  # mini-b's vectors replace the old: still mixed
    assert degraded(api, "piano Chopin nocturnes") == STALE_SEARCH
    assert degraded(api, "tomatoes basil garden", "vector") == STALE_SEARCH
    assert cli("mini-b", "reindex").exit_code == 0
    assert degraded(api, "tomatoes basil garden") is None  # the same process: read at each search
    assert search(api, "tomatoes basil garden", "vector")[0] == ("garden", "semantic")
