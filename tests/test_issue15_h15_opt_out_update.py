"""Issue 15 leftovers: an opt-out landing after an import (or a back-fill) wrote keeps the episodes it *updated*.

48dbe2e/9d80539 made an opt-out that lands while an import (or a back-fill) writes forget the episodes the
run added. ff6ccdc dropped the episodes it updated too (a session imported before whose transcript has grown
since: same episode id, new turns), losing their earlier version, which the user had before opting out. Now
each user's records are written in one atomic step with the opt-out check (tests/test_issue15_h15b.py: an
opt-out landing first leaves the earlier version as it was); one landing after, as here, finds the update
written while the user was still opted in, and it stays with its new content; an added episode is still
forgotten. The other API process is a second coordinator (its own opt-out cache), its opt-out landing after
the ingestion wrote.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import agtos.memory.coordinator
from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.episodic import session_episode_id
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


def test_an_opt_out_after_an_import_wrote_keeps_the_episode_it_updated(
    import_client: TestClient,  # noqa: F811 (the fixture imported above)
    settings: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bugs caught: the updated episode dropped (ff6ccdc: its earlier version lost with it) or answered
    skipped (every ingested episode listed as skipped)."""
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
    assert episode_ids(client, "una") == before  # the run rewrote one stored episode, added none
    assert (body["episodesAdded"], body["episodesUpdated"], body["unchanged"]) == (0, 1, first["sessions"] - 1)
    assert body["skipped"] == []
    found = search_ids(client, "una", "zebracorn deploy script")  # written before the opt-out: it stays
    assert len(found) >= 1 and found[0] in before


def dated(lines: list[tuple[str, str]]) -> list[Turn]:
    """Turns one minute apart from Mon 8 May 2023 10:00 UTC (dated: a re-ingest builds the same record)."""
    return [
        Turn(role=role, content=text, timestamp=1_683_540_000_000 + 60_000 * i)  # type: ignore[arg-type]
        for i, (role, text) in enumerate(lines)
    ]


def test_a_back_fill_raced_by_an_opt_out_keeps_the_episodes_it_rewrote(
    client: TestClient, coordinator: MemoryCoordinator, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Python back-fill (``MemoryCoordinator.ingest``) of two sessions stored before: one the same turns
    (its record rewritten as it was), one grown (updated before the opt-out landed): both stay, nothing is
    skipped. Bug caught: a rewritten or updated episode dropped as an added one is."""
    same = dated([("user", "I prefer aisle seats on trains, please remember that."), ("assistant", "Noted.")])
    grown = dated([("user", "My sister Ines lives in Porto, remember that."), ("assistant", "Noted.")])
    items = [IngestItem(user_id="vic", session_id=s, turns=t) for s, t in (("same", same), ("grown", grown))]
    assert len(coordinator.ingest(items).episode_ids) == 2
    before = episode_ids(client, "vic")
    more = dated([("user", "Also, the zebracorn bakery in Porto is her favourite."), ("assistant", "Noted.")])
    again = [items[0], IngestItem(user_id="vic", session_id="grown", turns=grown + more[:1])]
    with opting_out_after_the_run(monkeypatch, agtos.memory.coordinator, settings, "vic", 2):
        report = coordinator.ingest(again)
    assert report.skipped == []
    assert sorted(report.episode_ids) == before == episode_ids(client, "vic")
    assert search_ids(client, "vic", "zebracorn bakery")[:1] == [session_episode_id("vic", "grown")]
