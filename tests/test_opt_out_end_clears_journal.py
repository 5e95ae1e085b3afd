"""A session its user ends while opted out keeps nothing, the turns journalled before the opt-out included: its end
answered "skipped: user opted out of persistence" but left that journal in Redis (48 h), so after opting in again the
session was live once more and its next end (or the idle sweeper) stored the pre-opt-out turns as an episode."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.helpers import user

SAID = "I prefer tea over coffee."


def test_an_end_while_opted_out_leaves_nothing_to_come_back(client: TestClient) -> None:
    dave = user("dave")
    appended = client.post(
        "/api/memory/sessions/o1/turns", json={"turns": [{"role": "user", "content": SAID}]}, headers=dave
    )
    assert appended.status_code == 200 and appended.json()["journalLength"] == 1
    assert client.put("/api/memory/privacy", json={"opt_out": True}, headers=dave).status_code == 200
    later = {"turns": [{"role": "user", "content": "My sister lives in Lisbon."}]}
    assert client.post("/api/memory/sessions/o1/turns", json=later, headers=dave).status_code == 200

    ended = client.post("/api/memory/sessions/o1/end", headers=dave).json()
    assert (ended["saved"], ended["status"], ended["reason"]) == (False, "skipped", "user opted out of persistence")

    assert client.put("/api/memory/privacy", json={"opt_out": False}, headers=dave).status_code == 200
    assert client.get("/api/memory/sessions/o1", headers=dave).status_code == 404  # before: live, with SAID
    again = client.post("/api/memory/sessions/o1/end", headers=dave).json()
    assert (again["saved"], again["reason"]) == (False, "session has no turns")  # before: saved, "stated preference"
    assert client.get("/api/memory/episodes", headers=dave).json()["episodes"] == []
    assert client.get("/api/memory/search", params={"q": "tea coffee"}, headers=dave).json()["results"] == []


def test_an_end_while_opted_out_of_a_session_never_journalled_says_it_had_turns(client: TestClient) -> None:
    erin = user("erin")
    assert client.put("/api/memory/privacy", json={"opt_out": True}, headers=erin).status_code == 200
    turns = {"turns": [{"role": "user", "content": SAID}]}
    assert client.post("/api/memory/sessions/o2/turns", json=turns, headers=erin).json()["journalLength"] == 0
    ended = client.post("/api/memory/sessions/o2/end", headers=erin).json()
    assert (ended["saved"], ended["reason"]) == (False, "user opted out of persistence")
    unknown = client.post("/api/memory/sessions/o3/end", headers=erin).json()
    assert (unknown["saved"], unknown["reason"]) == (False, "session has no turns")
