"""Keyword-only hits of equal score come in an order that does not depend on record ids (issue 14, f2).

Hits of exactly equal score share their rank in the RRF (c325e12), but hits found by keyword alone
(all of them in BM25 mode, or outside the vector pool) then kept the BM25 index's order, which is by
record id: a hash of the user and the session. Two users told the same words on the same days got
their evidence in opposite orders. Here the same two sessions (the same line said on 1 and 8 June
2023) are replayed for two users whose episode ids sort in opposite orders, through the HTTP API of
an app searching by keyword (``search_mode="bm25"``, AGTOS_MEMORY_SEARCH_MODE); the context lists
its matched turns, in the order they compete for the budget, the later said first for both users.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from tests.helpers import delete_prefix, end_session, gina_jon_turns, isolation_settings, user

#: two users whose episodes' ids sort the first session first for one, last for the other (checked below)
USERS = ("f2-ties-a", "f2-ties-b")
JUNE_1 = datetime(2023, 6, 1, 18, 0, tzinfo=UTC)
SAID = "I finally baked the zucchini bread from grandma's recipe."
SESSIONS = {
    "june-1": (JUNE_1, [("Gina", "Hi Jon!"), ("Gina", SAID), ("Jon", "Sounds lovely, enjoy!")]),
    "june-8": (JUNE_1 + timedelta(days=7), [("Gina", "Morning Jon!"), ("Gina", SAID), ("Jon", "Again? Nice.")]),
}


@contextmanager
def replayed(
    redis_url: str, folder: Path, users: tuple[str, ...], sessions: dict[str, tuple[datetime, list[tuple[str, str]]]]
) -> Iterator[TestClient]:
    """An app searching by keyword (``search_mode="bm25"``), with ``sessions`` replayed for each of ``users``."""
    prefix = f"agtos-test-f2-ties-{uuid.uuid4().hex[:8]}"
    coordinator = MemoryCoordinator(isolation_settings(redis_url, prefix, folder).with_overrides(search_mode="bm25"))
    try:
        with TestClient(create_app(coordinator=coordinator)) as client:
            for user_id in users:
                for sid, (start, lines) in sessions.items():
                    assert end_session(client, user_id, sid, gina_jon_turns(start, lines))["saved"]
            yield client
    finally:
        coordinator.close()
        delete_prefix(redis_url, prefix)


@pytest.fixture(scope="module")
def chat(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """:data:`SESSIONS` replayed for each of :data:`USERS`."""
    with replayed(redis_url, tmp_path_factory.mktemp("f2ties"), USERS, SESSIONS) as client:
        yield client


def matched_turns(client: TestClient, user_id: str) -> list[dict[str, Any]]:
    """The context's matched turn lines (not their neighbours), in the order they took the budget."""
    response = client.post(
        "/api/memory/context", json={"query": "zucchini bread", "token_budget": 1_000}, headers=user(user_id)
    )
    assert response.status_code == 200, response.text
    return [i for i in response.json()["items"] if i["tier"] == "turn" and SAID in i["text"]]


def test_the_ids_of_the_two_users_sort_their_sessions_in_opposite_orders(chat: TestClient) -> None:
    """The premise: ordered by record id, one user's tied turns would come in the other's reverse order."""
    by_id = []
    for user_id in USERS:
        turns = matched_turns(chat, user_id)
        assert len(turns) == 2, turns
        by_id.append([t["sessionId"] for t in sorted(turns, key=lambda t: t["id"])])
    assert by_id[0] == list(reversed(by_id[1])), by_id


def test_equal_keyword_hits_come_later_said_first_whatever_the_ids(chat: TestClient) -> None:
    for user_id in USERS:
        turns = matched_turns(chat, user_id)
        assert [t["sessionId"] for t in turns] == ["june-8", "june-1"], (user_id, turns)
        assert turns[0]["relevance"] == turns[1]["relevance"] > 0


#: seven sessions saying the same lines a week apart (a run of ties wider than the 5 turn hits a search for one
#: episode reads, and than its 2 summary hits) and users enough that some have the latest sessions' ids sort last
LINES = [("Gina", "Hi Jon!"), ("Gina", SAID), ("Jon", "Sounds lovely, enjoy!")]
TIED = {f"day-{day}": (JUNE_1 + timedelta(days=day - 1), LINES) for day in range(1, 50, 7)}
TIED_USERS = tuple(f"f2-cut-{n}" for n in range(6))


@pytest.fixture(scope="module")
def tied(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """:data:`TIED` replayed for each of :data:`TIED_USERS`."""
    with replayed(redis_url, tmp_path_factory.mktemp("f2cut"), TIED_USERS, TIED) as client:
        yield client


@pytest.mark.parametrize("limit", [1, 2])
def test_a_tie_cut_by_the_page_keeps_the_later_said_whatever_the_ids(tied: TestClient, limit: int) -> None:
    """The seven sessions tie; a page of one or two has room for some of them: the later said, for every
    user, as the first of a longer page. Before, a page was cut before its ties were ordered, so which
    sessions made it was the index's id order (f4's review of aba0c44)."""
    for user_id in TIED_USERS:
        params: dict[str, str | int] = {"q": "zucchini bread", "limit": limit, "mode": "bm25"}
        response = tied.get("/api/memory/search", params=params, headers=user(user_id))
        assert response.status_code == 200, response.text
        sessions = [hit["sessionId"] for hit in response.json()["results"]]
        later_first = [f"day-{day}" for day in range(43, 0, -7)]
        assert sessions == later_first[:limit], (user_id, limit, response.json()["results"])
