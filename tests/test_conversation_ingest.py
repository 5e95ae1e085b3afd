"""Whole-conversation ingest: POST /api/memory/conversations and ``agtos memory ingest FILE.jsonl``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from agtos.cli import app as cli_app
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests.helpers import served_by_uvicorn, user

MAY_8 = 1683540000000  # 2023-05-08T10:00:00Z
JUNE_12 = 1686594600000  # 2023-06-12T18:30:00Z
JULY_1 = 1688202000000  # 2023-07-01T09:00:00Z

SESSIONS: list[dict[str, Any]] = [
    {
        "id": "log-1",
        "speakers": {"user": "Jon", "assistant": "Gina"},
        "turns": [
            {"role": "user", "content": "I prefer window seats when I fly to Lisbon.", "timestamp": MAY_8},
            {"role": "assistant", "content": "Noted, window seats for Lisbon flights.", "timestamp": MAY_8 + 60_000},
        ],
    },
    {
        "id": "log-2",
        "started_at": JUNE_12,
        "speakers": {"user": "Jon"},
        "turns": [
            {"role": "user", "content": "My daughter Maya starts violin lessons on Thursdays."},
            {"role": "assistant", "content": "Violin on Thursdays for Maya, got it."},
        ],
    },
    {
        "id": "log-3",
        "turns": [
            {
                "role": "user",
                "content": "Actually, my dentist appointment moved to Friday at noon.",
                "timestamp": JULY_1,
            },
            {"role": "assistant", "content": "Updated: dentist on Friday at noon.", "timestamp": JULY_1 + 30_000},
        ],
    },
]


def ingest(client: TestClient, who: str, sessions: list[dict[str, Any]]) -> dict[str, Any]:
    response = client.post("/api/memory/conversations", json={"sessions": sessions}, headers=user(who))
    assert response.status_code == 200, response.text
    return response.json()


def test_three_sessions_ingested_twice_are_stored_once(client: TestClient) -> None:
    first = ingest(client, "jon", SESSIONS)
    assert [(s["id"], s["status"], s["turns"]) for s in first["sessions"]] == [
        ("log-1", "stored", 2),
        ("log-2", "stored", 2),
        ("log-3", "stored", 2),
    ]
    assert (first["stored"], first["unchanged"], first["skipped"]) == (3, 0, 0)
    episode_ids = [s["episodeId"] for s in first["sessions"]]
    assert len(set(episode_ids)) == 3 and all(i.startswith("ep-") for i in episode_ids)

    again = ingest(client, "jon", SESSIONS)
    assert [(s["status"], s["episodeId"]) for s in again["sessions"]] == [("unchanged", i) for i in episode_ids]
    assert (again["stored"], again["unchanged"], again["memories"]) == (0, 3, 0)

    episodes = client.get("/api/memory/episodes", headers=user("jon")).json()
    assert episodes["count"] == 3
    # the episodes keep the chat's own times: newest first, each its last turn's time
    assert [e["timestamp"] for e in episodes["episodes"]] == [JULY_1 + 30_000, JUNE_12 + 1, MAY_8 + 60_000]
    hits = client.get("/api/memory/search", params={"q": "window seats Lisbon"}, headers=user("jon")).json()
    assert hits["results"][0]["sessionId"] == "log-1"
    assert len([h for h in hits["results"] if h["sessionId"] == "log-1"]) == 1


def test_turns_are_dated_by_started_at_and_named_by_speakers(client: TestClient) -> None:
    ingest(client, "jon", SESSIONS[1:2])
    hits = client.get("/api/memory/search", params={"q": "violin lessons Maya"}, headers=user("jon")).json()
    top = hits["results"][0]
    assert top["sessionId"] == "log-2"
    said = {(h["speaker"], h["timestamp"]) for h in top["highlights"]}
    assert ("Jon", JUNE_12) in said  # the first turn at started_at, the next one 1 ms later
    assert all(h["timestamp"] in (JUNE_12, JUNE_12 + 1) for h in top["highlights"])


def test_times_may_be_sent_as_iso_8601(client: TestClient) -> None:
    """A chat log's dates as written (RFC 3339 / ISO 8601, UTC when no offset) are the same ms."""
    session = {
        "id": "iso-1",
        "started_at": "2023-06-12T18:30:00Z",  # JUNE_12
        "speakers": {"user": "Jon"},
        "turns": [
            {"role": "user", "content": "My daughter Maya starts cello lessons on Fridays."},
            {"role": "assistant", "content": "Cello on Fridays for Maya.", "timestamp": "2023-07-01T11:00:00+02:00"},
        ],
    }
    ingest(client, "iso", [session])
    top = client.get("/api/memory/search", params={"q": "cello lessons Maya"}, headers=user("iso")).json()
    assert {(h["speaker"], h["timestamp"]) for h in top["results"][0]["highlights"]} >= {("Jon", JUNE_12)}
    assert client.get("/api/memory/episodes", headers=user("iso")).json()["episodes"][0]["timestamp"] == JULY_1

    posted = client.post(
        "/api/memory/sessions/iso-live/turns",
        json={"turns": [{"role": "user", "content": "Hello there, it is May.", "timestamp": "2023-05-08T10:00:00"}]},
        headers=user("iso"),
    )
    assert posted.status_code == 200, posted.text
    live = client.get("/api/memory/sessions/iso-live", headers=user("iso")).json()
    assert [m["timestamp"] for m in live["messages"]] == [MAY_8]  # no offset: UTC

    for bad in ("yesterday", "2023-13-01T00:00:00Z", "1969-12-31T23:59:59Z"):
        refused = client.post(
            "/api/memory/sessions/iso-live/turns",
            json={"turns": [{"role": "user", "content": "x", "timestamp": bad}]},
            headers=user("iso"),
        )
        assert refused.status_code == 422, (bad, refused.text)
        assert refused.json()["errors"][0]["field"] == "turns.0.timestamp"
    schema = client.get("/openapi.json").json()["components"]["schemas"]
    assert {"type": "string", "format": "date-time"} in schema["TurnIn"]["properties"]["timestamp"]["anyOf"][0]["anyOf"]


def test_one_embedding_call_embeds_the_whole_batch(client: TestClient, coordinator: MemoryCoordinator) -> None:
    embedder = coordinator.semantic.embedder
    calls: list[list[str]] = []
    real_embed = embedder.embed

    def counting_embed(texts: list[str], *args: Any, **kwargs: Any) -> Any:
        calls.append(list(texts))
        return real_embed(texts, *args, **kwargs)

    embedder.embed = counting_embed  # type: ignore[method-assign]
    try:
        ingest(client, "batch", SESSIONS)
    finally:
        embedder.embed = real_embed  # type: ignore[method-assign]
    turn_words = ["window seats", "violin lessons", "dentist appointment"]
    with_turns = [texts for texts in calls if any(w in t for t in texts for w in turn_words)]
    assert len(with_turns) == 1, [len(c) for c in calls]
    assert all(any(w in t for t in with_turns[0]) for w in turn_words)


def test_trivial_sessions_are_skipped_and_users_are_isolated(client: TestClient) -> None:
    trivial = {"id": "hello", "turns": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    out = ingest(client, "ann", [trivial, SESSIONS[0]])
    assert [(s["id"], s["status"], s["episodeId"] is None) for s in out["sessions"]] == [
        ("hello", "skipped", True),
        ("log-1", "stored", False),
    ]
    assert out["sessions"][0]["reason"]
    # the same session ids for another user are that user's own sessions
    other = ingest(client, "bob", SESSIONS[:1])
    assert other["sessions"][0]["status"] == "stored"
    assert other["sessions"][0]["episodeId"] != out["sessions"][1]["episodeId"]


def test_limits_and_refusals(client: TestClient) -> None:
    one = SESSIONS[0]
    for body, field, words in [
        ({"sessions": []}, "sessions", "at least 1"),
        ({"sessions": [one, one]}, "body", "session ids must be unique"),
        ({"sessions": [{**one, "id": f"s{i}"} for i in range(101)]}, "sessions", "at most 100"),
        ({"sessions": [{**one, "id": "bad id"}]}, "sessions.0.id", "letters, digits, '_', '.' or '-'"),
        ({"sessions": [{**one, "turns": []}]}, "sessions.0.turns", "at least 1"),
    ]:
        response = client.post("/api/memory/conversations", json=body, headers=user("lim"))
        assert response.status_code == 422, response.text
        error = response.json()["errors"][0]
        assert (error["field"], words in error["message"]) == (field, True), error
    huge = {"sessions": [{**one, "turns": [{"role": "user", "content": "x" * 100_000}] * 11}]}
    too_large = client.post("/api/memory/conversations", json=huge, headers=user("lim"))
    assert too_large.status_code == 413 and "limit is 1048576 bytes" in too_large.json()["message"]
    assert client.put("/api/memory/privacy", json={"opt_out": True}, headers=user("lim")).status_code == 200
    refused = client.post("/api/memory/conversations", json={"sessions": [one]}, headers=user("lim"))
    assert refused.status_code == 403
    assert client.get("/api/memory/episodes", headers=user("lim")).json()["count"] == 0


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, redis_url: str, key_prefix: str, tmp_path: Path) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("AGTOS_KEY_PREFIX", key_prefix)
    monkeypatch.setenv("AGTOS_CONFIG_DIR", str(tmp_path / "cfg"))


def test_cli_ingests_a_jsonl_log_idempotently(cli_env: None, tmp_path: Path, client: TestClient) -> None:
    log = tmp_path / "chat.jsonl"
    log.write_text("\n".join(json.dumps(s) for s in SESSIONS) + "\n\n", encoding="utf-8")
    runner = CliRunner()
    first = runner.invoke(cli_app, ["memory", "ingest", str(log), "--user", "cli", "--batch", "2"])
    assert first.exit_code == 0, first.output
    assert "3 session(s): stored 3, unchanged 0, skipped 0" in first.output
    again = runner.invoke(cli_app, ["memory", "ingest", str(log), "--user", "cli"])
    assert "3 session(s): stored 0, unchanged 3, skipped 0" in again.output
    assert client.get("/api/memory/episodes", headers=user("cli")).json()["count"] == 3

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(SESSIONS[0]) + "\n" + json.dumps({"id": "x", "turns": []}) + "\n", encoding="utf-8")
    refused = runner.invoke(cli_app, ["memory", "ingest", str(bad), "--user", "cli2"])
    assert refused.exit_code == 2 and "bad.jsonl:2" in refused.output
    assert client.get("/api/memory/episodes", headers=user("cli2")).json()["count"] == 0


def test_cli_names_a_long_or_bracketed_path_and_its_line_whole(cli_env: None, tmp_path: Path) -> None:
    """The refusal's ``path:line`` is one unbroken string an operator can copy: not wrapped at the terminal's 80
    columns, and a ``[…]`` in a directory name is printed, not read as console markup."""
    folder = tmp_path / "[red] exported chats" / ("d" * 90)
    folder.mkdir(parents=True)
    bad = folder / "bad.jsonl"
    bad.write_text(json.dumps(SESSIONS[0]) + "\n" + json.dumps({"id": "x", "turns": []}) + "\n", encoding="utf-8")
    refused = CliRunner().invoke(cli_app, ["memory", "ingest", str(bad), "--user", "cli3"])
    assert refused.exit_code == 2
    assert f"{bad}:2: List should have at least 1 item" in refused.output
    twice = folder / "twice.jsonl"
    twice.write_text("\n".join(json.dumps(s) for s in [SESSIONS[0], SESSIONS[0]]) + "\n", encoding="utf-8")
    repeated = CliRunner().invoke(cli_app, ["memory", "ingest", str(twice), "--user", "cli3"])
    assert repeated.exit_code == 2
    assert f"{twice}: session ids repeat: {SESSIONS[0]['id']}" in repeated.output


def test_cli_sends_the_log_to_a_running_api(cli_env: None, tmp_path: Path, client: TestClient) -> None:
    """``--url``: the same sessions through POST /api/memory/conversations of a live server (the client)."""
    log = tmp_path / "chat.jsonl"
    log.write_text("\n".join(json.dumps(s) for s in SESSIONS[:2]), encoding="utf-8")
    # the API as ``uvicorn agtos.serving.main:app`` builds it (create_app() from the environment), served
    # by uvicorn on a loopback port in a thread: a live server, without a second Python and its models
    with served_by_uvicorn(create_app()) as port:
        url = f"http://127.0.0.1:{port}"
        sent = CliRunner().invoke(cli_app, ["memory", "ingest", str(log), "--user", "remote", "--url", url])
        assert sent.exit_code == 0, sent.output
        assert "2 session(s): stored 2, unchanged 0, skipped 0" in sent.output
    episodes = client.get("/api/memory/episodes", headers=user("remote")).json()["episodes"]
    assert sorted(e["timestamp"] for e in episodes) == [MAY_8 + 60_000, JUNE_12 + 1]


def test_a_time_without_an_offset_is_utc_whatever_the_servers_zone(monkeypatch: pytest.MonkeyPatch) -> None:

    from agtos.schemas.records import to_ms

    monkeypatch.setenv("TZ", "Asia/Tokyo")  # UTC+9: a naive time read as local would be 9 h early
    time.tzset()
    try:
        assert to_ms("2023-05-08T10:00:00") == MAY_8
        assert to_ms("2023-05-08T19:00:00+09:00") == MAY_8
        assert to_ms("2023-05-08T10:00:00.0004Z") == MAY_8  # to the nearest ms
        assert to_ms("2023-05-08T10:00:00.0006Z") == MAY_8 + 1
        assert to_ms(MAY_8) == MAY_8 and to_ms(str(MAY_8)) == str(MAY_8)  # ms pass through to the int check
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_started_at_at_the_last_real_time_leaves_no_room_for_two_undated_turns(client: TestClient) -> None:
    """Turns sent without a time are dated ``startedAt`` + 1 ms each; at the last time a record may hold
    (9999-12-31T23:59:59.999Z = 253,402,300,799,999 ms) a second undated turn would be stored past it and
    every later read of the episode would fail (a 500 found by the API fuzz test): refused with a 422 instead,
    while one undated turn there (the next one dated) is stored and read back."""
    last = "9999-12-31T23:59:59.999Z"
    undated = [{"role": "user", "content": f"My sister Ada plays the oboe, note {i}."} for i in range(2)]
    body = {"sessions": [{"id": "edge-1", "started_at": last, "turns": undated}]}
    refused = client.post("/api/memory/conversations", json=body, headers=user("edge"))
    assert refused.status_code == 422, refused.text
    error = refused.json()["errors"][0]
    assert error["field"] == "sessions.0" and "1 ms each" in error["message"], error

    dated = {"role": "assistant", "content": "Ada and the oboe, noted.", "timestamp": "2023-06-12T18:30:00Z"}
    body = {"sessions": [{"id": "edge-2", "started_at": last, "turns": [undated[0], dated]}]}
    assert client.post("/api/memory/conversations", json=body, headers=user("edge")).status_code == 200
    episodes = client.get("/api/memory/episodes", headers=user("edge"))
    assert episodes.status_code == 200, episodes.text
    assert [e["timestamp"] for e in episodes.json()["episodes"]] == [253_402_300_799_999]
