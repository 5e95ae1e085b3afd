"""The Dreamer's window and what a conclusion found again keeps (issue 20: the planted Dreamer bugs
that the suite let through, docs/testing.md "Planted bugs left open"): a run reads the user's 50
newest episodes (``EPISODE_WINDOW``), and a conclusion it finds again keeps its creation time and the
sources of the runs before, though those episodes have left the window.

One user's 52 sessions go in through ``POST /api/memory/conversations`` (the back-fill route: one
batch, no Dreamer run of its own), the Dreamer runs through ``POST /api/memory/dream``, and the
consolidation LLM is the local stub server. Expected values are literals.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agtos.config import LLMSlot
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests.helpers import delete_prefix, isolation_settings, user
from tests.stub_servers import StubModelServer

USER = "k1-dreamer-window"
JAN_1 = int(datetime(2026, 1, 1, 9, 0, tzinfo=UTC).timestamp() * 1000)
DAY_MS = 86_400_000
NOT_JSON = "Sure! The user likes things."  # the LLM's reply rejected: the rule-based consolidator runs
COFFEE = "User prefers black coffee"
MEATLESS = "User does not eat meat, so recommendations should avoid meat dishes"


def session(n: int, *said: str) -> dict[str, Any]:
    """Session ``s<n>`` on day ``n`` after 1 January 2026, 09:00 UTC: the user and the assistant in turn."""
    turns = [
        {"role": ("user", "assistant")[i % 2], "content": text, "timestamp": JAN_1 + n * DAY_MS + i * 1000}
        for i, text in enumerate(said)
    ]
    return {"id": f"s{n:02d}", "turns": turns}


def trains(n: int) -> dict[str, Any]:
    """A session worth saving (two questions) that states nothing of weight."""
    hour = n % 12 + 1
    return session(
        n,
        f"Which train leaves for Braga after {hour} o'clock on platform {n}?",
        f"The {hour}:15 from platform {n}.",
        "And is there a later one that evening?",
        "Yes, one more at nine.",
    )


# s00 is dreamt alone first; s01..s51 come later in one batch, so the second run's window is s02..s51
FIRST = [session(0, "I'm vegetarian. I prefer black coffee.", "Noted.")]
LATER = [
    session(1, "I live in Porto.", "Noted."),  # 51st newest: outside the window
    session(2, "I have a dog named Rex.", "Noted."),  # 50th newest: the window's oldest
    *(trains(n) for n in range(3, 51)),
    session(51, "I prefer black coffee. I prefer vegetarian restaurants.", "Noted."),
]


@dataclass
class Dreamt:
    episodes: dict[str, str]  # session id -> episode id (as the import answered)
    runs: list[dict[str, Any]]  # the three POST /dream bodies
    listings: list[int]  # episodes listed to the LLM, per run
    stored: dict[str, dict[str, Any]]  # GET /conclusions after the last run, by text


def ingest(client: TestClient, sessions: list[dict[str, Any]]) -> dict[str, str]:
    response = client.post("/api/memory/conversations", json={"sessions": sessions}, headers=user(USER))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["stored"] == len(sessions), body
    return {s["id"]: s["episodeId"] for s in body["sessions"]}


@pytest.fixture(scope="module")
def dreamt(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dreamt]:
    """Run 1 dreams s00; run 2 the 51 sessions added after it; run 3 the same window, the LLM
    answering "User is vegetarian" (no category) from s51. Runs 1 and 2 fall back to the rules."""
    prefix = f"agtos-test-{uuid.uuid4().hex[:10]}"
    listings: list[int] = []
    with StubModelServer() as stub:
        settings = isolation_settings(redis_url, prefix, Path(tmp_path_factory.mktemp("k1-dreamer")))
        slot = LLMSlot(provider="ollama", model="qwen3:4b", base_url=stub.url)
        coordinator = MemoryCoordinator(settings.with_overrides(llm_slots={"consolidation": slot}))
        episodes: dict[str, str] = {}

        def reply(text: str) -> Any:
            def answer(body: dict[str, Any]) -> str:
                listings.append(body["messages"][-1]["content"].count("\n- ") + 1)
                return text.replace("EP51", episodes.get("s51", ""))

            return answer

        vegetarian = {"text": "User is vegetarian", "type": "explicit", "confidence": 0.9}
        stub.queue_chat(
            reply(NOT_JSON),
            reply(NOT_JSON),
            reply(json.dumps({"conclusions": [vegetarian | {"source_episode_ids": ["EP51"]}]})),
        )
        try:
            with TestClient(create_app(coordinator=coordinator)) as client:
                runs = []
                for batch in (FIRST, LATER, []):
                    episodes |= ingest(client, batch) if batch else {}
                    response = client.post("/api/memory/dream", headers=user(USER))
                    assert response.status_code == 200, response.text
                    runs.append(response.json())
                listed = client.get("/api/memory/conclusions", params={"limit": 200}, headers=user(USER)).json()
                stored = {c["text"]: c for c in listed["conclusions"]}
                yield Dreamt(episodes, runs, listings, stored)
        finally:
            coordinator.close()
            delete_prefix(redis_url, prefix)


def test_a_run_reads_the_50_newest_episodes(dreamt: Dreamt) -> None:
    """Planted: ``EPISODE_WINDOW`` 50 → 20 (the dog of s02, the window's oldest, not found) and a window
    of 51 (Porto, said only in s01, found). The rules see the 50 newest, and so does the LLM."""
    first, second, third = dreamt.runs
    assert (first["episodes"], second["episodes"], third["episodes"]) == (1, 50, 50)
    assert dreamt.listings == [1, 50, 50]
    found = {c["text"]: c["source_session_ids"] for c in second["conclusions"]}
    assert found["User has a dog named Rex"] == ["s02"]
    assert "User lives in Porto" not in found and "User lives in Porto" not in dreamt.stored


def test_a_conclusion_found_again_keeps_the_sources_of_the_episodes_gone_from_the_window(dreamt: Dreamt) -> None:
    """Planted: a conclusion found again stored with the new run's episodes, or turns, instead of the
    union (s00, which first said it, is no longer in the window), or the union newest first; and its
    ``created_at`` replaced by the new run's."""
    ep00, ep51 = dreamt.episodes["s00"], dreamt.episodes["s51"]
    first = {c["text"]: c for c in dreamt.runs[0]["conclusions"]}[COFFEE]
    coffee = dreamt.stored[COFFEE]
    assert coffee["source_session_ids"] == ["s00", "s51"]
    assert coffee["source_episode_ids"] == [ep00, ep51]
    assert coffee["source_turn_ids"] == [f"{ep00}.t0", f"{ep51}.t0"]
    assert coffee["created_at"] == first["created_at"] < coffee["updated_at"]


def test_a_conclusion_found_again_takes_the_new_category_and_keeps_the_old_when_none_is_given(
    dreamt: Dreamt,
) -> None:
    """The deduction "does not eat meat" came from "I'm vegetarian" (diet) in run 1 and from "I prefer
    vegetarian restaurants" (a preference) in run 2: the run that found it last gives its category
    (planted: the stored one kept). Run 3's LLM says "User is vegetarian" without a category: the stored
    "diet" stays (planted: the category replaced by none)."""
    first = {c["text"]: c for c in dreamt.runs[0]["conclusions"]}
    assert (first[MEATLESS]["category"], first["User is vegetarian"]["category"]) == ("diet", "diet")
    assert dreamt.stored[MEATLESS]["category"] == "preference"
    assert dreamt.stored[MEATLESS]["source_session_ids"] == ["s00", "s51"]
    assert dreamt.runs[2]["source"] == "llm:ollama"
    vegetarian = dreamt.stored["User is vegetarian"]
    assert (vegetarian["category"], vegetarian["source_session_ids"]) == ("diet", ["s00", "s51"])


def test_a_rejected_llm_reply_falls_back_to_every_rule(dreamt: Dreamt) -> None:
    """Planted: the fallback after a rejected LLM reply giving the explicit statements only. The
    rule-based consolidator also deduces (and finds the habits): run 1 has the deduction."""
    first = dreamt.runs[0]
    assert first["source"] == "rules" and first["note"].startswith("llm output rejected")
    assert sorted((c["type"], c["text"]) for c in first["conclusions"]) == [
        ("deductive", MEATLESS),
        ("explicit", "User is vegetarian"),
        ("explicit", COFFEE),
    ]
