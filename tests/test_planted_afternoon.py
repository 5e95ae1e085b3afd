"""Planted-bug audit of the code landed on 2026-12-06 (afternoon; issue 20, docs/testing.md): each
test kills a realistic one-line bug that the owning tests let through (planted one at a time in a
copy). Real Redis and the bundled models, through HTTP where a user would go."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from agtos.cli import app as cli_app
from agtos.memory.context_builder import evidence_items
from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import Role, Turn
from agtos.tasks.dates import resolve_dates
from agtos.tasks.extract import extract
from tests.helpers import user
from tests.test_ingest_queue import embedded_env

CORGI = "I adopted a corgi named Biscuit."
MAY_8 = 1_683_556_200_000  # 2023-05-08T14:30Z, a Monday afternoon


def corgi_lines(coordinator: MemoryCoordinator, who: str) -> list[str]:
    items, _ = evidence_items(coordinator.services, who, "corgi named Biscuit", 1_000, 10)
    return [item.bullet for item in items if item.tier == "semantic"]


def test_a_fact_imported_from_sessions_sent_newest_first_keeps_the_earliest_sayings_day(
    client: TestClient, coordinator: MemoryCoordinator
) -> None:
    """Planted in distil_memories: the earlier saying moves valid_from but not utc_offset. Two sessions
    of one import, the newer (1 June, UTC) listed first: the fact is valid from the Oregon evening of
    8 May (2023-05-09T03:00Z) and shown on that local day, not on 9 May (its UTC day)."""
    sessions = [
        {"id": "june", "turns": [{"role": "user", "content": CORGI, "timestamp": "2023-06-01T10:00:00Z"}]},
        {"id": "oregon", "turns": [{"role": "user", "content": CORGI, "timestamp": "2023-05-08T20:00:00-07:00"}]},
    ]
    posted = client.post("/api/memory/conversations", json={"sessions": sessions}, headers=user("tz-import"))
    assert posted.status_code == 200, posted.text
    listed = client.get("/api/memory/memories", headers=user("tz-import")).json()["memories"]
    (memory,) = [m for m in listed if "corgi" in m["text"]]
    assert memory["validFrom"] == 1_683_601_200_000  # 2023-05-09T03:00:00Z
    assert corgi_lines(coordinator, "tz-import") == ["- (8 May 2023) User adopted a corgi named Biscuit"]


def test_a_fact_said_twice_in_a_session_keeps_the_first_sayings_offset() -> None:
    """Planted in Extraction.add: the offset recorded at every saying (the last one wins) while the time is
    the first saying's. Said at 20:00 UTC with no offset, then again from Tokyo (+540): the fact's time
    is the first turn's, and no offset goes with it."""
    first = Turn(role=Role.user, content=CORGI, timestamp=1_683_576_000_000)  # 2023-05-08T20:00Z
    again = Turn(role=Role.user, content=CORGI, timestamp=1_683_579_600_000, utc_offset=540)
    found = extract([first, again])
    fact = "User adopted a corgi named Biscuit"
    assert set(found.facts) == {fact}
    assert (found.stated_at[fact], found.stated_offset.get(fact)) == (1_683_576_000_000, None)


def test_a_back_filled_session_in_camel_case_dates_its_turns_on_the_local_day(client: TestClient) -> None:
    """Planted in ConversationSession's validator: its own camelCase keys not renamed first (``startedAt``'s
    offset then reached no turn: 'yesterday' read on the UTC day, 7 May), or a turn's not renamed before
    the session's offset is given to it (a turn's ``utcOffset`` then came twice: a 422)."""
    session = {
        "id": "tokyo-log",
        "startedAt": "2023-05-09T01:00:00+09:00",  # 8 May, 16:00 in UTC
        "turns": [
            {"role": "user", "content": "I bought a bonsai tree yesterday at the night market."},
            {"role": "assistant", "content": "Lovely.", "utcOffset": 540},
        ],
    }
    stored = client.post("/api/memory/conversations", json={"sessions": [session]}, headers=user("camel-log"))
    assert stored.status_code == 200, stored.text
    found = client.get("/api/memory/search", params={"q": "bonsai tree"}, headers=user("camel-log")).json()
    assert found["results"][0]["highlights"][0]["text"] == (
        "I bought a bonsai tree yesterday [= 8 May 2023] at the night market."
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [  # said on Monday 8 May 2023: Friday 5 May before it, Friday 12 May after it
        ("I will tell you what we did on Friday", [("Friday", "2023-05-05", "day")]),  # the nearest cue: 'did'
        ("We moved on Friday", [("Friday", "2023-05-05", "day")]),  # a five-letter past tense
        ("We were next to the lake on Friday", [("Friday", "2023-05-05", "day")]),  # 'next to' is no future
    ],
)
def test_a_weekday_alone_takes_the_tense_of_its_nearest_cue(text: str, expected: list[tuple[str, str, str]]) -> None:
    """Planted in dates.tense/_cue: the farthest cue taken (``max(cues)``), -ed words of five letters
    ("moved") not read as past (``len(word) > 5``), 'next to' read as a future cue."""
    assert [(d.text, d.date, d.period) for d in resolve_dates(text, MAY_8)] == expected


def test_a_worker_does_not_take_the_socket_of_a_dead_embedded_redis(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Planted in running_embedded_redis: the registered socket used without asking whether it answers.
    After a crash of `agtos serve` its registry is left behind; `agtos worker` must still say to start
    it (exit 2), not connect to a socket no server listens on."""
    embedded_env(monkeypatch, tmp_path / "data")
    registry = tmp_path / "data" / "redis" / "agtos.rdb.settings"
    registry.parent.mkdir(parents=True)
    registry.write_text(json.dumps({"unixsocket": str(tmp_path / "gone.sock")}))
    refused = CliRunner().invoke(cli_app, ["worker", "--once"])
    assert refused.exit_code == 2 and "start `agtos serve` first" in refused.output, refused.output
