"""Probes from outside of the surface that landed last (issues 14/15), kept as regression tests.

Through the HTTP API only: ``/ask`` while a remote embedder is silent (it answered after the query
bound plus the 30 s batch timeout, and did not say it was degraded); times sent as ISO 8601 with
offsets, mixed with ms, out of order, and the context's day headings for offsets that cross midnight
(UTC days, computed here by ``datetime`` independently of the code under test).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agtos.config import EmbeddingConfig, LLMSlot, Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests.helpers import talk, user
from tests.stub_servers import StubModelServer
from tests.test_embedder_breaker import HangableEmbedServer, embed_server

__all__ = ["embed_server"]  # the fixture, used here by name

QUERY_TIMEOUT_S = 0.5
BATCH_TIMEOUT_S = 4.0  # a batch call's timeout (30 s by default): what /ask waited on top of the query bound
COOLDOWN_S = 1.5
SLACK_S = 1.5  # the request's own work on a shared 2-core box
EMBEDDER_DOWN = "embedder unavailable: keyword search only"  # README: search/context's `degraded`


def epoch_ms(text: str) -> int:
    """An ISO 8601 date-time as ms since the epoch, UTC when it names no offset (the README's rule),
    by ``datetime`` alone and integer arithmetic."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


REQUEST_TIMEOUT_S = 1.0
LONG_BATCH_TIMEOUT_S = 6.0


@contextmanager
def served(
    settings: Settings,
    embed_server: HangableEmbedServer,
    batch_timeout_s: float = LONG_BATCH_TIMEOUT_S,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    **overrides: Any,
) -> Iterator[TestClient]:
    """The API with the stub as its Ollama embedder (bounds above), ``overrides`` on the settings."""
    embedding = EmbeddingConfig(
        provider="ollama",
        model="in-house",
        base_url=embed_server.url,
        timeout_s=batch_timeout_s,
        query_timeout_s=QUERY_TIMEOUT_S,
        request_timeout_s=request_timeout_s,
        breaker_cooldown_s=COOLDOWN_S,
    )
    coordinator = MemoryCoordinator(settings.with_overrides(embedding=embedding, **overrides))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            yield client
    finally:
        coordinator.close()


@pytest.fixture
def api(settings: Settings, embed_server: HangableEmbedServer) -> Iterator[TestClient]:
    # a request bound no shorter than the batch timeout: what /ask's evidence embedding waited before 458d130
    with served(settings, embed_server, BATCH_TIMEOUT_S, request_timeout_s=BATCH_TIMEOUT_S) as client:
        yield client


def ask(api: TestClient, question: str) -> tuple[float, dict[str, Any]]:
    started = time.monotonic()
    response = api.post("/api/memory/ask", json={"question": question}, headers=user("ana"))
    took = time.monotonic() - started
    assert response.status_code == 200, response.text
    return took, response.json()


def test_ask_answers_within_the_query_bound_and_says_degraded_while_the_embedder_is_silent(
    api: TestClient, embed_server: HangableEmbedServer
) -> None:
    talk(
        api,
        "ana",
        "garden",
        ("user", "I planted tomatoes and basil in the garden behind the house this spring."),
        ("assistant", "Tomatoes and basil grow well together in a sunny garden."),
    )
    _, body = ask(api, "What did I plant in the garden?")
    assert body["answered"] is True and "basil" in body["answer"]
    assert body["degraded"] is None

    embed_server.hang()
    took, body = ask(api, "Which herbs grow behind my house?")  # a new question: its search asks the service
    # before: the search waited the query bound, then the answer's scoring waited the batch timeout
    assert took < QUERY_TIMEOUT_S + SLACK_S, f"/ask held {took:.1f} s by a silent embedder"
    assert body["answered"] is True and "basil" in body["answer"]  # keyword evidence still answers
    assert body["degraded"] == EMBEDDER_DOWN
    assert "127.0.0.1" not in str(body) and "within" not in str(body)  # no URL, no error text

    embed_server.answer()
    time.sleep(COOLDOWN_S + 0.2)
    _, body = ask(api, "What grows in my sunny garden?")  # the trial call after the cool-down closes it
    assert body["degraded"] is None and body["answered"] is True


def test_iso_times_with_offsets_mixed_with_ms_keep_their_instants_and_local_days(client: TestClient) -> None:
    late = "2023-05-08T23:30:00-05:00"  # 9 May 04:30 UTC
    early = "2023-05-09T00:10:00+02:00"  # 8 May 22:10 UTC
    turns: list[dict[str, Any]] = [
        {"role": "user", "content": "Late at night I booked the ferry to Skye.", "timestamp": late},
        {"role": "assistant", "content": "Ferry to Skye booked.", "timestamp": epoch_ms("2023-05-09T04:31:00")},
        {"role": "user", "content": "Yesterday I also bought hiking boots.", "timestamp": early},
        {"role": "assistant", "content": "Hiking boots noted.", "timestamp": "2023-05-08T09:00:00Z"},
    ]
    sent = [epoch_ms(late), epoch_ms("2023-05-09T04:31:00"), epoch_ms(early), epoch_ms("2023-05-08T09:00:00+00:00")]
    stored = client.post(
        "/api/memory/conversations", json={"sessions": [{"id": "skye", "turns": turns}]}, headers=user("bo")
    )
    assert stored.status_code == 200 and stored.json()["stored"] == 1, stored.text

    episode = client.get("/api/memory/episodes", headers=user("bo")).json()["episodes"][0]
    assert episode["timestamp"] == max(sent)  # the latest turn's time, not the last one sent
    found = client.get("/api/memory/search", params={"q": "ferry Skye hiking boots"}, headers=user("bo")).json()
    times = {h["text"]: h["timestamp"] for hit in found["results"] for h in hit["highlights"]}
    for turn, ms in zip(turns, sent, strict=True):
        if turn["content"] in times:
            assert times[turn["content"]] == ms, turn

    context = client.post(
        "/api/memory/context", json={"query": "ferry to Skye and hiking boots"}, headers=user("bo")
    ).json()["context"]
    lines = context.splitlines()

    def day_of(line: str) -> str:  # the day heading the line is under (the nearest one above it)
        return next(h for h in reversed(lines[: lines.index(line)]) if h.endswith(" 2023:"))

    # each turn under the day where it was said (its own offset; ms and Z times: UTC), 'yesterday'
    # resolved against that local day (since 1f50b5c; before it, UTC days: 7 May and 9 May)
    assert day_of("- User: Yesterday [= 8 May 2023] I also bought hiking boots.") == "9 May 2023:"
    assert day_of("- User: Late at night I booked the ferry to Skye.") == "8 May 2023:"
    assert day_of("- Assistant: Ferry to Skye booked.") == "9 May 2023:"
    assert day_of("- Assistant: Hiking boots noted.") == "8 May 2023:"


def test_the_first_and_last_storable_instants_are_stored_found_and_dated(client: TestClient) -> None:
    """1970-01-01T00:00:00Z (ms 0) and 9999-12-31T23:59:59.999Z (the largest time accepted): stored,
    found, under their days; a relative date past year 9999 is left as said, not a 500."""
    first, last = "1970-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z"
    sessions = [
        {
            "id": "first",
            "started_at": first,
            "turns": [
                {"role": "user", "content": "Yesterday I adopted a tabby cat named Pixel."},
                {"role": "assistant", "content": "Pixel the tabby cat, adopted yesterday."},
            ],
        },
        {
            "id": "last",
            "turns": [
                {"role": "user", "content": "Tomorrow I paint the garden fence green.", "timestamp": last},
                {"role": "assistant", "content": "The garden fence, green, tomorrow.", "timestamp": last},
            ],
        },
    ]
    stored = client.post("/api/memory/conversations", json={"sessions": sessions}, headers=user("di"))
    assert stored.status_code == 200 and stored.json()["stored"] == 2, stored.text
    episodes = client.get("/api/memory/episodes", headers=user("di")).json()["episodes"]
    # started_at dates the turns sent without a time, 1 ms apart (README)
    assert sorted(e["timestamp"] for e in episodes) == [epoch_ms(first[:-1]) + 1, epoch_ms(last[:-1])]
    for query, session in (("tabby cat Pixel", "first"), ("garden fence green", "last")):
        found = client.get("/api/memory/search", params={"q": query}, headers=user("di")).json()
        assert found["results"][0]["sessionId"] == session

    context = client.post(
        "/api/memory/context", json={"query": "tabby cat Pixel and the garden fence"}, headers=user("di")
    )
    assert context.status_code == 200, context.text
    lines = context.json()["context"].splitlines()
    assert lines.index("1 January 1970:") < lines.index(
        "- User: Yesterday [= 31 December 1969] I adopted a tabby cat named Pixel."
    )
    assert lines.index("31 December 9999:") < lines.index("- User: Tomorrow I paint the garden fence green.")


def test_a_time_is_ms_or_a_date_time_never_a_number_read_as_seconds(client: TestClient) -> None:
    """A numeric string with a fraction went to pydantic's date-time parser, which reads numbers as
    seconds since the epoch (ms above 2e10): '1683540000.5' was stored as 8 May 2023, 1,000 times the
    '1683540000' beside it (20 Jan 1970); a JSON true was stored as 1 ms."""
    accepted = client.post(
        "/api/memory/sessions/units/turns",
        json={"turns": [{"role": "user", "content": "ms as a string", "timestamp": "1683540000"}]},
        headers=user("cy"),
    )
    assert accepted.status_code == 200, accepted.text
    live = client.get("/api/memory/sessions/units", headers=user("cy")).json()
    assert [m["timestamp"] for m in live["messages"]] == [1_683_540_000]  # digits are ms, as documented
    for bad in ("1683540000.5", "1683540000000.5", "-1683540000", "+1683540000", True, False):
        refused = client.post(
            "/api/memory/sessions/units/turns",
            json={"turns": [{"role": "user", "content": "x", "timestamp": bad}]},
            headers=user("cy"),
        )
        assert refused.status_code == 422, (bad, refused.text)
        assert refused.json()["errors"][0]["field"] == "turns.0.timestamp"
        backfill = client.post(
            "/api/memory/conversations",
            json={"sessions": [{"id": "units", "started_at": bad, "turns": [{"role": "user", "content": "x y z"}]}]},
            headers=user("cy"),
        )
        assert backfill.status_code == 422, (bad, backfill.text)
        assert backfill.json()["errors"][0]["field"] == "sessions.0.started_at"


def test_the_openapi_time_admits_no_date_time_before_1970(client: TestClient) -> None:
    """schemathesis sent '0834-11-01T00:05:23+09:12', valid by the document, refused (ms >= 0): the
    document now bounds the year, and a time in the years it admits is accepted."""
    import re

    schema = client.get("/openapi.json").json()["components"]["schemas"]
    for sent in (
        schema["TurnIn"]["properties"]["timestamp"],
        schema["ConversationSession"]["properties"]["started_at"],
    ):
        time_schema = sent["anyOf"][0]
        pattern = re.compile(time_schema["pattern"])  # JSON Schema: applies to strings only
        assert not pattern.search("0834-11-01T00:05:23+09:12") and not pattern.search("1969-12-31T23:59:59Z")
        assert pattern.search("1970-01-01T00:00:00Z") and pattern.search("9999-12-31T23:59:59.999Z")
    for edge, ms in (("1970-01-01T00:00:00Z", 0), ("9999-12-31T23:59:59.999Z", 253_402_300_799_999)):
        posted = client.post(
            "/api/memory/sessions/edges/turns",
            json={"turns": [{"role": "user", "content": "edge", "timestamp": edge}]},
            headers=user("cy"),
        )
        assert posted.status_code == 200, posted.text
        assert client.get("/api/memory/sessions/edges", headers=user("cy")).json()["messages"][-1]["timestamp"] == ms


# A request waits on a remote embedder at most AGTOS_EMBEDDING_REQUEST_TIMEOUT_S (issue 15): the
# worker's batches keep the call timeout, here well above it so that either wait shows
@pytest.fixture
def bounded_api(settings: Settings, embed_server: HangableEmbedServer) -> Iterator[TestClient]:
    with served(settings, embed_server) as client:
        yield client


def test_a_repeated_ask_waits_the_request_bound_not_the_batch_timeout_on_a_silent_embedder(
    bounded_api: TestClient, embed_server: HangableEmbedServer
) -> None:
    """A repeated question's vector comes from the query cache, so its search does not find the silent
    embedder out; the answer's scoring of the evidence sentences waited the batch timeout (30 s by
    default, 6 s here) and said nothing. Now it waits the request bound, then scores by word overlap."""
    talk(
        bounded_api,
        "ana",
        "garden",
        ("user", "I planted tomatoes and basil in the garden behind the house this spring."),
        ("assistant", "Tomatoes and basil grow well together in a sunny garden."),
    )
    question = "What did I plant in the garden?"
    _, body = ask(bounded_api, question)
    assert body["answered"] is True and "basil" in body["answer"] and body["degraded"] is None

    embed_server.hang()
    for _ in range(2):  # the second silence opens the circuit breaker: no wait at all after it
        took, body = ask(bounded_api, question)
        assert took < REQUEST_TIMEOUT_S + SLACK_S, f"/ask held {took:.1f} s by a silent embedder"
        assert body["answered"] is True and "basil" in body["answer"]  # by word overlap
        assert body["degraded"] == EMBEDDER_DOWN
        assert "127.0.0.1" not in str(body) and "within" not in str(body)  # no URL, no error text

    embed_server.answer()
    time.sleep(COOLDOWN_S + 0.2)
    asked = embed_server.requests
    _, body = ask(bounded_api, question)
    assert embed_server.requests > asked  # the evidence was embedded again
    assert body["answered"] is True and "basil" in body["answer"] and body["degraded"] is None


def test_a_search_with_rephrasings_waits_the_query_bound_on_a_silent_embedder(
    settings: Settings, embed_server: HangableEmbedServer
) -> None:
    """With query expansion the query and its rephrasings are embedded in one batch call, which waited
    the batch timeout; they now wait the query bound, like a single query."""
    with (
        StubModelServer() as llm,
        served(
            settings,
            embed_server,
            query_expansion=True,
            llm_slots={"expansion": LLMSlot(provider="ollama", model="qwen3:4b", base_url=llm.url)},
        ) as api,
    ):
        talk(api, "ana", "router", ("user", "I configured the XJ-9000 router firmware in the attic."))
        embed_server.hang()
        llm.queue_chat(json.dumps({"queries": ["XJ-9000 firmware", "home network router"]}))
        started = time.monotonic()
        response = api.get("/api/memory/search", params={"q": "my attic router"}, headers=user("ana"))
        took = time.monotonic() - started
        assert llm.requests_to("/api/chat")  # it was rephrased
    assert response.status_code == 200, response.text
    assert took < QUERY_TIMEOUT_S + SLACK_S, f"/search held {took:.1f} s by a silent embedder"
    body = response.json()
    assert body["degraded"] == EMBEDDER_DOWN and body["count"] >= 1
    assert body["results"][0]["matchType"] == "keyword"
    assert "127.0.0.1" not in str(body) and "within" not in str(body)


def test_the_workers_batches_keep_the_call_timeout_beyond_the_request_bound(
    bounded_api: TestClient, embed_server: HangableEmbedServer
) -> None:
    """An embedder slower than the request bound but within the call timeout: a session's ingestion
    still stores its vectors (none left pending), only a request's scoring goes without them."""
    talk(bounded_api, "ana", "warm", ("user", "I keep bees on the roof of my flat."))
    embed_server.delay_s = REQUEST_TIMEOUT_S + 0.5
    talk(bounded_api, "ana", "bees", ("user", "My bees made twelve jars of honey in August."))
    assert bounded_api.get("/health").json()["tiers"]["semantic"]["pendingVectors"] == 0


def test_a_bounded_embedding_of_several_batches_waits_the_bound_in_all(embed_server: HangableEmbedServer) -> None:
    """The bound is the whole call's, not each batch request's: three requests of 0.4 s each with a
    1 s bound give up on the third, not after 1.2 s."""
    from agtos.providers.embedding_base import EmbeddingTimeout
    from agtos.providers.http_embedders import OllamaEmbedder

    embedder = OllamaEmbedder("in-house", embed_server.url, timeout_s=LONG_BATCH_TIMEOUT_S, batch_size=2)
    try:
        assert embedder.embed(["a b", "c d", "e f", "g h", "i j", "k l"], timeout_s=1.0).shape[0] == 6
        embed_server.delay_s = 0.4
        started = time.monotonic()
        with pytest.raises(EmbeddingTimeout):
            embedder.embed(["a b", "c d", "e f", "g h", "i j", "k l"], timeout_s=1.0)
        assert time.monotonic() - started < 1.0 + 0.3
        assert embedder.embed(["a b", "c d", "e f", "g h", "i j", "k l"]).shape[0] == 6  # the call timeout: 6 s
    finally:
        embedder.close()
