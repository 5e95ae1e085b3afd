"""Tests written for bugs planted in the code landed on the evening of 2026-12-06 (issue 20): an opt-out
landing in the middle of an import, ... (see docs/testing.md, "Planted bugs in the code landed on
2026-12-06 (evening)")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

import agtos.importers
from tests.helpers import user
from tests.test_privacy_import import import_client, user_keys  # noqa: F401 (a fixture)

OPTED_OUT = "user opted out of persistence"  # the skip reason the README's privacy section names


def test_an_opt_out_during_an_import_keeps_nothing_and_a_later_import_takes_it_all(
    import_client: TestClient,  # noqa: F811 (the fixture imported above)
    monkeypatch: pytest.MonkeyPatch,
    raw_redis: redis.Redis,
    key_prefix: str,
) -> None:
    """Planted in source_import.NOT_FINAL: ``OPTED_OUT`` dropped, so a session skipped because the user opted
    out while the import ran was recorded as judged for good, and after opting back in the same files read
    "unchanged" and were never imported. POST /import refuses an opted-out user up front (403), so the
    opt-out is sent through HTTP here between the files being read and their sessions being ingested.
    Found on the way: the memory files of that import were stored for the opted-out user (12 memories)."""
    client, original = import_client, agtos.importers.collect
    control = client.post("/api/memory/import", json={}, headers=user("omar")).json()  # never opted out
    assert control["episodesAdded"] > 0 and control["memoriesAdded"] > 0 and control["unchanged"] == 0

    def collect_then_opt_out(home: Path, sources: list[str] | None) -> Any:
        found = original(home, sources)
        answer = client.put("/api/memory/privacy", json={"opt_out": True}, headers=user("olga"))
        assert answer.status_code == 200 and answer.json()["optOut"] is True
        return found

    monkeypatch.setattr(agtos.importers, "collect", collect_then_opt_out)
    during = client.post("/api/memory/import", json={}, headers=user("olga"))
    assert during.status_code == 200, during.text
    body = during.json()
    assert (body["sessions"], body["episodesAdded"], body["episodesUpdated"]) == (control["sessions"], 0, 0)
    assert (body["unchanged"], body["memoriesAdded"]) == (0, 0)
    assert {s["reason"] for s in body["skipped"]} == {OPTED_OUT} and len(body["skipped"]) == body["sessions"]
    assert user_keys(raw_redis, key_prefix, "olga") == []  # an opted-out user keeps working memory only
    monkeypatch.undo()

    assert client.post("/api/memory/import", json={}, headers=user("olga")).status_code == 403
    assert client.put("/api/memory/privacy", json={"opt_out": False}, headers=user("olga")).status_code == 200
    after = client.post("/api/memory/import", json={}, headers=user("olga")).json()
    # as the import of a user who never opted out: nothing "unchanged" from the opted-out run
    same = ("sessions", "episodesAdded", "unchanged", "memoriesAdded")
    assert [after[k] for k in same] == [control[k] for k in same]
    assert len(after["skipped"]) == len(control["skipped"])
    episodes = client.get("/api/memory/episodes", params={"limit": 100}, headers=user("olga")).json()
    assert episodes["count"] == control["episodesAdded"]
