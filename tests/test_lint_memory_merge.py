"""The lint's merge step on memories (issue 16): near-duplicate current memories of one kind are
folded into the one stored first, and both histories say so with origin ``lint`` - all through the
public API (sessions, POST /maintain, GET /memories and their history)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests.helpers import run_maintenance, user

U = "lint-mem-user"
MEMORIES = "/api/memory/memories"
FIRST = "User is allergic to peanuts and tree nuts since early childhood"
SECOND = "User is seriously allergic to peanuts and tree nuts since early childhood"  # Jaccard 9/10 with FIRST


@pytest.fixture
def lint_client(settings: Settings) -> Iterator[TestClient]:
    coordinator = MemoryCoordinator(settings.with_overrides(background_work_policy="always"))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            yield client
    finally:
        coordinator.close()


def session(client: TestClient, session_id: str, text: str) -> None:
    turns = [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]
    sent = client.post(f"/api/memory/sessions/{session_id}/turns", json={"turns": turns}, headers=user(U))
    assert sent.status_code == 200, sent.text
    ended = client.post(f"/api/memory/sessions/{session_id}/end", headers=user(U))
    assert ended.status_code == 200 and ended.json()["saved"], ended.text


def memories(client: TestClient) -> dict[str, str]:
    listed = client.get(MEMORIES, headers=user(U)).json()["memories"]
    return {m["text"]: m["id"] for m in listed}


def test_lint_merges_duplicate_memories_and_records_it_in_both_histories(lint_client: TestClient) -> None:
    session(lint_client, "s1", "I am allergic to peanuts and tree nuts since early childhood.")
    session(lint_client, "s2", "I am seriously allergic to peanuts and tree nuts since early childhood.")
    session(lint_client, "s3", "I live in Porto.")
    before = memories(lint_client)
    assert {FIRST, SECOND} <= set(before), before
    first, second = before[FIRST], before[SECOND]

    run = run_maintenance(lint_client, U)
    assert run["status"] == "completed", run
    assert run["report"]["summary"]["memoriesMerged"] == 1

    after = memories(lint_client)
    assert after[FIRST] == first and SECOND not in after
    assert "User lives in Porto" in after  # not a duplicate of anything: untouched
    assert lint_client.get(f"{MEMORIES}/{second}", headers=user(U)).status_code == 404
    survivor = lint_client.get(f"{MEMORIES}/{first}", headers=user(U)).json()
    assert len(survivor["sourceEpisodeIds"]) == 2  # both sessions

    changes = lint_client.get(f"{MEMORIES}/{first}/history", headers=user(U)).json()["changes"]
    assert [(c["origin"], c["action"], c["relatedId"]) for c in changes] == [
        ("extracted", "created", None),
        ("lint", "merged", second),
    ]
    assert changes[-1]["text"] == FIRST
    gone = lint_client.get(f"{MEMORIES}/{second}/history", headers=user(U)).json()["changes"]
    assert [(c["origin"], c["action"], c["relatedId"], c["text"]) for c in gone] == [("lint", "merged", first, None)]
    found = lint_client.get(MEMORIES, params={"q": "seriously allergic"}, headers=user(U)).json()["memories"]
    assert [m["id"] for m in found] == [first]  # the duplicate left the search indexes

    again = run_maintenance(lint_client, U)
    assert again["report"]["summary"]["memoriesMerged"] == 0
