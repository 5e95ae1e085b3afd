"""Times at the edges of the range a record may hold, with UTC offsets (issue 15): a 422, never a 500.

A turn's time is 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z and its ``utcOffset`` -1440 to +1440
minutes; the day it is dated on is its local one. 9999-12-31T23:59:59.999Z at +14:00 is 1 January
10000 there, which no date holds: such a turn was journalled (200) and every end of its session then
answered 500 (ValueError: year 10000), a queued one failed each attempt on its way to the dead
letters. Now the turn is refused, naming the rule; a record from before keeps its UTC day.
Through the HTTP app, real Redis and models; expected values are literals.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import Episode, Turn
from agtos.tasks.dates import turn_datetime
from tests.helpers import user
from tests.test_probe_fidelity import context, end

LAST = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
SAID = "I saw my sister Ada at the oboe recital yesterday."
RULE = "local time (its timestamp + utcOffset minutes) is on or before 9999-12-31T23:59:59.999"


def refused(answer: Any, field: str, rule: str) -> None:
    assert answer.status_code == 422, answer.text
    assert any(e["field"] == field and rule in e["message"] for e in answer.json()["errors"]), answer.text


def test_a_turn_said_past_year_9999_in_its_local_time_is_refused(client: TestClient) -> None:
    """Bug caught: the last ms at +840 (or +1440) was journalled and its session end answered 500."""
    for offset in (840, 1440, 1):
        turn = {"role": "user", "content": SAID, "timestamp": LAST, "utcOffset": offset}
        answer = client.post("/api/memory/sessions/s1/turns", json={"turns": [turn]}, headers=user("edge"))
        refused(answer, "turns.0", RULE)
    ended = client.post("/api/memory/sessions/s1/end", headers=user("edge"))
    assert ended.status_code == 200 and ended.json()["turnsAccepted"] == 0, ended.text


def test_a_turn_on_the_last_local_day_is_stored_and_dated_there(client: TestClient) -> None:
    """The rule must not refuse real local times: the last ms at +14:00 (sent as ISO), and the last ms
    UTC at -14:00 (a rule adding the offset the wrong way refuses it), are stored and dated locally."""
    end(
        client,
        "east",
        "s1",
        [{"role": "user", "name": "Jon", "content": SAID, "timestamp": "9999-12-31T23:59:59.999+14:00"}],
    )
    assert "recital yesterday [= 30 December 9999]" in context(
        client, "east", "When did Jon see Ada at the oboe recital?"
    )
    end(client, "west", "s1", [{"role": "user", "name": "Jon", "content": SAID, "timestamp": LAST, "utcOffset": -840}])
    assert "recital yesterday [= 30 December 9999]" in context(
        client, "west", "When did Jon see Ada at the oboe recital?"
    )


def test_an_imported_turn_said_past_year_9999_locally_is_refused(client: TestClient) -> None:
    """Bug caught: POST /conversations stored such a turn, or dated undated turns at startedAt + 1 ms past
    the last local ms (startedAt 9999-12-31T23:59:59.999+14:00 passes the UTC rule): 500, nothing stored."""
    turn = {"role": "user", "content": SAID, "timestamp": LAST, "utcOffset": 1440}
    answer = client.post(
        "/api/memory/conversations", json={"sessions": [{"id": "c1", "turns": [turn]}]}, headers=user("imp")
    )
    refused(answer, "sessions.0.turns.0", RULE)
    undated = [{"role": "user", "content": SAID}, {"role": "assistant", "content": "That sounds lovely."}]
    session = {"id": "c2", "startedAt": "9999-12-31T23:59:59.999+14:00", "turns": undated}
    answer = client.post("/api/memory/conversations", json={"sessions": [session]}, headers=user("imp"))
    refused(answer, "sessions.0", "in their local time too")
    one = client.post(
        "/api/memory/conversations", json={"sessions": [{**session, "turns": undated[:1]}]}, headers=user("imp")
    )
    assert one.status_code == 200 and one.json()["stored"] == 1, one.text


def test_a_journalled_turn_from_before_the_rule_ends_on_its_utc_day(
    client: TestClient, coordinator: MemoryCoordinator
) -> None:
    """Bug caught: a turn journalled before the rule (or queued in a job) made turn_datetime raise, so its
    session could never end (500, or a dead-lettered job): it is dated on its UTC day instead."""
    assert turn_datetime(LAST, 840).date() == date(9999, 12, 31)
    old = Turn.model_construct(role="user", name="Jon", content=SAID, timestamp=LAST, utc_offset=840, is_summary=False)
    coordinator.add_turns("old", "s1", [old])
    ended = client.post("/api/memory/sessions/s1/end", headers=user("old"))
    assert ended.status_code == 200 and ended.json()["saved"], ended.text
    assert "recital yesterday [= 30 December 9999]" in context(
        client, "old", "When did Jon see Ada at the oboe recital?"
    )


def test_the_dreamer_reads_an_episode_from_before_the_rule(client: TestClient, coordinator: MemoryCoordinator) -> None:
    """Bug caught: the Dreamer's morning-person pattern read each episode's local hour with its own date
    arithmetic, so two stored episodes said at the last ms at +14:00 made POST /dream answer 500."""
    for session in ("s1", "s2"):
        episode = Episode(user_id="dreamy", session_id=session, summary="Checked the weather.", topic="weather")
        said = episode.model_copy(update={"timestamp": LAST, "utc_offset": 840})  # unvalidated, as stored before
        coordinator.services.episodes.save(said)
    dreamt = client.post("/api/memory/dream", headers=user("dreamy"))
    assert dreamt.status_code == 200, dreamt.text


def test_the_rules_are_listed_in_the_import_description(client: TestClient) -> None:
    """Bug caught: the rules refused bodies that fit /openapi.json without the document saying so (a
    schemathesis positive example at the last ms with a positive utcOffset got an unexplained 422)."""
    paths = client.get("/openapi.json").json()["paths"]
    described = paths["/api/memory/conversations"]["post"]["description"]
    assert f"- a turn's {RULE}" in described and "in their local time too" in described, described
