"""Issue 15: a user opts out through another API process while their import's sessions are being ingested.

Reproduced first with two real ``agtos serve`` processes on one Redis (an import of 161 sessions taking
16-38 s on A, ``PUT /privacy {"opt_out": true}`` on B after 3, 5, 12 and 25 s): no request hung (the opt-out
answered in 0.1-0.3 s), but the import kept its 155 episodes and 4,147 keys for the opted-out user. The
other process is a second coordinator here (its own opt-out cache, as process B has), and the opt-out lands
after the ingestion wrote the import's episodes. README: opted-out users keep working memory only."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

import agtos.memory.coordinator
from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from tests.helpers import user
from tests.test_privacy_import import import_client, user_keys  # noqa: F401 (a fixture)

OPTED_OUT = "user opted out of persistence"  # the skip reason the README's privacy section names


def test_an_opt_out_from_another_process_during_ingestion_keeps_no_imported_record(
    import_client: TestClient,  # noqa: F811 (the fixture imported above)
    settings: Settings,
    raw_redis: redis.Redis,
    key_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client, original = import_client, agtos.memory.coordinator.run_ingestion
    control = client.post("/api/memory/import", json={}, headers=user("omar")).json()  # never opted out
    assert control["episodesAdded"] > 0 and control["memoriesAdded"] > 0
    other = MemoryCoordinator(settings)  # API process B

    def ingest_then_opt_out(*args: Any, **kwargs: Any) -> Any:
        report = original(*args, **kwargs)
        assert report.episode_ids  # written before the opt-out lands
        other.privacy.set_opt_out("una", True)
        return report

    monkeypatch.setattr(agtos.memory.coordinator, "run_ingestion", ingest_then_opt_out)
    try:
        during = client.post("/api/memory/import", json={}, headers=user("una"))
    finally:
        other.close()
    monkeypatch.undo()
    assert during.status_code == 200, during.text
    body = during.json()
    assert (body["episodesAdded"], body["episodesUpdated"], body["memoriesAdded"]) == (0, 0, 0)
    assert len(body["skipped"]) == body["sessions"] == control["sessions"]
    assert client.get("/api/memory/episodes", params={"limit": 100}, headers=user("una")).json()["count"] == 0
    assert client.get("/api/memory/memories", params={"limit": 100}, headers=user("una")).json()["total"] == 0
    # left: the indexes' change logs and counters (other processes' mirrors sync deletions from them)
    left = [k.decode() for k in user_keys(raw_redis, key_prefix, "una")]
    assert [k for k in left if ":_idx:" not in k] == []

    assert client.put("/api/memory/privacy", json={"opt_out": False}, headers=user("una")).status_code == 200
    after = client.post("/api/memory/import", json={}, headers=user("una")).json()
    same = ("sessions", "episodesAdded", "unchanged", "memoriesAdded")  # nothing 'unchanged' from the opted-out run
    assert [after[k] for k in same] == [control[k] for k in same]
