"""Planted bugs in the code landed on 2026-12-06 after 8ec96bf that the suite missed (issue 20, helper p1).

Each test fails with one realistic one-line bug planted in that code and passes without it (see
/work/notes/p1_docs.md, for docs/testing.md): an absolute-form target holding an encoded slash under
uvicorn's h11 protocol, the ``…:session:<id>:ended`` record's lifetime (AGTOS_SESSION_JOURNAL_TTL_HOURS, in
seconds), a retried queued end whose job the worker took and whose episode was forgotten since, a queued
end that kept nothing, "the beginning of the month" said in the present, "<count> <unit> back I ...",
a back-fill of two users' sessions raced by an opt-out, and an import whose opt-out lands after the
ingestion's own check. Expected values are literals of the specification.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

import agtos.memory.coordinator
from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import IngestItem, Turn
from agtos.serving.app import create_app
from agtos.tasks.dates import resolve_dates
from tests.helpers import served_by_uvicorn, user
from tests.test_absolute_form_target import raw_get
from tests.test_dates_h14 import MAY_8
from tests.test_issue15_h15_end_retry import queue_coordinator  # noqa: F401 (a fixture)
from tests.test_issue15_h15_opt_out_update import GROWN
from tests.test_issue15_h15_paths import refused_id
from tests.test_issue15_h15b import import_opting_out_after_the_check
from tests.test_privacy_import import import_client  # noqa: F401 (a fixture)
from tests.test_queue_opt_out_race import opting_out_after_the_run
from tests.test_turn_dates import said_on_may_8

METRIC = [
    {"role": "user", "content": "I prefer answers in metric units, please remember that"},
    {"role": "assistant", "content": "Noted."},
]
OPTED_OUT = "user opted out of persistence"


def end(client: TestClient, who: str, session: str, turns: list[dict[str, str]] | None = None) -> dict[str, Any]:
    if turns:
        appended = client.post(f"/api/memory/sessions/{session}/turns", json={"turns": turns}, headers=user(who))
        assert appended.status_code == 200, appended.text
    ended = client.post(f"/api/memory/sessions/{session}/end", params={"wait": 0}, headers=user(who))
    assert ended.status_code == 200, ended.text
    body: dict[str, Any] = ended.json()
    return body


def test_an_absolute_target_with_an_encoded_slash_under_h11_is_a_refused_id(coordinator: MemoryCoordinator) -> None:
    """uvicorn's h11 leaves the whole absolute-form target in ``raw_path``: the middleware routes by its path
    (``urlsplit(...).path``), so the id holding ``%2F`` is the usual 422, not the 404 of the target as a path."""
    with served_by_uvicorn(create_app(coordinator=coordinator), "h11") as port:
        target = f"http://127.0.0.1:{port}/api/memory/sessions/a%2Fb"
        assert raw_get(port, target, "127.0.0.1") == (422, refused_id("path.session_id"))
        target = f"http://127.0.0.1:{port}/api/memory/memories/x%2fy/history"
        assert raw_get(port, target, "127.0.0.1") == (422, refused_id("path.memory_id"))


@pytest.fixture
def two_hour_journal(redis_url: str, key_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The service's settings read from the environment, with AGTOS_SESSION_JOURNAL_TTL_HOURS=2."""
    for name, value in {
        "REDIS_URL": redis_url,
        "AGTOS_KEY_PREFIX": key_prefix,
        "AGTOS_DATA_DIR": str(tmp_path / "data"),
        "AGTOS_CONFIG_DIR": str(tmp_path / "config"),
        "AGTOS_INGEST_MODE": "inline",
        "AGTOS_SESSION_JOURNAL_TTL_HOURS": "2",
    }.items():
        monkeypatch.setenv(name, value)
    return Settings.from_env()


def test_the_last_end_record_lives_as_long_as_a_journal(two_hour_journal: Settings, redis_url: str) -> None:
    """AGTOS_SESSION_JOURNAL_TTL_HOURS=2: the session's ``:ended`` record expires in 7,200 s (not 7.2 s)."""
    coordinator = MemoryCoordinator(two_hour_journal)
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            assert end(client, "tom", "s1", METRIC)["saved"] is True
            r = redis.Redis.from_url(redis_url)
            keys = list(r.scan_iter(match=f"{two_hour_journal.key_prefix}:*session:s1:ended", count=1000))
            assert len(keys) == 1
            assert 7_190 <= r.ttl(keys[0]) <= 7_200
            assert end(client, "tom", "s1")["lastEnd"]["status"] == "done"
    finally:
        coordinator.close()


def test_a_retried_queued_end_whose_episode_expired_is_gone(
    queue_coordinator: MemoryCoordinator,  # noqa: F811 (the fixture imported above)
) -> None:
    """Queued, taken by the worker (the entry is no longer queued), then expired: ``gone``, not ``queued``."""
    with TestClient(create_app(coordinator=queue_coordinator)) as client:
        first = end(client, "quin", "s1", METRIC)
        assert first["status"] == "queued"
        assert queue_coordinator.sessions.ingest_worker().drain() == 1
        rt = queue_coordinator.services  # its record's TTL run out: the key is gone, as Redis expires it
        assert rt.connector.run(lambda r: r.delete(rt.keys.user("quin").episode(first["episodeId"]))) == 1
        last = end(client, "quin", "s1")["lastEnd"]
        assert (last["episodeId"], last["status"], last["saved"]) == (first["episodeId"], "gone", True)


def test_a_retried_queued_end_that_kept_nothing_names_its_verdict(
    queue_coordinator: MemoryCoordinator,  # noqa: F811 (the fixture imported above)
) -> None:
    """Queue mode: small talk is decided at the end (not queued); a retry names that end, skipped, 2 turns."""
    with TestClient(create_app(coordinator=queue_coordinator)) as client:
        first = end(
            client, "sam", "chat", [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello!"}]
        )
        assert (first["status"], first["reason"]) == ("skipped", "greeting or small talk only")
        last = dict(end(client, "sam", "chat")["lastEnd"])
        assert last.pop("endedAt") > 1_700_000_000_000  # ms since the epoch
        assert last == {
            "episodeId": None,
            "status": "skipped",
            "saved": False,
            "reason": "greeting or small talk only",
            "turnsAccepted": 2,
        }


def test_the_beginning_of_the_month_said_in_the_present_is_this_month(client: TestClient) -> None:
    """Said on Monday 8 May 2023 in the present tense: this month (May 2023); only a beginning said in the
    future is the next one ("I'll start at the beginning of the year": 2024)."""
    text = "The beginning of the month is always hectic at the bakery."
    assert [(d.text, d.date, d.period) for d in resolve_dates(text, MAY_8)] == [
        ("The beginning of the month", "2023-05-08", "month")
    ]
    turns = [("Gina", text), ("Jon", "Wow! I adopted a greyhound named Biscuit, he loves your sourdough.")]
    shown_context = said_on_may_8(client, "dated-begin", turns, "bakery hectic")
    assert "- Gina: The beginning of the month [= May 2023] is always hectic at the bakery." in shown_context


def test_count_back_then_a_clause_is_ago() -> None:
    """ "<count> <unit> back" followed by a clause's subject ("I", "we") is "ago": 8 May 2023 less two weeks is
    Monday 24 April, less three days Friday 5 May; "back home" stays a place."""
    assert [(d.text, d.date, d.period) for d in resolve_dates("Two weeks back I ran a marathon.", MAY_8)] == [
        ("Two weeks back", "2023-04-24", "day")
    ]
    assert [(d.text, d.date) for d in resolve_dates("three days back we met Ana.", MAY_8)] == [
        ("three days back", "2023-05-05")
    ]
    assert resolve_dates("I spent two weeks back home", MAY_8) == []


def dated(text: str) -> list[Turn]:
    """Two turns on Mon 8 May 2023 10:00 UTC (dated: a re-ingest builds the same record)."""
    return [
        Turn(role="user", content=text, timestamp=1_683_540_000_000),  # type: ignore[arg-type]
        Turn(role="assistant", content="Noted.", timestamp=1_683_540_060_000),  # type: ignore[arg-type]
    ]


def test_a_back_fill_of_two_users_raced_by_an_opt_out_keeps_both_rewritten_episodes(
    client: TestClient, coordinator: MemoryCoordinator, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A back-fill (``MemoryCoordinator.ingest``) of the same sessions of vic and wes again, vic opting out
    while it writes: both records are rewritten as they were, so vic's stays too (her snapshot is read
    with wes's, one MGET per user) and nothing is skipped."""
    said = {
        "vic": "I prefer aisle seats on trains, please remember that.",
        "wes": "My sister Ines lives in Porto, remember that.",
    }
    items = [IngestItem(user_id=who, session_id="s1", turns=dated(text)) for who, text in said.items()]
    assert len(coordinator.ingest(items).episode_ids) == 2
    stored = {who: client.get("/api/memory/episodes", headers=user(who)).json()["episodes"] for who in ("vic", "wes")}
    assert [len(stored["vic"]), len(stored["wes"])] == [1, 1]
    with opting_out_after_the_run(monkeypatch, agtos.memory.coordinator, settings, "vic", 2):
        report = coordinator.ingest(items)
    assert report.skipped == []
    assert sorted(report.episode_ids) == sorted([stored["vic"][0]["id"], stored["wes"][0]["id"]])
    kept = client.get("/api/memory/episodes", headers=user("vic")).json()["episodes"]
    assert [e["id"] for e in kept] == [stored["vic"][0]["id"]]


def test_an_opt_out_after_the_back_fill_checked_is_caught_by_the_import(
    import_client: TestClient,  # noqa: F811 (the fixture imported above)
    settings: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The opt-out lands after the ingestion's own check (``MemoryCoordinator._unstore_opted_out``) and before
    the import's: the episode the import updated was written before the opt-out and stays (h15b: its earlier
    version is not dropped), and is not answered skipped (every ingested episode listed as skipped)."""
    client = import_client
    first = client.post("/api/memory/import", json={}, headers=user("uma")).json()
    history = tmp_path / "home" / "projects" / "webapp" / ".aider.chat.history.md"
    second = "# aider chat started at 2024-05-02"
    history.write_text(history.read_text().replace(second, GROWN + "\n" + second))
    body = import_opting_out_after_the_check(client, settings, monkeypatch, "uma")
    assert (body["episodesAdded"], body["episodesUpdated"], body["unchanged"]) == (0, 1, first["sessions"] - 1)
    assert body["skipped"] == []
    found = client.get("/api/memory/search", params={"q": "zebracorn"}, headers=user("uma")).json()["results"]
    assert len(found) == 1
