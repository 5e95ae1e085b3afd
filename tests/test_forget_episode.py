"""Forgetting an episode forgets what was learnt from it alone (README "Privacy").

A session's facts, the Dreamer's conclusions, the profile lines built on them and the entities
NER found all name the episodes they come from. ``POST /api/memory/forget`` of an episode must
take with it what only that conversation said (a PIN stated once must not stay as a memory, a
conclusion, a profile fact or a context line), and keep, without naming it any more, what another
conversation says too. Through HTTP, real Redis, the bundled models; the inline session end runs the
extraction and the Dreamer's rules as in production.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.helpers import end_session, user

FIRST = [
    {"role": "user", "content": "I am allergic to peanuts. My bank PIN is 4417."},
    {"role": "assistant", "content": "Noted, no peanuts."},
    {"role": "user", "content": "I work at St Mary's Hospital as a nurse. My cousin Bartholomew lives in Reykjavik."},
    {"role": "assistant", "content": "Reykjavik, nice."},
]
SECOND = [
    {"role": "user", "content": "I work at St Mary's Hospital as a nurse."},
    {"role": "assistant", "content": "Still there, good."},
    {"role": "user", "content": "Night shifts all this month though."},
]


def get(client: TestClient, path: str) -> Any:
    response = client.get(path, headers=user("ines"))
    assert response.status_code == 200, response.text
    return response.json()


def memories(client: TestClient) -> list[dict[str, Any]]:
    return list(get(client, "/api/memory/memories?limit=100")["memories"])


def conclusions(client: TestClient) -> list[dict[str, Any]]:
    return list(get(client, "/api/memory/conclusions")["conclusions"])


def entity_names(client: TestClient) -> set[str]:
    return {e["name"] for e in get(client, "/api/entities?limit=100")["entities"]}


def test_forgetting_an_episode_forgets_what_only_it_said(client: TestClient) -> None:
    first = end_session(client, "ines", "s1", FIRST)["episodeId"]
    second = end_session(client, "ines", "s2", SECOND)["episodeId"]
    said = " ".join(m["text"] for m in memories(client)) + " ".join(c["text"] for c in conclusions(client))
    assert "4417" in said and "peanuts" in said and "St Mary" in said  # learnt from the sessions
    assert {"Bartholomew", "Reykjavik"} <= entity_names(client)
    profile_before = get(client, "/api/memory/profile")["profile"]["facts"]
    assert any("peanuts" in line for line in profile_before)

    gone = client.post("/api/memory/forget", json={"kind": "episode", "id": first}, headers=user("ines"))
    assert gone.status_code == 200, gone.text
    derived = gone.json()["derived"]
    assert derived["memories"] >= 2 and derived["conclusions"] >= 1 and derived["entities"] >= 2

    # nothing only the first session said stays: memories, conclusions, profile, entities, context
    left = memories(client)
    assert not [m for m in left if "4417" in m["text"] or "peanut" in m["text"].lower()]
    assert not [c for c in conclusions(client) if "peanut" in c["text"].lower()]
    assert not [line for line in get(client, "/api/memory/profile")["profile"]["facts"] if "peanut" in line]
    assert not {"Bartholomew", "Reykjavik"} & entity_names(client)
    context = client.post("/api/memory/context", json={"query": "bank PIN peanuts allergy"}, headers=user("ines"))
    assert "4417" not in context.text and "peanut" not in context.text.lower()

    # what the second session says too stays, naming only it
    work = [m for m in left if "St Mary" in m["text"]]
    assert work and all(m["sourceEpisodeIds"] == [second] for m in work), work
    job = [c for c in conclusions(client) if "St Mary" in c["text"]]
    assert job and all(c["source_episode_ids"] == [second] for c in job), job
    assert all(not t.startswith(f"{first}.") for c in job for t in c["source_turn_ids"])
    assert "St Mary's Hospital" in entity_names(client)
    hospital = [e for e in get(client, "/api/entities?limit=100")["entities"] if e["name"] == "St Mary's Hospital"]
    assert [e["episodeIds"] for e in hospital] == [[second]]

    again = client.post("/api/memory/forget", json={"kind": "episode", "id": first}, headers=user("ines"))
    assert again.status_code == 404
