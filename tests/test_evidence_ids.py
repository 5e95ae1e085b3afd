"""Issue 14 gaps found by an HTTP probe: memories and conclusions name the sessions they were said in,
through the HTTP API."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.helpers import talk, user

USER = "evidence-ids"


def test_memories_and_conclusions_carry_their_session_ids(client: TestClient) -> None:
    talk(client, USER, "chat-monday-7f3", ("user", "I work as a nurse at Mercy Hospital."), ("assistant", "Noted."))
    talk(client, USER, "chat-friday-2c9", ("user", "I am allergic to peanuts."), ("assistant", "I will remember."))

    found = client.get("/api/memory/memories", params={"q": "nurse Mercy Hospital"}, headers=user(USER)).json()
    nurse = next(m for m in found["memories"] if "nurse" in m["text"].lower())
    assert nurse["sourceSessionIds"] == ["chat-monday-7f3"]
    assert len(nurse["sourceEpisodeIds"]) == 1
    one = client.get(f"/api/memory/memories/{nurse['id']}", headers=user(USER)).json()
    assert one["sourceSessionIds"] == ["chat-monday-7f3"]

    conclusions = client.get("/api/memory/conclusions", headers=user(USER)).json()["conclusions"]
    peanuts = next(c for c in conclusions if "peanut" in c["text"].lower())
    assert peanuts["source_session_ids"] == ["chat-friday-2c9"]

    # a memory whose source is no stored episode names no session
    written = client.post(
        "/api/memory/memories", json={"text": "User plays the cello", "source": "ep-gone-000"}, headers=user(USER)
    ).json()["memory"]
    assert written["sourceEpisodeIds"] == ["ep-gone-000"]
    assert written["sourceSessionIds"] == []
