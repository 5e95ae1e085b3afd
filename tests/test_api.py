"""The memory REST API end to end against a real Redis."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.helpers import talk, user

WEATHER = (
    ("user", "What's the weather forecast for San Francisco this weekend?"),
    ("assistant", "Saturday is sunny at 19 degrees, Sunday brings light rain."),
    ("user", "Should I bring an umbrella for the Golden Gate walk on Sunday?"),
    ("assistant", "Yes, take an umbrella on Sunday."),
)


def test_round_trip_session_to_episode_to_search(client: TestClient) -> None:
    ended = talk(client, "alice", "s-weather", *WEATHER)
    assert ended["saved"] is True
    episode = ended["episode"]
    assert episode["topic"] == "weather"
    assert "san francisco" in episode["keywords"]

    listed = client.get("/api/memory/episodes", headers=user("alice")).json()
    assert listed["available"] is True and listed["count"] == 1
    assert set(listed["episodes"][0]) == {
        "id",
        "summary",
        "keywords",
        "topic",
        "timestamp",
        "importance",
        "type",
    }
    assert listed["episodes"][0]["id"] == episode["id"]

    found = client.get("/api/memory/search", params={"q": "weather forecast"}, headers=user("alice")).json()
    assert found["query"] == "weather forecast" and found["count"] == 1
    hit = found["results"][0]
    assert hit["id"] == episode["id"] and hit["matchType"] == "hybrid" and 0 < hit["score"] <= 1


def test_episodes_are_newest_first_and_limited(client: TestClient) -> None:
    for i in range(3):
        talk(client, "bob", f"s{i}", ("user", f"I prefer tea number {i}."), ("assistant", "Noted."))
    listed = client.get("/api/memory/episodes", params={"limit": 2}, headers=user("bob")).json()
    assert listed["count"] == 2
    stamps = [e["timestamp"] for e in listed["episodes"]]
    assert stamps == sorted(stamps, reverse=True)


def test_ending_a_session_twice_stores_one_episode(client: TestClient) -> None:
    first = talk(client, "carol", "same", ("user", "I prefer metric units."), ("assistant", "Okay."))
    second = client.post("/api/memory/sessions/same/end", headers=user("carol")).json()
    assert first["saved"] is True
    assert second["saved"] is False and second["reason"] == "session has no turns"
    # re-sending the same turns and ending again overwrites, never duplicates
    talk(client, "carol", "same", ("user", "I prefer metric units."), ("assistant", "Okay."))
    assert client.get("/api/memory/episodes", headers=user("carol")).json()["count"] == 1


def test_stored_episode_keys_carry_the_ttl(client: TestClient, raw_redis, settings) -> None:
    ended = talk(client, "dave", "ttl", ("user", "Actually, my name is Dave, not David."), ("assistant", "Sorry!"))
    key = f"{settings.key_prefix}:u:{{dave}}:episode:{ended['episode']['id']}"
    ttl = raw_redis.ttl(key)
    assert 2_592_000 - 60 < ttl <= 2_592_000  # the documented default: 30 days
    assert 2_592_000 - 60 < raw_redis.ttl(f"{settings.key_prefix}:u:{{dave}}:episodes:by_time") <= 2_592_000


def test_user_a_cannot_see_user_b(client: TestClient) -> None:
    talk(
        client,
        "alice",
        "private",
        ("user", "My secret project is called Nightjar."),
        ("assistant", "Got it."),
        ("user", "I prefer to keep Nightjar details private."),
    )
    assert client.get("/api/memory/episodes", headers=user("mallory")).json()["count"] == 0
    found = client.get("/api/memory/search", params={"q": "Nightjar"}, headers=user("mallory")).json()
    assert found["count"] == 0
    assert client.get("/api/memory/search", params={"q": "Nightjar"}, headers=user("alice")).json()["count"] == 1


def test_default_user_when_header_absent(client: TestClient, coordinator) -> None:
    talk(
        client,
        coordinator.settings.default_user,
        "d1",
        ("user", "I love jazz music."),
        ("assistant", "Nice."),
    )
    assert client.get("/api/memory/episodes").json()["count"] == 1


def test_profile_put_merges_fields(client: TestClient) -> None:
    put = client.put("/api/memory/profile", json={"name": "Ada", "preferences": ["metric units"]}, headers=user("ada"))
    assert put.status_code == 200
    client.put("/api/memory/profile", json={"communication_style": "concise"}, headers=user("ada"))
    profile = client.get("/api/memory/profile", headers=user("ada")).json()["profile"]
    assert profile["name"] == "Ada"
    assert profile["preferences"] == ["metric units"]
    assert profile["communication_style"] == "concise"


@pytest.mark.parametrize(
    ("method", "path", "kwargs"),
    [
        ("get", "/api/memory/episodes", {"params": {"limit": 0}}),
        ("get", "/api/memory/episodes", {"params": {"limit": 101}}),
        ("get", "/api/memory/episodes", {"params": {"limit": "ten"}}),
        ("get", "/api/memory/search", {"params": {"q": ""}}),
        ("get", "/api/memory/search", {"params": {"q": "   "}}),
        ("get", "/api/memory/search", {}),
        ("get", "/api/memory/search", {"params": {"q": "x", "limit": 51}}),
        ("get", "/api/memory/search", {"params": {"q": "x" * 1001}}),
        (
            "post",
            "/api/memory/sessions/s1/turns",
            {"content": b"{not json", "headers": {"content-type": "application/json"}},
        ),
        ("post", "/api/memory/sessions/s1/turns", {"json": {"turns": []}}),
        ("post", "/api/memory/sessions/s1/turns", {"json": {"turns": [{"role": "robot", "content": "hi"}]}}),
        ("post", "/api/memory/sessions/s1/turns", {"json": {"turns": [{"role": "user", "content": ""}]}}),
        ("put", "/api/memory/profile", {"json": {"name": "x", "unknown_field": 1}}),
        ("put", "/api/memory/profile", {"json": {"preferences": "not a list"}}),
    ],
)
def test_bad_input_is_422_with_a_message(client: TestClient, method: str, path: str, kwargs: dict) -> None:
    response = getattr(client, method)(path, **kwargs)
    assert response.status_code == 422, response.text
    body = response.json()
    assert isinstance(body["message"], str) and body["message"]


@pytest.mark.parametrize("bad_user", ["a:b", "*", "has space", "x" * 129, ""])
def test_unsafe_user_ids_are_rejected(client: TestClient, bad_user: str) -> None:
    response = client.get("/api/memory/episodes", headers={"X-User-Id": bad_user})
    assert response.status_code == 400
    assert "user id" in response.json()["message"]


def test_bad_session_id_is_422(client: TestClient) -> None:
    response = client.post("/api/memory/sessions/bad:id/end")
    assert response.status_code == 422
    assert response.json()["message"]


def test_unknown_live_session_is_404(client: TestClient) -> None:
    response = client.get("/api/memory/sessions/nope", headers=user("alice"))
    assert response.status_code == 404
    assert "nope" in response.json()["message"]


def test_health_reports_tiers(client: TestClient) -> None:
    body = client.get("/health").json()
    assert body["status"] == "ok"
    assert body["tiers"]["working"]["available"] is True
    assert body["tiers"]["episodic"]["available"] is True


def test_a_corrupt_stored_record_is_a_server_error_not_a_client_error(client: TestClient, raw_redis, settings) -> None:
    raw_redis.set(f"{settings.key_prefix}:u:{{zed}}:profile", '{"user_id": "zed", "preferences": null}')
    response = client.get("/api/memory/profile", headers=user("zed"))
    assert response.status_code == 500 and "invalid" in response.json()["message"]


def test_timestamps_must_be_real_dates(client: TestClient) -> None:
    turn = {"role": "user", "content": "hello there", "timestamp": 10**17}
    response = client.post("/api/memory/sessions/s1/turns", json={"turns": [turn]}, headers=user("tim"))
    assert response.status_code == 422 and "timestamp" in response.json()["message"]


def test_a_valuable_response_that_is_all_small_talk_keeps_its_own_words(client: TestClient) -> None:
    """Scored 7 (baseline 4 + tool calls 3) but every sentence is small talk, so the extractive summary
    keeps none: the episode's summary is the response itself (was a 500, found by schemathesis)."""
    body = {"session_id": "qa", "response": "Thanks!", "tool_calls": 1}
    response = client.post("/api/memory/responses", json=body, headers=user("erin"))
    assert response.status_code == 200, response.text
    assert response.json()["score"] == 7 and response.json()["episode"]["summary"] == "Thanks!"
    blank = client.post("/api/memory/responses", json={**body, "response": " \n "}, headers=user("erin"))
    assert blank.status_code == 422 and blank.json()["errors"][0]["field"] == "response"
