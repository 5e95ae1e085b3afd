"""Facts that change over time (issue 16, item 4): a later statement about the same subject and
attribute closes the earlier fact (``validUntil``, ``supersededBy``) instead of deleting it; the
context prefers the current fact and labels the old one "until <month>"; the history shows it."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from agtos.tasks.validity import about, after_replacements, claims_of, supersedes
from tests.helpers import user

MEMORIES = "/api/memory/memories"
JAN_8_2024 = 1_704_700_800_000  # 2024-01-08 08:00 UTC
MAR_15_2024 = 1_710_489_600_000  # 2024-03-15 08:00 UTC
TURN_GAP_MS = 60_000


def session(client: TestClient, who: str, session_id: str, start_ms: int, *said: str) -> None:
    """The user says each line (the assistant acknowledges), a minute apart, then the session ends."""
    turns: list[dict[str, Any]] = []
    for line in said:
        turns.append({"role": "user", "content": line, "timestamp": start_ms + len(turns) * TURN_GAP_MS})
        turns.append({"role": "assistant", "content": "Noted!", "timestamp": start_ms + len(turns) * TURN_GAP_MS})
    posted = client.post(f"/api/memory/sessions/{session_id}/turns", json={"turns": turns}, headers=user(who))
    assert posted.status_code == 200, posted.text
    ended = client.post(f"/api/memory/sessions/{session_id}/end", headers=user(who)).json()
    assert ended["saved"], ended


def memory_with(client: TestClient, who: str, word: str) -> dict[str, Any]:
    memories = client.get(MEMORIES, params={"limit": 100}, headers=user(who)).json()["memories"]
    (found,) = [m for m in memories if word in m["text"]]
    return found


def test_a_move_closes_the_old_home_and_the_context_shows_the_current_one(client: TestClient) -> None:
    session(client, "maria", "s-london", JAN_8_2024, "I live in London with my partner.")
    session(client, "maria", "s-berlin", MAR_15_2024, "I moved to Berlin, the flat is lovely.")

    london, berlin = memory_with(client, "maria", "London"), memory_with(client, "maria", "Berlin")
    # both kept; the old one closed when the new one was stated (the user's turn, not the session's last: +1 minute)
    assert london["validFrom"] == JAN_8_2024
    assert berlin["validFrom"] == MAR_15_2024
    assert (london["validUntil"], london["supersededBy"], london["current"]) == (
        MAR_15_2024,
        berlin["id"],
        False,
    )
    assert (berlin["validUntil"], berlin["supersededBy"], berlin["current"]) == (None, None, True)

    context = client.post(
        "/api/memory/context", json={"query": "Which city does the user live in?"}, headers=user("maria")
    ).json()["context"]
    lines = context.splitlines()
    assert [line for line in lines if "London" in line and "(until March 2024)" in line]
    assert [line for line in lines if "Berlin" in line and "until" not in line]
    assert not [line for line in lines if "User lives in London" in line and "until" not in line]

    changes = client.get(f"{MEMORIES}/{london['id']}/history", headers=user("maria")).json()["changes"]
    assert [(c["origin"], c["action"], c["relatedId"]) for c in changes] == [
        ("extracted", "created", None),
        ("supersession", "superseded", berlin["id"]),
    ]
    assert changes[1]["validUntil"] == MAR_15_2024
    later = client.get(f"{MEMORIES}/{berlin['id']}/history", headers=user("maria")).json()["changes"]
    assert [(c["action"], c["relatedId"]) for c in later] == [("created", None), ("supersedes", london["id"])]

    # a search ranks the current fact before the superseded one
    found = client.get(MEMORIES, params={"q": "where does the user live"}, headers=user("maria")).json()
    ids = [m["id"] for m in found["memories"]]
    assert ids.index(berlin["id"]) < ids.index(london["id"])


def test_a_new_home_closes_the_old_lives_in_edge(client: TestClient) -> None:
    session(client, "zed", "s-a", JAN_8_2024, "My sister Maria lives in London.")
    session(client, "zed", "s-b", MAR_15_2024, "My sister Maria lives in Berlin now.")
    (maria,) = [e for e in client.get("/api/entities", headers=user("zed")).json()["entities"] if e["name"] == "Maria"]
    edges = client.get(f"/api/entities/{maria['id']}/relationships", headers=user("zed")).json()["relationships"]
    homes = {e["other"]["name"]: e for e in edges if e["type"] == "lives-in"}
    assert set(homes) == {"London", "Berlin"}  # both kept
    assert homes["London"]["validFrom"] == JAN_8_2024 + TURN_GAP_MS
    assert (homes["London"]["validUntil"], homes["London"]["supersededBy"]) == (
        MAR_15_2024 + TURN_GAP_MS,
        homes["Berlin"]["id"],
    )
    assert (homes["Berlin"]["validUntil"], homes["Berlin"]["supersededBy"]) == (None, None)


def test_leaving_a_job_closes_it(client: TestClient) -> None:
    session(client, "rui", "s-job", JAN_8_2024, "I work at Feedzai as a data engineer.")
    session(client, "rui", "s-left", MAR_15_2024, "I left Feedzai last week.")
    job, left = memory_with(client, "rui", "works at Feedzai"), memory_with(client, "rui", "left Feedzai")
    assert (job["supersededBy"], job["validUntil"]) == (left["id"], left["validFrom"])
    assert left["current"] is True


def test_a_back_filled_older_statement_is_closed_by_the_later_one(client: TestClient) -> None:
    """Learned in the wrong order (a log back-filled after newer sessions): validity follows when
    each was true, not when it was stored."""
    session(client, "ivo", "s-new", MAR_15_2024, "I moved to Berlin in February.")
    session(client, "ivo", "s-old", JAN_8_2024, "I live in London.")
    london, berlin = memory_with(client, "ivo", "London"), memory_with(client, "ivo", "Berlin")
    assert (london["supersededBy"], london["validUntil"]) == (berlin["id"], MAR_15_2024)
    assert berlin["current"] is True


def test_deleting_the_newer_fact_makes_the_older_current_again(client: TestClient) -> None:
    london = client.post(
        MEMORIES, json={"text": "User lives in London", "valid_from": JAN_8_2024}, headers=user("eva")
    ).json()["memory"]
    berlin = client.post(
        MEMORIES, json={"text": "User lives in Berlin", "valid_from": MAR_15_2024}, headers=user("eva")
    ).json()["memory"]
    closed = client.get(f"{MEMORIES}/{london['id']}", headers=user("eva")).json()
    assert (closed["validUntil"], closed["supersededBy"]) == (MAR_15_2024, berlin["id"])

    assert client.delete(f"{MEMORIES}/{berlin['id']}", headers=user("eva")).status_code == 200
    reopened = client.get(f"{MEMORIES}/{london['id']}", headers=user("eva")).json()
    assert (reopened["validUntil"], reopened["supersededBy"], reopened["current"]) == (None, None, True)
    actions = [
        c["action"] for c in client.get(f"{MEMORIES}/{london['id']}/history", headers=user("eva")).json()["changes"]
    ]
    assert actions == ["created", "superseded", "reopened"]


def test_a_restated_fact_is_current_again(client: TestClient) -> None:
    session(client, "ana", "s1", JAN_8_2024, "I live in London.")
    session(client, "ana", "s2", MAR_15_2024, "I moved to Berlin.")
    session(client, "ana", "s3", MAR_15_2024 + 86_400_000 * 60, "I live in London.")
    london, berlin = memory_with(client, "ana", "London"), memory_with(client, "ana", "Berlin")
    assert london["current"] is True and london["validFrom"] == MAR_15_2024 + 86_400_000 * 60
    assert berlin["supersededBy"] == london["id"]


@pytest.mark.parametrize(
    ("later", "earlier", "ends"),
    [
        ("User moved to Berlin last month", "User lives in London with the user's partner", True),
        ("User's household have moved from Lisbon to Porto", "User lives in Lisbon", True),
        ("User is now working at Google", "User works at Feedzai as a data engineer", True),
        ("User quit Grind House", "User works part-time as a barista at Grind House", True),
        ("User is now a research assistant in a psychology lab", "User works part-time as a barista", True),
        ("User migrated the blog from WordPress to Ghost", "The user's food blog runs on WordPress", True),
        ("User is dating Tom", "User is married to Ana", True),
        # not the same subject, attribute or value: nothing ends
        ("Maria lives in Berlin", "User lives in London", False),
        ("User's friend lives in Paris", "User lives in London", False),
        ("User lives in London with the user's dog", "User lives in London", False),
        ("User works at Feedzai in Lisbon", "User lives in London", False),
        ("User left the party early", "User works at Feedzai", False),
        ("User prefers tea", "User prefers coffee", False),
    ],
)
def test_which_later_fact_ends_an_earlier_one(later: str, earlier: str, ends: bool) -> None:
    assert supersedes(claims_of(later), earlier, claims_of(earlier)) is ends


def test_episode_search_ranks_the_session_with_the_current_fact_first(client: TestClient) -> None:
    """The session whose fact a later session superseded goes below that session, unless the
    question asks how things were."""
    session(client, "leo", "s-wp", JAN_8_2024, "My food blog runs on WordPress and traffic is flat.")
    session(client, "leo", "s-ghost", MAR_15_2024, "I finally migrated the blog from WordPress to Ghost.")

    def ranked(q: str) -> list[str]:
        hits = client.get("/api/memory/search", params={"q": q}, headers=user("leo")).json()["results"]
        return [h["sessionId"] for h in hits]

    assert ranked("Which blogging platform is my site on?")[:2] == ["s-ghost", "s-wp"]
    assert ranked("Which platform did my blog run on before?")[0] == "s-wp"


@pytest.mark.parametrize(
    ("order", "replaced_by", "expected"),
    [
        (["a", "b", "c"], {"a": "c"}, ["b", "c", "a"]),
        (["a", "b", "c"], {"c": "a"}, ["a", "b", "c"]),  # already below its replacement
        (["a", "b"], {"a": "z"}, ["a", "b"]),  # the replacement is not among the hits
    ],
)
def test_after_replacements(order: list[str], replaced_by: dict[str, str], expected: list[str]) -> None:
    assert after_replacements(order, replaced_by) == expected


@pytest.mark.parametrize(
    ("query", "text", "expected"),
    [
        ("Which blogging platform is my site on?", "The user's food blog runs on WordPress", True),
        ("Where do I work part-time?", "User works part-time as a barista", True),
        ("Where does the user live?", "User's favourite colour is green", False),  # 'user' alone is no match
        ("How do I fix the mould?", "User lives in Lisbon", False),
    ],
)
def test_about(query: str, text: str, expected: bool) -> None:
    assert about(query, text) is expected
