"""POST /api/memory/memories while the same memory is deleted: the create answered a 404 'no memory
... for this user' (undocumented for that operation) when a DELETE of its id (the same text gives the
same id) landed between the write and the read-back. Found by schemathesis's stateful phase over
`agtos serve` (ST103) and reproduced with two creating and two deleting threads: 150 of 1,674 creates
were 404s in 12 s (helper 8's probe, 2026-12-06). Here the DELETE is sent at that moment, through HTTP,
from the hook that runs between the two; the create then answers 201 with what it wrote (the delete
came after it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from agtos.memory import memory_crud
from tests.helpers import user

TEXT = "User takes their coffee black"


@pytest.fixture
def deleted_after_write(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Each memory created is DELETEd through HTTP right after it is written; the DELETE statuses."""
    statuses: list[int] = []
    feed = memory_crud._feed_entities

    def feed_then_delete(rt: object, memory: object) -> None:
        feed(rt, memory)  # type: ignore[arg-type]
        mid = memory.id  # type: ignore[attr-defined]
        statuses.append(client.delete(f"/api/memory/memories/{mid}", headers=user("race")).status_code)

    monkeypatch.setattr(memory_crud, "_feed_entities", feed_then_delete)
    yield statuses


def test_a_create_whose_memory_is_deleted_at_once_answers_201(
    client: TestClient, deleted_after_write: list[int]
) -> None:
    created = client.post("/api/memory/memories", json={"text": TEXT, "kind": "preference"}, headers=user("race"))
    assert deleted_after_write == [200]  # the DELETE found it: it was written
    assert created.status_code == 201, created.text
    assert created.json()["memory"]["text"] == TEXT
    assert created.json()["created"] is True
    assert client.get("/api/memory/memories", headers=user("race")).json()["memories"] == []  # deleted after
