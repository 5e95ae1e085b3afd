"""The ingestion worker takes several queued session ends at once (issue 14, item 8: ingestion
throughput): one ingestion run for them (one NER pipe, one embedding call), each acknowledged, each
with its ``sessionEnded`` event; a job that fails in a batch is retried and dead-lettered alone.
Real Redis and models, through the HTTP routes in queue mode; the worker driven step by step."""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.ingest_worker import BATCH_JOBS, IngestWorker
from tests.helpers import user
from tests.test_dreamer import conclusions
from tests.test_ingest_queue import KEYBOARD, end, queue_client, queue_coordinator, queue_health, queue_settings

__all__ = ["queue_client", "queue_coordinator", "queue_settings"]  # the fixtures, shared

TRIP = [
    {"role": "user", "content": "Book me a train to Porto for the Vortex-88 conference in March."},
    {"role": "assistant", "content": "Done: the 9:05 train to Porto on March 3rd."},
    {"role": "user", "content": "I prefer aisle seats on trains, please remember that."},
    {"role": "assistant", "content": "Noted: aisle seats on trains."},
]


def recorded(coordinator: MemoryCoordinator, monkeypatch: Any) -> tuple[list[list[str]], list[int], list[str]]:
    """Every embedding call's texts, every NER call's text count, every sessionEnded episode id."""
    embedder, recognizer = coordinator.semantic.embedder, coordinator.services.recognizer
    calls: list[list[str]] = []
    ner: list[int] = []
    events: list[str] = []
    embed, recognize_many = embedder.embed, recognizer.recognize_many

    def embedding(texts: list[str]) -> np.ndarray:
        calls.append(list(texts))
        return embed(texts)

    def recognising(texts: Any) -> Any:
        texts = list(texts)
        ner.append(len(texts))
        return recognize_many(texts)

    monkeypatch.setattr(embedder, "embed", embedding)
    monkeypatch.setattr(recognizer, "recognize_many", recognising)
    coordinator.events.subscribe("sessionEnded", lambda payload: events.append(payload["episode_id"]))
    return calls, ner, events


def search_ids(client: TestClient, who: str, query: str) -> list[str]:
    found = client.get("/api/memory/search", params={"q": query}, headers=user(who))
    assert found.status_code == 200, found.text
    return [hit["id"] for hit in found.json()["results"]]


def test_queued_session_ends_are_ingested_together(
    queue_client: TestClient, queue_coordinator: MemoryCoordinator, monkeypatch: Any
) -> None:
    ended = [
        end(queue_client, "ann", "desk", KEYBOARD),
        end(queue_client, "ann", "trip", TRIP),
        end(queue_client, "bob", "desk", KEYBOARD),
        end(queue_client, "bob", "trip", TRIP),
    ]
    assert [e["status"] for e in ended] == ["queued"] * 4 and BATCH_JOBS >= 4
    calls, ner, events = recorded(queue_coordinator, monkeypatch)
    worker = queue_coordinator.ingest_worker()
    assert worker.run_once(block=False) == 4  # before: one entry per pass
    assert worker.run_once(block=False) == 0
    check = queue_health(queue_client)
    assert (check["depth"], check["done"], check["retries"], check["deadLetters"]) == (0, 4, 0, 0)
    assert ner == [4]  # one NER call for the four episodes
    turn_texts = {t["content"] for t in KEYBOARD + TRIP}
    with_turns = [c for c in calls if turn_texts & {text.split(": ", 1)[-1] for text in c}]
    assert len(with_turns) == 1  # one embedding call with the turns of all four sessions
    assert events == [e["episodeId"] for e in ended]  # each its event (the Dreamer), in queue order
    for who, session, query in (("ann", 0, "QZ-4417 keyboard"), ("ann", 1, "Porto train"), ("bob", 2, "QZ-4417")):
        assert search_ids(queue_client, who, query)[:1] == [ended[session]["episodeId"]]
    episodes = {e["id"] for e in queue_client.get("/api/memory/episodes", headers=user("bob")).json()["episodes"]}
    assert episodes == {ended[2]["episodeId"], ended[3]["episodeId"]}


def test_a_failing_job_in_a_batch_is_retried_alone(
    queue_client: TestClient, queue_coordinator: MemoryCoordinator
) -> None:
    gate = queue_coordinator.services.query_ingest
    real = gate.mark_interaction_saved

    def broken_for_cat(user_id: str, session_id: str) -> None:
        if user_id == "cat":
            raise RuntimeError("summariser exploded")
        real(user_id, session_id)

    gate.mark_interaction_saved = broken_for_cat  # type: ignore[method-assign]
    first = end(queue_client, "ann", "desk")
    end(queue_client, "cat", "desk")
    queue_coordinator.ingest_queue.enqueue(b"{not a job")
    last = end(queue_client, "dan", "trip", TRIP)
    worker = queue_coordinator.ingest_worker()
    assert worker.run_once(block=False) == 4
    check = queue_health(queue_client)
    assert (check["depth"], check["done"], check["retries"], check["deadLetters"]) == (1, 2, 1, 1)
    assert search_ids(queue_client, "ann", "QZ-4417 keyboard")[:1] == [first["episodeId"]]
    assert search_ids(queue_client, "dan", "Porto train")[:1] == [last["episodeId"]]
    assert [worker.run_once(block=False) for _ in range(3)] == [1, 1, 0]  # cat's job: attempts 2 and 3, then dead
    check = queue_health(queue_client)
    assert (check["depth"], check["done"], check["deadLetters"]) == (0, 2, 2)
    reasons = sorted(d["reason"] for d in queue_coordinator.ingest_queue.dead_letters())
    assert reasons[0] == "failed 3 times" and reasons[1].startswith("unreadable job")


def test_the_dreamer_runs_once_per_user_and_batch_with_the_same_conclusions(
    queue_client: TestClient, queue_coordinator: MemoryCoordinator, monkeypatch: Any
) -> None:
    """Two users' two sessions each in one batch: one Dreamer run per user, after the user's last
    episode, and the same conclusions as when each session end is ingested (and dreamed) alone."""
    import agtos.memory.dreamer as dreamer_module

    runs: list[str] = []
    real_run = dreamer_module.run_dreamer

    def counted(rt: Any, user_id: str) -> Any:
        runs.append(user_id)
        return real_run(rt, user_id)

    monkeypatch.setattr(dreamer_module, "run_dreamer", counted)
    ended = [end(queue_client, who, s, turns) for who in ("ann", "bob") for s, turns in (("a", KEYBOARD), ("b", TRIP))]
    assert queue_coordinator.ingest_worker().run_once(block=False) == 4
    assert runs == ["ann", "bob"]  # before: one run per session end
    for e, who in zip(ended, ("ann", "ann", "bob", "bob"), strict=True):  # every episode marked as dreamed
        queue_coordinator.events.emit("sessionEnded", {"user_id": who, "session_id": "x", "episode_id": e["episodeId"]})
    assert runs == ["ann", "bob"]
    for s, turns in (("a", KEYBOARD), ("b", TRIP)):  # the same sessions, one job per worker pass
        end(queue_client, "cid", s, turns)
    alone = IngestWorker(queue_coordinator.ingest_queue, queue_coordinator.sessions.ingest_job)
    assert [alone.run_once(block=False) for _ in range(3)] == [1, 1, 0]
    assert runs == ["ann", "bob", "cid", "cid"]
    texts = {who: sorted(c["text"] for c in conclusions(queue_client, who)) for who in ("ann", "bob", "cid")}
    assert texts["ann"] and texts["ann"] == texts["bob"] == texts["cid"]
    assert any("aisle seats" in t for t in texts["ann"])
