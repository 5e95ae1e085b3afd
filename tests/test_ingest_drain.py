"""One worker pass over many queued session ends (issue 14, item 8: the queue path's throughput).

The worker takes every queued end up to its batch (32) into one ingestion run, stores each session
once, and embeds a text said in several of them once, each record keeping the vector of its own
text. Real Redis and models, through the HTTP routes in queue mode; the worker driven step by step."""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from tests.helpers import user
from tests.test_ingest_batch import TRIP
from tests.test_ingest_queue import KEYBOARD, end, queue_client, queue_coordinator, queue_health, queue_settings

__all__ = ["queue_client", "queue_coordinator", "queue_settings"]  # the fixtures, shared

GARDEN = [
    {"role": "user", "content": "My tomato seedlings on the balcony finally sprouted this week."},
    {"role": "assistant", "content": "Great, keep them in the sun and water them lightly."},
]


def hits(client: TestClient, who: str, query: str, mode: str = "hybrid") -> list[dict[str, Any]]:
    found = client.get("/api/memory/search", params={"q": query, "mode": mode}, headers=user(who))
    assert found.status_code == 200, found.text
    return list(found.json()["results"])


def test_one_pass_takes_twelve_queued_ends_and_stores_each_once(
    queue_client: TestClient, queue_coordinator: MemoryCoordinator
) -> None:
    """12 ends (more than the 8 a pass took before) of three users: one pass, one ingestion run,
    each session one episode, each found, nothing left queued or retried."""
    runs: list[int] = []
    many = queue_coordinator.sessions.ingest_jobs

    def counted(jobs: list[Any]) -> None:
        runs.append(len(jobs))
        many(jobs)

    queue_coordinator.sessions.ingest_jobs = counted  # type: ignore[method-assign]
    topics = (KEYBOARD, TRIP, GARDEN, KEYBOARD)
    ended = {(who, k): end(queue_client, who, f"s{k}", topics[k]) for k in range(4) for who in ("ann", "bob", "cat")}
    worker = queue_coordinator.ingest_worker()
    assert worker.run_once(block=False) == 12
    assert worker.run_once(block=False) == 0
    assert runs == [12]
    check = queue_health(queue_client)
    assert (check["depth"], check["done"], check["retries"], check["deadLetters"]) == (0, 12, 0, 0)
    for who in ("ann", "bob", "cat"):
        listed = queue_client.get("/api/memory/episodes", headers=user(who)).json()["episodes"]
        assert sorted(e["id"] for e in listed) == sorted(ended[who, k]["episodeId"] for k in range(4))
        assert ended[who, 1]["episodeId"] == hits(queue_client, who, "train to Porto")[0]["id"]
        assert ended[who, 2]["episodeId"] == hits(queue_client, who, "tomato seedlings balcony")[0]["id"]


def test_a_text_said_in_several_sessions_of_a_pass_is_embedded_once_with_its_own_vector(
    queue_client: TestClient, queue_coordinator: MemoryCoordinator, monkeypatch: Any
) -> None:
    """Two users end the same keyboard chat and one of them a trip too: the pass's one embedding
    call has each text once, and vector search still finds each turn by its own words (a row
    handed to the wrong text would answer with another turn)."""
    embedder = queue_coordinator.semantic.embedder
    calls: list[list[str]] = []
    embed = embedder.embed

    def recording(texts: list[str]) -> np.ndarray:
        calls.append(list(texts))
        return embed(texts)

    monkeypatch.setattr(embedder, "embed", recording)
    ended = [end(queue_client, "ann", "k", KEYBOARD), end(queue_client, "bob", "k", KEYBOARD)]
    trip = end(queue_client, "ann", "t", TRIP)
    assert queue_coordinator.ingest_worker().run_once(block=False) == 3
    with_turns = [c for c in calls if any("QZ-4417 mechanical keyboard" in t for t in c)]
    assert len(with_turns) == 1
    texts = with_turns[0]
    assert len(texts) == len(set(texts))  # each distinct text once
    said = [t["content"][:40] for t in KEYBOARD + TRIP]  # (a date resolved in a turn is added to its text)
    assert all(any(s in t for t in texts) for s in said)  # every turn is embedded
    for who, episode, turns in (("ann", ended[0], KEYBOARD), ("bob", ended[1], KEYBOARD), ("ann", trip, TRIP)):
        units = [t for t in texts if t.startswith("(") and any(turn["content"][:40] in t for turn in turns)]
        for turn in turns:
            nearest = closest(embed, turn["content"], units)  # the model itself on the query and each turn
            best = hits(queue_client, who, turn["content"], mode="vector")[0]
            assert best["id"] == episode["episodeId"]
            assert best["highlights"][0]["text"] in nearest, (turn, best["highlights"][0])


def closest(embed: Any, query: str, texts: list[str]) -> str:
    """The text of ``texts`` nearest ``query`` by cosine, each embedded on its own."""
    q = embed([query])[0]
    return max(texts, key=lambda t: float(np.dot(embed([t])[0], q)))


def test_a_fact_of_two_sessions_in_one_pass_is_stored_as_from_two_passes(
    queue_client: TestClient, queue_coordinator: MemoryCoordinator
) -> None:
    """A fact said in a short session and again in a longer, more important one: taken in one pass
    (ann) or in two (bob), the memory is the same, with the higher of its episodes' importance
    (before, one pass kept the first episode's)."""
    longer = KEYBOARD[:1] + TRIP + [{"role": "user", "content": "My sister Ingrid lives in Tucson, I visit every May."}]
    worker = queue_coordinator.ingest_worker()
    end(queue_client, "ann", "a", KEYBOARD)
    end(queue_client, "ann", "b", longer)
    assert worker.run_once(block=False) == 2
    for session, turns in (("a", KEYBOARD), ("b", longer)):
        end(queue_client, "bob", session, turns)
        assert worker.run_once(block=False) == 1

    def stored(who: str) -> tuple[list[float], dict[str, float]]:
        episodes = queue_client.get("/api/memory/episodes", headers=user(who)).json()["episodes"]
        memories = queue_client.get("/api/memory/memories", headers=user(who)).json()["memories"]
        return sorted(e["importance"] for e in episodes), {m["text"]: m["importance"] for m in memories}

    (low, high), ann = stored("ann")
    assert low < high
    assert ann["User bought a QZ-4417 mechanical keyboard for coding at home"] == high
    assert stored("bob") == ([low, high], ann)
