"""Dreamer consolidation, conclusions API, profile, Dialectic ask and Query-as-Ingest."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import LLMSlot, Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.export import export_snapshot
from agtos.serving.app import create_app
from tests.helpers import user
from tests.stub_servers import StubModelServer


def at(day: int, hour: int) -> int:
    return int(datetime(2026, 11, day, hour, 5, tzinfo=UTC).timestamp() * 1000)


HISTORY = [
    (
        "mon",
        at(23, 7),
        [
            ("user", "What's the weather forecast for today?"),
            ("assistant", "Sunny, 14 degrees."),
            ("user", "Will it rain this afternoon?"),
            ("assistant", "No rain expected."),
        ],
    ),
    (
        "tue",
        at(24, 7),
        [
            ("user", "Morning! Weather forecast please."),
            ("assistant", "Cloudy, 11 degrees."),
            ("user", "I prefer metric units, always."),
            ("assistant", "Noted."),
        ],
    ),
    (
        "wed",
        at(25, 8),
        [
            ("user", "How is the weather looking today?"),
            ("assistant", "Light rain, 9 degrees."),
            ("user", "Do I need an umbrella for the weather later?"),
            ("assistant", "Yes."),
        ],
    ),
]


def play(client: TestClient, user_id: str = "dora", after_end: Callable[[], object] = lambda: None) -> list[str]:
    """The three sessions of ``HISTORY``, each ended; ``after_end`` runs after each end."""
    episode_ids = []
    for sid, stamp, turns in HISTORY:
        body = {"turns": [{"role": r, "content": c, "timestamp": stamp + i * 1000} for i, (r, c) in enumerate(turns)]}
        assert client.post(f"/api/memory/sessions/{sid}/turns", json=body, headers=user(user_id)).status_code == 200
        ended = client.post(f"/api/memory/sessions/{sid}/end", headers=user(user_id)).json()
        assert ended["saved"] is True, ended
        episode_ids.append(ended["episode"]["id"])
        after_end()
    return episode_ids


def conclusions(client: TestClient, user_id: str = "dora", **params: str) -> list[dict]:
    return client.get("/api/memory/conclusions", params=params, headers=user(user_id)).json()["conclusions"]


def test_rule_based_dreamer_on_three_sessions(client: TestClient) -> None:
    episode_ids = play(client)
    found = {(c["type"], c["text"]) for c in conclusions(client)}
    assert ("explicit", "User prefers metric units, always") in found
    assert ("inductive", "User is a morning person who checks weather first thing in the day") in found
    assert ("inductive", "User regularly asks about weather") in found
    assert ("deductive", "User expects distances and temperatures in metric units (km, °C)") in found
    morning = next(c for c in conclusions(client, type="inductive") if "morning" in c["text"])
    assert set(morning["source_episode_ids"]) == set(episode_ids) and 0 < morning["confidence"] <= 1
    profile = client.get("/api/memory/profile", headers=user("dora")).json()["profile"]
    assert "User prefers metric units, always" in profile["preferences"]
    assert any("morning person" in p for p in profile["patterns"])


def test_rerunning_the_dreamer_updates_instead_of_duplicating(client: TestClient) -> None:
    play(client)
    before = conclusions(client)
    again = client.post("/api/memory/dream", headers=user("dora")).json()
    assert again["source"] == "rules" and again["episodes"] == 3
    after = conclusions(client)
    assert sorted(c["id"] for c in after) == sorted(c["id"] for c in before)


def test_ending_a_session_triggers_the_dreamer_by_one_path(client: TestClient, redis_url: str, key_prefix: str) -> None:
    """The sessionEnded event is the Dreamer's only trigger: each ended session claims its run-once
    marker with one SET NX (seen by MONITOR), not once per path that reacts to the end."""
    sentinel = "dreamer-one-path-sentinel"
    claims: list[str] = []
    monitor_client = redis.Redis.from_url(redis_url, socket_timeout=10)
    with monitor_client.monitor() as monitor:
        episode_ids = play(client, "tom")
        redis.Redis.from_url(redis_url).echo(sentinel)
        while sentinel not in (seen := monitor.next_command())["command"]:
            name, _, rest = seen["command"].partition(" ")
            if name == "SET" and rest.startswith(key_prefix) and ":dreamed:" in rest:  # (Redis is shared)
                claims.append(rest.split(" ", 1)[0].rsplit(":dreamed:", 1)[1])
    monitor_client.close()
    assert claims == episode_ids  # one claim per session end, in order


def test_session_ended_event_alone_triggers_the_dreamer_once(coordinator: MemoryCoordinator) -> None:
    from agtos.schemas import Episode

    coordinator.episodes.save(
        Episode(
            user_id="eve",
            session_id="x",
            summary="User likes tea",
            facts=["User likes green tea"],
            type="preference",
        )
    )
    coordinator.events.emit("sessionEnded", {"user_id": "eve", "session_id": "x"})  # no API call involved
    first = coordinator.dreamer.last_report
    assert first is not None and [c.text for c in first.conclusions] == ["User likes green tea"]
    coordinator.dreamer.last_report = None
    coordinator.events.emit("sessionEnded", {"user_id": "eve", "session_id": "x"})
    assert coordinator.dreamer.last_report is None  # the same session is consolidated once


def test_conclusions_delete_and_404(client: TestClient) -> None:
    play(client)
    target = conclusions(client)[0]["id"]
    assert client.delete(f"/api/memory/conclusions/{target}", headers=user("dora")).status_code == 200
    assert target not in [c["id"] for c in conclusions(client)]
    missing = client.delete(f"/api/memory/conclusions/{target}", headers=user("dora"))
    assert missing.status_code == 404 and missing.json()["message"]
    assert (
        client.delete(
            f"/api/memory/conclusions/{conclusions(client)[0]['id']}", headers=user("someone-else")
        ).status_code
        == 404
    )
    assert client.get("/api/memory/conclusions", params={"type": "guess"}).status_code == 422


def _llm_coordinator(settings: Settings, stub: StubModelServer, policy: str = "always") -> MemoryCoordinator:
    slot = LLMSlot(provider="ollama", model="qwen3:4b", base_url=stub.url)
    return MemoryCoordinator(
        settings.with_overrides(
            llm_slots={"consolidation": slot},
            background_work_policy=policy,
            dreamer_retries=2,
            dreamer_retry_delay_s=0.01,
        )
    )


def test_llm_consolidation_is_validated(settings: Settings) -> None:
    with StubModelServer() as stub:
        coordinator = _llm_coordinator(settings, stub)
        try:
            with TestClient(create_app(coordinator=coordinator)) as client:
                listed: list[list[str]] = []  # the episode ids each consolidation request lists, in order
                ids: list[str] = []  # all of them, request after request

                def reply(body: dict) -> str:
                    listing = body["messages"][-1]["content"]
                    listed.append([line[2:].split(" ")[0] for line in listing.splitlines() if line.startswith("- ")])
                    ids.extend(listed[-1])
                    return json.dumps(
                        {
                            "conclusions": [
                                {
                                    "text": "User checks the weather every morning",
                                    "type": "inductive",
                                    "confidence": 0.8,
                                    "source_episode_ids": ids[:2],
                                },
                                {
                                    "text": "User is a wizard",
                                    "type": "guess",
                                    "confidence": 0.9,
                                    "source_episode_ids": ids[:1],
                                },
                                {
                                    "text": "User owns a boat",
                                    "type": "abductive",
                                    "confidence": 0.4,
                                    "source_episode_ids": ["ep-invented"],
                                },
                                {
                                    "text": "User is cold",
                                    "type": "deductive",
                                    "confidence": 7,
                                    "source_episode_ids": ids[:1],
                                },
                            ]
                        }
                    )

                def dreamed() -> None:
                    # each end's Dreamer run (a thread of its own) finishes before the next session
                    # ends: runs that overlap list other windows and merge their sources in any order
                    assert coordinator.dreamer.wait(30)

                stub.queue_chat(reply, reply, reply)
                mon, tue, wed = play(client, "liam", after_end=dreamed)
                # one request per end, each listing the user's episodes so far, newest first
                assert listed == [[mon], [tue, mon], [wed, tue, mon]]
                stored = conclusions(client, "liam")
                # the LLM's one valid conclusion, beside the rules' explicit statement (issue 16)
                assert sorted((c["type"], c["text"]) for c in stored) == [
                    ("explicit", "User prefers metric units, always"),
                    ("inductive", "User checks the weather every morning"),
                ]
                inductive = next(c for c in stored if c["type"] == "inductive")
                # run 1 cited [mon], runs 2 and 3 [mon, tue] (ids[:2]): the stored sources are their union
                assert inductive["source_episode_ids"] == [mon, tue]
                # no turn cited by the LLM: the one of its episodes that says most of it ("morning", "weather")
                assert inductive["source_turn_ids"] == [f"{tue}.t0"]
                turns = coordinator.services.semantic.turns.episode_turns("liam", tue)
                assert turns[0].content == "Morning! Weather forecast please."
                assert coordinator.dreamer.last_report.source == "llm:ollama"
                assert [r.body["format"] for r in stub.requests_to("/api/chat")] == ["json"] * 3
        finally:
            coordinator.close()


def test_malformed_llm_output_stores_no_garbage(settings: Settings) -> None:
    with StubModelServer() as stub:
        coordinator = _llm_coordinator(settings, stub)
        try:
            with TestClient(create_app(coordinator=coordinator)) as client:
                stub.queue_chat("Sure! Here are conclusions: user likes stuff", "{broken", '{"conclusions": 5}')
                play(client, "mia")
                assert coordinator.dreamer.wait(30)
                stored = conclusions(client, "mia")
                assert stored, "the rule-based consolidator still runs"
                texts = " ".join(c["text"] for c in stored)
                assert "likes stuff" not in texts and "broken" not in texts
                assert coordinator.dreamer.last_report.note.startswith("llm output rejected")
        finally:
            coordinator.close()


def test_guard_defers_llm_consolidation_and_gives_up(settings: Settings) -> None:
    with StubModelServer() as stub:
        coordinator = _llm_coordinator(settings, stub, policy="auto")  # a session just ended: defer
        try:
            with TestClient(create_app(coordinator=coordinator)) as client:
                play(client, "noah")
                assert coordinator.dreamer.wait(30)
                assert conclusions(client, "noah") == []
                assert stub.requests_to("/api/chat") == []
                metrics = client.get("/metrics").text
                assert 'agtos_resource_guard_defer_count_total{reason="recent-session-end"}' in metrics
        finally:
            coordinator.close()


def test_ask_returns_evidence_that_exists(client: TestClient, coordinator: MemoryCoordinator, tmp_path: Path) -> None:
    episode_ids = play(client)
    body = client.post(
        "/api/memory/ask", json={"question": "Which units does the user like?"}, headers=user("dora")
    ).json()
    assert body["source"] == "extractive" and "metric" in body["answer"].lower()
    assert body["evidenceIds"]
    # a turn is "<episode id>.t<position>": the exported turn at that place of one of dora's episodes,
    # and the evidence says what that turn says, in the speaker's name
    export_snapshot(coordinator.services, tmp_path / "snap", users=["dora"])
    turns = pq.read_table(tmp_path / "snap" / "turns.parquet").to_pylist()
    said = {f"{t['episode_id']}.t{t['position']}": f"{t['role'].capitalize()}: {t['content']}" for t in turns}
    assert len(said) == 12 and {t["episode_id"] for t in turns} == set(episode_ids)
    known = {
        "conclusion": {c.id for c in coordinator.list_conclusions("dora")},
        "memory": {m.id for m in coordinator.search_memories("dora", "units", 20)},
        "episode": set(episode_ids),
        "turn": set(said),
    }
    for item in body["evidence"]:
        assert item["kind"] == "profile" or item["id"] in known[item["kind"]], item
        assert item["kind"] != "turn" or item["text"] == said[item["id"]], item
    # the answer draws on the turn where dora said it: Tuesday's session, third turn
    assert {"kind": "turn", "id": f"{episode_ids[1]}.t2", "text": "User: I prefer metric units, always."} in [
        {k: e[k] for k in ("kind", "id", "text")} for e in body["evidence"]
    ]
    assert client.post("/api/memory/ask", json={"question": ""}).status_code == 422


LONG = (
    "First, I compared the three flight options. Then I checked baggage rules. Finally, the analysis shows "
    "the 8:40 departure has the best trade-offs between price and layover time. " * 6
)


@pytest.mark.parametrize("valuable", [True, False])
def test_query_as_ingest_endpoint(client: TestClient, valuable: bool) -> None:
    payload = {
        "session_id": "trip",
        "response": LONG if valuable else "It is 5pm.",
        "tool_calls": 2 if valuable else 0,
        "query": "Which flight should I take?",
    }
    body = client.post("/api/memory/responses", json=payload, headers=user("olga")).json()
    assert body["ingest"] is valuable
    listed = client.get("/api/memory/episodes", headers=user("olga")).json()["episodes"]
    assert [e["type"] for e in listed] == (["response_ingest"] if valuable else [])
    if valuable:
        again = client.post("/api/memory/responses", json=payload, headers=user("olga")).json()
        assert again["ingest"] is False and again["reason"] == "dedup-window"


def test_a_response_sent_again_right_after_a_slow_save_is_deduplicated(
    client: TestClient, coordinator: MemoryCoordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dedup window (5 s) counted from the admission, not the save: a first save slower than the window
    (a cold embedder) let the same response, sent again the moment it was answered, be ingested twice."""
    import time

    ingest = coordinator.ingest
    coordinator.services.query_ingest.dedup_window_s = 1.5  # the default 5 s, shortened for the suite's time

    def slow_ingest(*args: object, **kwargs: object) -> object:
        time.sleep(1.7)  # longer than the window
        return ingest(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(coordinator, "ingest", slow_ingest)
    payload = {"session_id": "slow", "response": LONG, "tool_calls": 2, "query": "Which flight should I take?"}
    assert client.post("/api/memory/responses", json=payload, headers=user("omar")).json()["ingest"] is True
    again = client.post("/api/memory/responses", json=payload, headers=user("omar")).json()
    assert (again["ingest"], again["reason"]) == (False, "dedup-window")


def test_idle_sessions_are_ended_for_the_agent(settings: Settings) -> None:
    """An agent that never calls /end: the sweeper saves the session and the Dreamer runs."""
    import time

    coordinator = MemoryCoordinator(settings.with_overrides(session_idle_minutes=0.005))  # 0.3 s
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            body = {
                "turns": [
                    {"role": "user", "content": "I prefer aisle seats on trains."},
                    {"role": "assistant", "content": "Noted."},
                ]
            }
            client.post("/api/memory/sessions/forgotten/turns", json=body, headers=user("ida"))
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and not coordinator.list_conclusions("ida"):
                time.sleep(0.2)  # the episode is saved first, the Dreamer runs right after
            assert [e.session_id for e in coordinator.list_episodes("ida")] == ["forgotten"]
            assert [c.text for c in coordinator.list_conclusions("ida")] == ["User prefers aisle seats on trains"]
            assert coordinator.activity.idle_sessions(0) == []  # ended once, not again
    finally:
        coordinator.close()


@pytest.mark.parametrize(
    ("offset", "morning"),
    [("-08:00", False), ("+02:00", True), ("+03:00", True), ("+05:00", False)],
    ids=["california-evening", "berlin-morning", "moscow-morning", "karachi-noon"],
)
def test_a_morning_habit_is_read_on_the_local_clock(client: TestClient, offset: str, morning: bool) -> None:
    """The weather sessions at 07:05 / 08:05 UTC were read as mornings wherever they were said: sent from
    California (-08:00) they are the evenings before (23:05 / 00:05), sent from Berlin (+02:00) 09:05 / 10:05.
    Moscow (+03:00, 10:05) is a morning that the offset subtracted (04:05) is not; Karachi (+05:00, 12:05) is
    past noon (planted: the offset's sign; 12:00 counted as morning)."""
    minutes = (-1 if offset[0] == "-" else 1) * (int(offset[1:3]) * 60 + int(offset[4:]))
    for sid, stamp, turns in HISTORY:
        local = datetime.fromtimestamp(stamp / 1000, UTC) + timedelta(minutes=minutes)
        when = local.replace(tzinfo=None).isoformat() + offset  # the same instant, written in its local time
        body = {"turns": [{"role": r, "content": c, "timestamp": when} for r, c in turns]}
        assert client.post(f"/api/memory/sessions/{sid}/turns", json=body, headers=user("lena")).status_code == 200
        assert client.post(f"/api/memory/sessions/{sid}/end", headers=user("lena")).json()["saved"] is True
    found = {c["text"] for c in conclusions(client, "lena", type="inductive")}
    assert "User regularly asks about weather" in found
    assert ("User is a morning person who checks weather first thing in the day" in found) is morning, found
