"""One ingestion run over several sessions stores what one run per session stores (issue 14/15).

The queue's worker takes up to 32 queued session ends into one run. A user reading a memory,
its sources or its history must see the same thing whichever way the worker batched: a fact
said again in a later session is ``restated`` by that session's episode, a later session's fact
closes (supersedes) an earlier session's, and a closed fact said again after that is current
again (``reopened``). Real Redis and models, through the HTTP routes in queue mode; ann's
sessions land in one run, bob's in one run each; expected values from the README's history
rules and tests/test_bitemporal.py's statements."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from tests.helpers import user
from tests.test_ingest_queue import end, queue_client, queue_coordinator, queue_settings

__all__ = ["queue_client", "queue_coordinator", "queue_settings"]  # the fixtures, shared

MEMORIES = "/api/memory/memories"
JAN = 1_704_700_800_000  # 2024-01-08 08:00 UTC
MAR = 1_710_489_600_000  # 2024-03-15 08:00 UTC
MAY = MAR + 60 * 86_400_000  # 2024-05-14 08:00 UTC
LONDON, BERLIN = "I live in London.", "I moved to Berlin."
LIVES, MOVED = "User lives in London", "User moved to Berlin"
CREATED = ("created", "extracted", None)


def by(session: str) -> tuple[str, str, None, str]:
    return ("restated", "extracted", None, session)


def closed_by(text: str) -> tuple[str, str, str, None]:
    return ("superseded", "supersession", text, None)


def closes(text: str) -> tuple[str, str, str, None]:
    return ("supersedes", "supersession", text, None)


# (sessions: (id, when, what the user says)), {memory text: (sessions, valid from, valid until,
# superseded by, history: (action, origin, other memory's text, session of the entry's episode))}
CASES = {
    "said twice": (
        (("s1", JAN, LONDON), ("s2", MAR, LONDON)),
        {LIVES: (["s1", "s2"], JAN, None, None, [(*CREATED, "s1"), by("s2")])},
    ),
    "moved": (
        (("s1", JAN, LONDON), ("s2", MAR, BERLIN)),
        {
            LIVES: (["s1"], JAN, MAR, MOVED, [(*CREATED, "s1"), closed_by(MOVED)]),
            MOVED: (["s2"], MAR, None, None, [(*CREATED, "s2"), closes(LIVES)]),
        },
    ),
    "said twice, then moved": (
        (("s1", JAN, LONDON), ("s2", MAR, LONDON), ("s3", MAY, BERLIN)),
        {
            LIVES: (["s1", "s2"], JAN, MAY, MOVED, [(*CREATED, "s1"), by("s2"), closed_by(MOVED)]),
            MOVED: (["s3"], MAY, None, None, [(*CREATED, "s3"), closes(LIVES)]),
        },
    ),
    "moved, then back": (
        (("s1", JAN, LONDON), ("s2", MAR, BERLIN), ("s3", MAY, LONDON)),
        {
            LIVES: (
                ["s1", "s3"],
                MAY,
                None,
                None,
                [(*CREATED, "s1"), closed_by(MOVED), ("reopened", "extracted", None, "s3"), closes(MOVED)],
            ),
            MOVED: (["s2"], MAR, MAY, LIVES, [(*CREATED, "s2"), closes(LIVES), closed_by(LIVES)]),
        },
    ),
}


def said(line: str, at_ms: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": line, "timestamp": at_ms},
        {"role": "assistant", "content": "Noted!", "timestamp": at_ms + 60_000},
    ]


def stored(client: TestClient, who: str, session: dict[str, str]) -> dict[str, tuple[Any, ...]]:
    """Each memory by its text as :data:`CASES` has it (ids as texts and session ids, its
    ``sourceSessionIds`` checked to be its episodes' sessions); ``session``: episode id → session
    id, as the ends answered."""
    memories = client.get(MEMORIES, params={"limit": 100}, headers=user(who)).json()["memories"]
    text = {m["id"]: m["text"] for m in memories}
    out: dict[str, tuple[Any, ...]] = {}
    for m in memories:
        sessions = [session[e] for e in m["sourceEpisodeIds"]]
        assert m["sourceSessionIds"] == sessions
        assert m["current"] is (m["validUntil"] is None)
        changes = client.get(f"{MEMORIES}/{m['id']}/history", headers=user(who)).json()["changes"]
        history = [
            (c["action"], c["origin"], text.get(c["relatedId"]), session.get(c["sourceEpisodeId"])) for c in changes
        ]
        out[m["text"]] = (sessions, m["validFrom"], m["validUntil"], text.get(m["supersededBy"]), history)
    return out


@pytest.mark.parametrize("case", CASES)
def test_sessions_taken_in_one_run_are_stored_as_in_one_run_each(
    queue_client: TestClient, queue_coordinator: MemoryCoordinator, case: str
) -> None:
    sessions, expected = CASES[case]
    worker, session = queue_coordinator.ingest_worker(), {}
    for name, at_ms, line in sessions:
        session[end(queue_client, "ann", name, said(line, at_ms))["episodeId"]] = name
    assert worker.run_once(block=False) == len(sessions)  # one run
    for name, at_ms, line in sessions:
        session[end(queue_client, "bob", name, said(line, at_ms))["episodeId"]] = name
        assert worker.run_once(block=False) == 1  # one run each
    assert stored(queue_client, "bob", session) == expected
    assert stored(queue_client, "ann", session) == expected
