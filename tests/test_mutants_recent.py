"""Issue 20: mutants of last session's modules that the tests of that session let live.

The pending-vector repair (:mod:`agtos.storage.pending_vectors`, :mod:`agtos.memory.vector_repair`),
the remote embedder's circuit breaker and query bound (c078548, 0112118) and the ISO 8601 times
(4643fd3); docs/testing.md lists the run. Through the HTTP API where the behaviour shows there, real
Redis, the bundled ONNX model as the embedder that is back and a failing one swapped in
(:class:`tests.test_pending_vectors.SwitchableEmbedder`) or the hangable Ollama stub of
:mod:`tests.test_embedder_breaker`; expected values are literals.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator

import numpy as np
import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory import vector_repair
from agtos.memory.coordinator import MemoryCoordinator
from agtos.providers.embedding_base import CircuitBreaker, EmbeddingCircuitOpen, EmbeddingError
from agtos.providers.http_embedders import OllamaEmbedder
from agtos.serving.app import create_app
from agtos.storage.keys import GlobalKeys
from agtos.storage.pending_vectors import PendingVectors
from agtos.storage.redis_conn import RedisConnector, as_text
from tests.helpers import run_maintenance, talk, user
from tests.stub_servers import StubModelServer
from tests.test_embedder_breaker import HangableEmbedServer
from tests.test_health_secrets import closed_port
from tests.test_pending_vectors import SwitchableEmbedder, pending, swap_embedder, sweep_settings

Api = tuple[TestClient, SwitchableEmbedder, MemoryCoordinator]


class NoEntities:
    """A recognizer that finds no entity: the records counted here are the repair's alone (entity names
    stored while down wait too: tests/test_entity_vector_repair.py)."""

    name = "none"

    def recognize_many(self, texts: list[str]) -> list[list[object]]:
        return [[] for _ in texts]


@pytest.fixture
def api(settings: Settings) -> Iterator[Api]:
    coordinator = MemoryCoordinator(sweep_settings(settings))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            coordinator.services.recognizer = NoEntities()
            yield client, swap_embedder(coordinator), coordinator
    finally:
        coordinator.close()


def post_memory(client: TestClient, who: str, text: str) -> str:
    response = client.post("/api/memory/memories", json={"text": text}, headers=user(who))
    assert response.status_code == 201, response.text
    return str(response.json()["memory"]["id"])


def vanish(coordinator: MemoryCoordinator, who: str, memory_id: str) -> None:
    """The memory's record gone as if it had expired: its note stays, the fill finds it gone (a delete
    drops the note with the record: tests/test_forget_pending_vectors.py)."""
    rt = coordinator.services
    assert rt.connector.run(lambda r: r.delete(rt.keys.user(who).record("memory", memory_id))) == 1


ANA_TEXTS = (
    "My sister Ana moved to Lisbon last spring.",
    "I planted tomatoes and basil in the garden.",
    "My bicycle needs a new inner tube.",
)
BEA_TEXTS = ("Bea plays the cello on Fridays.", "Bea is allergic to peanuts.")


def two_users_waiting(client: TestClient, switch: SwitchableEmbedder, coordinator: MemoryCoordinator) -> None:
    """Ana: 3 memories stored while the embedder was down, one gone since; Bea: 2, one gone."""
    switch.down = True
    ana = [post_memory(client, "ana", text) for text in ANA_TEXTS]
    bea = [post_memory(client, "bea", text) for text in BEA_TEXTS]
    vanish(coordinator, "ana", ana[0])
    vanish(coordinator, "bea", bea[0])
    assert pending(client) == 5  # a vanished record stays noted: the fill finds it gone


def test_a_fill_after_ingestion_adds_up_its_users(api: Api) -> None:
    """:func:`vector_repair.fill_pending` (after an ingestion, any users) reports every user's records
    together: 3 filled and 2 gone over two users, not the last user's alone."""
    client, switch, coordinator = api
    two_users_waiting(client, switch, coordinator)
    switch.down = False
    report = vector_repair.fill_pending(coordinator.services)
    assert (report.filled, report.skipped, report.error) == (3, 2, None)
    assert pending(client) == 0


def test_a_fill_after_ingestion_stops_at_the_first_failure(api: Api) -> None:
    """An embedder that fails the fill is not asked again for the next user (each could wait its
    timeout after a job): one failed call, the error reported, every record still waiting."""
    client, switch, coordinator = api
    two_users_waiting(client, switch, coordinator)
    calls: list[int] = []
    down_embed = switch.embed

    def counted(texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        return down_embed(texts)

    switch.embed = counted  # type: ignore[method-assign]
    report = vector_repair.fill_pending(coordinator.services)
    assert (report.filled, report.skipped, report.error) == (0, 0, "embedder unavailable")
    assert len(calls) == 1
    assert pending(client) == 5


def test_a_fill_takes_as_many_texts_as_the_bound_allows(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """``FILL_TEXTS`` texts per embedding call, not one fewer: 3 memories with a bound of 2 are 2 calls
    (2 texts, then 1), not 3."""
    client, switch, _ = api
    switch.down = True
    for text in ANA_TEXTS:
        post_memory(client, "ana", text)
    monkeypatch.setattr(vector_repair, "FILL_TEXTS", 2)
    switch.down = False
    switch.sizes.clear()
    run = run_maintenance(client, "ana")
    assert run["report"]["summary"]["vectorsFilled"] == {"filled": 3, "gone": 0, "error": None}
    assert switch.sizes == [2, 1]
    assert pending(client) == 0


class ManualClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def refused(breaker: CircuitBreaker) -> str:
    with pytest.raises(EmbeddingCircuitOpen) as caught:
        breaker.allow()
    return str(caught.value)


def test_the_breaker_opens_at_its_threshold_for_its_cool_down_then_lets_one_trial_through(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """2 failures in a row open it for 10 s (to the end of the cool-down exactly), then one trial call:
    a failed trial opens it for another 10 s (logged once, at the first opening), an answer closes it."""
    caplog.set_level(logging.WARNING, logger="agtos.providers.embedding_base")
    clock = ManualClock(100.0)
    breaker = CircuitBreaker("stub", failures=2, cooldown_s=10.0, clock=clock)
    assert breaker.state == "closed"
    breaker.allow()
    breaker.failed()
    breaker.allow()  # one failure: still closed
    assert breaker.state == "closed"
    breaker.failed()
    assert breaker.state == "open"
    opened = "stub embedder failed 2 time(s) in a row: calls fail at once, retried every 10 s"
    assert [r.getMessage() for r in caplog.records] == [opened]  # when it opens, not later
    assert refused(breaker) == "stub embedder did not answer just now; retrying in 10.0 s"
    clock.now = 109.5
    assert refused(breaker) == "stub embedder did not answer just now; retrying in 0.5 s"
    clock.now = 110.0  # the cool-down's end: half-open
    assert breaker.state == "half-open"
    breaker.allow()  # the trial
    assert refused(breaker) == "stub embedder did not answer just now; a retry is in flight"
    breaker.failed()  # the trial failed: another cool-down from now
    assert breaker.state == "open"
    assert refused(breaker) == "stub embedder did not answer just now; retrying in 10.0 s"
    clock.now = 120.0
    breaker.allow()
    breaker.succeeded()
    assert breaker.state == "closed"
    breaker.failed()  # the count started again: one failure does not open it
    breaker.allow()
    breaker.allow()
    assert [r.getMessage() for r in caplog.records] == [opened, "stub embedder answers again: circuit closed"]


def test_a_breaker_of_threshold_one_opens_at_once_and_of_zero_never() -> None:
    clock = ManualClock(5.0)
    one = CircuitBreaker("one", failures=1, cooldown_s=2.5, clock=clock)
    one.failed()
    assert one.state == "open"
    assert refused(one) == "one embedder did not answer just now; retrying in 2.5 s"
    off = CircuitBreaker("off", failures=0, cooldown_s=2.5, clock=clock)
    for _ in range(5):
        off.allow()
        off.failed()
    assert off.state == "closed"
    off.allow()
    off.succeeded()  # closing a closed breaker says nothing and changes nothing
    assert off.state == "closed"


def vector_ids(raw: redis.Redis, prefix: str, who: str, namespace: str) -> set[str]:
    return {as_text(k) for k in raw.hkeys(f"{prefix}:u:{{{who}}}:{namespace}:_idx:vec:data")}


def test_a_kept_agent_response_an_episode_without_turns_is_filled(
    api: Api, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """Query-as-ingest keeps an agent response as an episode with no stored turns: the fill embeds
    its text (alongside a session's episode, which brings its turns)."""
    client, switch, _ = api
    switch.down = True
    kept = client.post(
        "/api/memory/responses",
        json={
            "session_id": "q1",
            "response": "In summary, after comparing the options the team should use Redis for the session cache.",
            "tool_calls": 5,
        },
        headers=user("ana"),
    )
    assert kept.status_code == 200 and kept.json()["ingest"] is True, kept.text
    episode_id = kept.json()["episode"]["id"]
    switch.down = False
    assert pending(client) == 1
    run = run_maintenance(client, "ana")
    assert run["report"]["summary"]["vectorsFilled"] == {"filled": 1, "gone": 0, "error": None}, run
    assert vector_ids(raw_redis, key_prefix, "ana", "episode") == {episode_id}
    assert vector_ids(raw_redis, key_prefix, "ana", "turn") == set()


LONG_TURN = " ".join(
    f"On day {n} I walked along the river in Lisbon with my sister and we talked about her new job." for n in range(15)
)  # 300-odd tokens: two windows of the embedder's 254, overlapping


def test_a_long_turn_gets_a_vector_per_window(api: Api, raw_redis: redis.Redis, key_prefix: str) -> None:
    """Each window of a long turn has its own doc id (``.c1`` after the first), as ingestion writes it."""
    client, switch, _ = api
    switch.down = True
    ended = talk(
        client,
        "ana",
        "long",
        ("user", LONG_TURN),
        ("assistant", "She sounds happy there."),
        ("user", "She starts at the museum next Monday."),
    )
    assert ended["saved"] is True, ended
    switch.down = False
    run = run_maintenance(client, "ana")
    assert run["report"]["summary"]["vectorsFilled"]["error"] is None, run
    (episode_id,) = vector_ids(raw_redis, key_prefix, "ana", "episode")
    assert vector_ids(raw_redis, key_prefix, "ana", "turn") == {
        f"{episode_id}.t0",
        f"{episode_id}.t0.c1",
        f"{episode_id}.t1",
        f"{episode_id}.t2",
    }


def test_a_fill_of_one_user_stops_at_its_bound(api: Api) -> None:
    """:func:`vector_repair.fill_user` fills at most ``max_records``: 2 of Ana's 3, the third waits (not
    the whole set in one more batch)."""
    client, switch, coordinator = api
    switch.down = True
    for text in ANA_TEXTS:
        post_memory(client, "ana", text)
    switch.down = False
    report = vector_repair.fill_user(coordinator.services, "ana", 2)
    assert (report.filled, report.skipped, report.error) == (2, 0, None)
    assert pending(client) == 1


def test_records_gone_are_counted_over_every_batch(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """3 memories gone since they were noted, 2 records per batch: the sweep says 3 gone, not the
    last batch's 1."""
    client, switch, coordinator = api
    switch.down = True
    for text in ANA_TEXTS:
        vanish(coordinator, "ana", post_memory(client, "ana", text))
    switch.down = False
    monkeypatch.setattr(vector_repair, "FILL_BATCH", 2)
    run = run_maintenance(client, "ana")
    assert run["report"]["summary"]["vectorsFilled"] == {"filled": 0, "gone": 3, "error": None}
    assert pending(client) == 0


def test_a_fill_that_fails_logs_why(api: Api, caplog: pytest.LogCaptureFixture) -> None:
    client, switch, _ = api
    switch.down = True
    for text in ANA_TEXTS[:2]:
        post_memory(client, "ana", text)
    caplog.set_level(logging.WARNING, logger="agtos.memory.vector_repair")
    run = run_maintenance(client, "ana")
    assert run["report"]["summary"]["vectorsFilled"] == {"filled": 0, "gone": 0, "error": "embedder unavailable"}
    assert [r.getMessage() for r in caplog.records if r.name == "agtos.memory.vector_repair"] == [
        "pending vectors of 2 records not filled: test embedder is down"
    ]


def test_records_dropped_beyond_the_limit_are_logged(settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="agtos.storage.pending_vectors")
    pending_set = PendingVectors(
        RedisConnector(settings.redis_url, settings.data_dir), GlobalKeys(settings.key_prefix), limit=3
    )
    assert pending_set.add("ana", [("memory", "m-1"), ("memory", "m-2")], at_ms=1_000) == 0
    assert pending_set.add("ana", [("memory", "m-3"), ("memory", "m-4"), ("memory", "m-5")], at_ms=2_000) == 2
    assert [r.getMessage() for r in caplog.records] == [
        "2 records of one user dropped from the pending vectors (limit 3)"
    ]
    assert pending_set.clear("ana", []) == 3  # nothing cleared: how many are left


class NotedMeanwhile(redis.Redis):
    """A Redis client on which another process notes a record (``note``: key, {member: score}) right
    after this one's next SREM: the moment between a fill's clearing script and its ZCARD."""

    note: tuple[str, dict[str, int]] | None = None

    def srem(self, name: str, *values: object) -> object:  # type: ignore[override]
        removed = super().srem(name, *values)  # type: ignore[arg-type]
        if self.note is not None:
            key, mapping = self.note
            self.note = None
            super().zadd(key, mapping)
        return removed


def test_a_user_noted_again_while_cleared_stays_listed(settings: Settings) -> None:
    """Ana's last pending record is cleared (none left) and another process notes a new one before
    the user leaves the global list: she is listed again, so a fill finds her."""
    connector = RedisConnector(settings.redis_url, settings.data_dir)
    pending_set = PendingVectors(connector, GlobalKeys(settings.key_prefix))
    pending_set.add("ana", [("memory", "m-1")], at_ms=1_000)
    noted = pending_set.oldest("ana", 10)
    client = NotedMeanwhile(connection_pool=redis.ConnectionPool.from_url(str(settings.redis_url)))
    client.note = (pending_set.key("ana"), {"memory:m-2": 2_000})
    connector._client = client
    assert pending_set.clear("ana", noted) == 0  # none left when the script ran
    assert client.note is None  # the other process did note m-2 meanwhile
    assert pending_set.users(10) == ["ana"]
    assert [r.member for r in pending_set.oldest("ana", 10)] == ["memory:m-2"]


def test_an_unreadable_time_is_refused_with_the_forms_it_may_take(client: TestClient) -> None:
    refused = client.post(
        "/api/memory/sessions/s1/turns",
        json={"turns": [{"role": "user", "content": "Hello there.", "timestamp": "yesterday at noon"}]},
        headers=user("ana"),
    )
    assert refused.status_code == 422, refused.text
    (error,) = refused.json()["errors"]
    assert error["field"] == "turns.0.timestamp"
    assert "expected ms since the epoch or an ISO 8601 date-time such as 2023-05-08T18:00:00Z" in error["message"]


def test_a_query_never_waits_longer_than_the_batch_timeout() -> None:
    """``AGTOS_EMBEDDING_TIMEOUT_S`` below the query bound (2 s by default) bounds queries too: a silent
    service holds a query 0.5 s, not 2 s."""
    server = HangableEmbedServer()
    try:
        embedder = OllamaEmbedder("in-house", server.url, timeout_s=0.5, query_timeout_s=2.0, breaker_failures=0)
        server.hang()
        started = time.monotonic()
        with pytest.raises(EmbeddingError, match=r"no answer within 0\.5 s"):
            embedder.embed_one("a question")
        assert time.monotonic() - started < 1.5
    finally:
        server.close()


def test_an_open_breaker_names_its_embedder() -> None:
    """The error a caller logs while the breaker is open says which embedder (a refused connection
    here: the breaker of threshold 1 opens at the first failure)."""
    embedder = OllamaEmbedder(
        "in-house", f"http://127.0.0.1:{closed_port()}", breaker_failures=1, breaker_cooldown_s=30.0
    )
    with pytest.raises(EmbeddingError, match=r"embedding request to .* failed"):
        embedder.embed_one("first question")
    with pytest.raises(EmbeddingCircuitOpen) as caught:
        embedder.embed_one("second question")
    assert re.fullmatch(r"ollama embedder did not answer just now; retrying in (30\.0|29\.\d) s", str(caught.value))


@pytest.mark.parametrize("status", [500, 429])
def test_a_service_that_cannot_serve_opens_the_breaker(status: int) -> None:
    """A 5xx or 429 answer counts as a failure: two of them open the breaker (the third call fails
    at once, unsent); an answer closes it again."""
    with StubModelServer() as stub:
        embedder = OllamaEmbedder("in-house", stub.url, breaker_failures=2, breaker_cooldown_s=30.0)
        stub.fail_next(status, times=2)
        for question in ("first", "second"):
            with pytest.raises(EmbeddingError, match=f"failed: HTTP {status} "):
                embedder.embed_one(question)
        with pytest.raises(EmbeddingCircuitOpen):
            embedder.embed_one("third")
        assert len(stub.requests_to("/api/embed")) == 2


def test_a_client_error_does_not_open_the_breaker() -> None:
    """A 400 or 404 shows the service is there (the request was wrong): it fails that call, named as
    the HTTP error, and never opens the breaker (threshold 1 here)."""
    with StubModelServer() as stub:
        embedder = OllamaEmbedder("in-house", stub.url, breaker_failures=1, breaker_cooldown_s=30.0)
        for status in (400, 404):
            stub.fail_next(status)
            with pytest.raises(EmbeddingError, match=f"failed: HTTP {status} "):
                embedder.embed_one(f"question {status}")
        assert embedder.embed_one("answered").shape == (64,)
        assert len(stub.requests_to("/api/embed")) == 3


def test_a_session_end_that_fills_pending_records_logs_how_many(api: Api, caplog: pytest.LogCaptureFixture) -> None:
    client, switch, _ = api
    switch.down = True
    for text in ANA_TEXTS[:2]:
        post_memory(client, "ana", text)
    switch.down = False
    caplog.set_level(logging.INFO, logger="agtos.memory.vector_repair")
    ended = talk(client, "bea", "cello", ("user", BEA_TEXTS[0]), ("user", "Her teacher lives in Porto."))
    assert ended["saved"] is True, ended
    assert [r.getMessage() for r in caplog.records if r.name == "agtos.memory.vector_repair"] == [
        "pending vectors: 2 records filled, 0 gone"
    ]
    assert pending(client) == 0


def test_a_fill_after_ingestion_stops_at_its_bound_over_its_users(api: Api) -> None:
    """``max_records`` bounds the fill over all its users (a job waits on it): 3 of Ana's and Bea's 4."""
    client, switch, coordinator = api
    switch.down = True
    for who, texts in (("ana", ANA_TEXTS[:2]), ("bea", BEA_TEXTS)):
        for text in texts:
            post_memory(client, who, text)
    switch.down = False
    report = vector_repair.fill_pending(coordinator.services, max_records=3)
    assert (report.filled, report.skipped, report.error) == (3, 0, None)
    assert pending(client) == 1


def test_an_embedder_error_names_its_url_and_what_went_wrong() -> None:
    """A refused connection: the message names the request's URL (credentials masked) and the
    transport's own reason after it."""
    port = closed_port()
    embedder = OllamaEmbedder("in-house", f"http://127.0.0.1:{port}", breaker_failures=0)
    with pytest.raises(EmbeddingError) as caught:
        embedder.embed_one("question")
    prefix = f"ollama embedding request to http://127.0.0.1:{port}/api/embed failed: "
    assert str(caught.value).startswith(prefix), str(caught.value)
    assert len(str(caught.value)) > len(prefix) + 5  # the reason itself, not an empty tail


def test_an_embedder_error_quotes_the_first_200_characters_of_the_answer() -> None:
    """A long error page or a long invalid answer is quoted, cut at 200 characters."""
    page = "".join(chr(ord("a") + i % 26) for i in range(300))
    with StubModelServer() as stub:
        embedder = OllamaEmbedder("in-house", stub.url, breaker_failures=0)
        url = f"{stub.url}/api/embed"
        stub.fail_next(502, body=page.encode())
        with pytest.raises(EmbeddingError) as caught:
            embedder.embed_one("first")
        assert str(caught.value) == f"ollama embedding request to {url} failed: HTTP 502 {page[:200]!r}"
        stub.malformed_next(body=page.encode())
        with pytest.raises(EmbeddingError) as caught:
            embedder.embed_one("second")
        assert str(caught.value) == f"ollama answered {url} with invalid JSON: {page[:200]!r}"
