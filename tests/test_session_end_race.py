"""Two ends of one session at once store each turn once (issue 15, acknowledged turns).

Found by a black-box probe of ``agtos serve`` (4 clients appending 60 turns to one session while 2
ended it over and over): the ends took 61 and 64 turns into episodes, one turn stored in two
episodes. An end reads the journal, stores or queues what it read, then clears exactly that; a
second end reading in between read the same turns again. Here the second end (after one more
append) is sent through HTTP at that moment, from a hook on the first end's read."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from tests.helpers import user

WHO = "racer"
FIRST = "My storage unit in Lisbon has the code qz1 and I keep my camping gear there."
SECOND = "My storage unit in Oslo has the code qz2 and I keep my winter tyres there."


def _turn(text: str) -> dict[str, Any]:
    return {"turns": [{"role": "user", "content": text}]}


@pytest.fixture
def second_end_during_first(client: TestClient, coordinator: MemoryCoordinator) -> Iterator[list[dict[str, Any]]]:
    """When the first end has read the journal, another thread appends SECOND and ends the session
    through HTTP; the first end goes on once that end has read too (or after 2 s). The second end's body."""
    journal = coordinator.services.journal
    read = journal.read
    second: list[dict[str, Any]] = []
    second_read = threading.Event()
    fired = threading.Event()

    def other_client() -> None:
        assert client.post("/api/memory/sessions/s1/turns", json=_turn(SECOND), headers=user(WHO)).status_code == 200
        ended = client.post("/api/memory/sessions/s1/end", headers=user(WHO))
        assert ended.status_code == 200, ended.text
        second.append(ended.json())

    def hooked_read(user_id: str, session_id: str) -> Any:
        got = read(user_id, session_id)
        if fired.is_set():
            second_read.set()
            return got
        fired.set()
        thread = threading.Thread(target=other_client)
        thread.start()
        second_read.wait(2.0)
        threads.append(thread)
        return got

    threads: list[threading.Thread] = []
    journal.read = hooked_read  # type: ignore[method-assign]
    yield second
    for thread in threads:
        thread.join(60)


def test_an_end_racing_another_end_stores_each_turn_once(
    client: TestClient, second_end_during_first: list[dict[str, Any]]
) -> None:
    assert client.post("/api/memory/sessions/s1/turns", json=_turn(FIRST), headers=user(WHO)).status_code == 200
    first = client.post("/api/memory/sessions/s1/end", headers=user(WHO))
    assert first.status_code == 200, first.text
    for _ in range(600):  # the other client's end waits for this one
        if second_end_during_first:
            break
        threading.Event().wait(0.1)
    (second,) = second_end_during_first
    ends = [first.json(), second]
    assert [e["turnsAccepted"] for e in ends] == [1, 1], ends  # FIRST in the first episode, SECOND in its own
    assert all(e["saved"] for e in ends) and ends[0]["episodeId"] != ends[1]["episodeId"]
    for code in ("qz1", "qz2"):
        found = client.get("/api/memory/search", params={"q": code, "mode": "bm25"}, headers=user(WHO)).json()
        holding = [r for r in found["results"] if any(code in h["text"] for h in r["highlights"])]
        assert len(holding) == 1, (code, found)
