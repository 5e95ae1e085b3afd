"""A queued session end decides on the request path only whether the session is kept (issue 15 item 5).

Queue mode answers a session end at once: ``skipped`` with the reason for a session not worth an
episode, else ``queued`` with the reason it is kept. That verdict needs the items found in the
turns (corrections, preferences, outcomes, facts) but not their wording (third person, dates
resolved), keywords, topic or importance: the worker works those out when it stores the episode.
Through the HTTP app, real Redis, no worker (so every end answers at once).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

import agtos.tasks.extract
from agtos.config import Settings
from agtos.schemas import Turn
from agtos.serving.app import create_app
from tests.test_save_heuristics import CASES, conv

# the save heuristics' table (tests/test_save_heuristics.py) with the reasons the API gives
KEPT = {
    "user correction": ("correction",),
    "stated preference": ("preference", "preference-dislike"),
    "task outcome": (
        "task completed",
        "coding task done, said by the agent in full",
        "coding task done, the agent's own verb",
    ),
    "conversation": ("multi-turn discussion",),
    "question answered": ("one question answered with a value",),
    "facts stated": ("single turn with a fact", "a fact said last week"),
}
SKIPPED = {
    "greeting or small talk only": ("greeting only",),
    "single-turn trivial lookup": ("single trivial lookup",),
    "no user turns": ("the agent only",),
}
REASONS = {
    label: (saved, reason)
    for saved, reasons in ((True, KEPT), (False, SKIPPED))
    for reason, labels in reasons.items()
    for label in labels
}
# (the API takes user and assistant turns: the table's tool-turn case is not sent)
TABLE = [(label, turns) for label, _, _, turns in CASES if all(t.role != "tool" for t in turns)] + [
    ("the agent only", conv(("assistant", "Hello, how can I help?"), ("assistant", "Are you still there?"))),
    ("a fact said last week", conv(("user", "Last week I moved to Porto with my partner."), ("assistant", "Nice!"))),
]


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    app = create_app(settings.with_overrides(ingest_mode="queue", ingest_worker=False))
    with TestClient(app) as client:
        yield client


def end(client: TestClient, session: str, turns: list[Turn]) -> dict[str, Any]:
    body = {"turns": [t.model_dump(mode="json", include={"role", "content"}) for t in turns]}
    headers = {"X-User-Id": "vera"}
    assert client.post(f"/api/memory/sessions/{session}/turns", json=body, headers=headers).status_code == 200
    ended = client.post(f"/api/memory/sessions/{session}/end", headers=headers)
    assert ended.status_code == 200, ended.text
    return ended.json()


def test_every_table_case_is_answered_with_its_verdict(client: TestClient) -> None:
    assert sorted(REASONS) == sorted(label for label, _ in TABLE)
    for at, (label, turns) in enumerate(TABLE):
        ended = end(client, f"s{at}", turns)
        saved, reason = REASONS[label]
        assert (ended["saved"], ended["reason"]) == (saved, reason), label
        assert ended["status"] == ("queued" if saved else "skipped"), label
        assert ended["turnsAccepted"] == (len(turns) if saved else 0), label


def test_a_queued_end_does_not_word_what_it_found(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """No third-person rewriting or date resolution on the request path: the worker words the facts."""
    worded: list[str] = []
    real = agtos.tasks.extract.third_person

    def recorded(text: str, *args: Any, **kwargs: Any) -> str:
        worded.append(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(agtos.tasks.extract, "third_person", recorded)
    trip = conv(("user", "I prefer window seats and I live in Porto."), ("assistant", "Noted."))
    ended = end(client, "trip", trip)
    assert (ended["status"], ended["reason"]) == ("queued", "stated preference")
    assert worded == []
    assert client.get("/health").json()["checks"]["ingest-queue"]["depth"] == 1
