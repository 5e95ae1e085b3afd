"""Issue 15 leftovers: an opt-out landing while an import writes drops the episodes the import *updated* too.

48dbe2e/9d80539 made an opt-out that lands while an import (or a back-fill) writes forget the episodes the
run added; an episode it updated (a session imported before whose transcript has grown since: same episode
id, new turns) kept the run's new content after the opt-out (README: an opted-out user keeps working memory
only). Now an updated episode goes too (its earlier version was overwritten by the run, nothing to go back
to), and one the run left as it was stays. The other API process is a second coordinator (its own opt-out
cache), its opt-out landing after the ingestion wrote.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import agtos.memory.coordinator
from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import IngestItem, Turn
from tests.helpers import user
from tests.test_privacy_import import import_client  # noqa: F401 (a fixture)
from tests.test_queue_opt_out_race import opting_out_after_the_run

OPTED_OUT = "user opted out of persistence"
GROWN = "#### Remember that the zebracorn deploy script lives in ops/zebracorn.sh.  \n\nNoted: ops/zebracorn.sh.\n"


def search_ids(client: TestClient, who: str, query: str) -> list[str]:
    return [
        hit["id"] for hit in client.get("/api/memory/search", params={"q": query}, headers=user(who)).json()["results"]
    ]


def episode_ids(client: TestClient, who: str) -> list[str]:
    listed = client.get("/api/memory/episodes", params={"limit": 100}, headers=user(who)).json()["episodes"]
    return sorted(e["id"] for e in listed)


def test_an_opt_out_during_an_import_drops_the_episode_it_updated(
    import_client: TestClient,  # noqa: F811 (the fixture imported above)
    settings: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = import_client
    first = client.post("/api/memory/import", json={}, headers=user("una")).json()
    before = episode_ids(client, "una")
    assert first["episodesAdded"] == len(before) > 1
    history = tmp_path / "home" / "projects" / "webapp" / ".aider.chat.history.md"
    second = "# aider chat started at 2024-05-02"  # the first session (stored) grew on disk since: updated next
    history.write_text(history.read_text().replace(second, GROWN + "\n" + second))
    with opting_out_after_the_run(monkeypatch, agtos.memory.coordinator, settings, "una", 1):  # the grown one
        during = client.post("/api/memory/import", json={}, headers=user("una"))
    assert during.status_code == 200, during.text
    body = during.json()
    left = episode_ids(client, "una")
    written = sorted(set(before) - set(left))
    assert len(written) == 1 and len(left) == len(before) - 1  # the run rewrote one stored episode, added none
    assert (body["episodesAdded"], body["episodesUpdated"], body["unchanged"]) == (0, 0, first["sessions"] - 1)
    assert [s["reason"] for s in body["skipped"]] == [OPTED_OUT]
    assert search_ids(client, "una", "zebracorn") == []
    assert written[0] not in search_ids(client, "una", "zebracorn deploy script")
    memories = client.get("/api/memory/memories", params={"limit": 100}, headers=user("una")).json()["memories"]
    assert [m["text"] for m in memories if "zebracorn" in m["text"]] == []


def dated(lines: list[tuple[str, str]]) -> list[Turn]:
    """Turns one minute apart from Mon 8 May 2023 10:00 UTC (dated: a re-ingest builds the same record)."""
    return [
        Turn(role=role, content=text, timestamp=1_683_540_000_000 + 60_000 * i)  # type: ignore[arg-type]
        for i, (role, text) in enumerate(lines)
    ]


def test_a_back_fill_raced_by_an_opt_out_keeps_the_episode_it_rewrote_as_it_was(
    client: TestClient, coordinator: MemoryCoordinator, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Python back-fill (``MemoryCoordinator.ingest``) of two sessions stored before: one the same turns
    (its record rewritten as it was: it stays), one grown (updated: dropped, as an added one would be)."""
    same = dated([("user", "I prefer aisle seats on trains, please remember that."), ("assistant", "Noted.")])
    grown = dated([("user", "My sister Ines lives in Porto, remember that."), ("assistant", "Noted.")])
    items = [IngestItem(user_id="vic", session_id=s, turns=t) for s, t in (("same", same), ("grown", grown))]
    assert len(coordinator.ingest(items).episode_ids) == 2
    before = episode_ids(client, "vic")
    more = dated([("user", "Also, the zebracorn bakery in Porto is her favourite."), ("assistant", "Noted.")])
    again = [items[0], IngestItem(user_id="vic", session_id="grown", turns=grown + more[:1])]
    with opting_out_after_the_run(monkeypatch, agtos.memory.coordinator, settings, "vic", 2):
        report = coordinator.ingest(again)
    assert report.skipped == [{"sessionId": "grown", "reason": OPTED_OUT}]
    kept = client.get("/api/memory/episodes", headers=user("vic")).json()["episodes"]
    assert len(kept) == 1 and kept[0]["id"] in before and "aisle seats" in kept[0]["summary"]
    assert search_ids(client, "vic", "zebracorn") == []
