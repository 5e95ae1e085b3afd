"""Planted-bug audit of recall and context assembly (issue 20; issue 14's items 5 and 6): each test
here failed with one realistic one-line bug planted in ``memory/recall.py``,
``memory/context_builder.py`` or ``memory/episodic.py`` that the rest of the suite let through
(docs/testing.md, "Planted bugs in recall and context assembly"), and passes without it.

One user's hand-written two-speaker sessions (Gina and Jon, dated days of May 2023) are replayed
once through ``POST /api/memory/sessions/{id}/turns`` and ``…/end``; everything is read back through
``GET /api/memory/search`` and ``POST /api/memory/context``. Expected values are literals.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.helpers import end_session, gina_jon_turns, isolated_app, user
from tests.test_recall_evidence import RENOVATION

USER = "p4-gina-and-jon"
MAY_1 = datetime(2023, 5, 1, 18, 0, tzinfo=UTC)
# the lighthouse is what session "lh-main" is about: its summary says so, each of its long turns names it once
LIGHTHOUSE = [
    ("Gina", "We spent the whole weekend restoring the old lighthouse on the headland with the volunteer group."),
    ("Jon", "Did the volunteer group manage to repaint the lantern room at the top of that lighthouse as well?"),
    ("Gina", "Yes, and the keeper's cottage next to the lighthouse finally got a new slate roof and fresh windows."),
    ("Jon", "It must look wonderful from the harbour now that the lighthouse is white again after all those years."),
    ("Gina", "The council wants to open the lighthouse to visitors every Sunday afternoon from next summer onwards."),
]
# five sessions about the kitchen, each with one short aside naming the lighthouse (too little said for a
# summary sentence: one informative word)
ASIDES = 5
ASIDE = "Oh, the lighthouse!"


def aside_session(n: int) -> list[tuple[str, str]]:
    return [*RENOVATION[:4], ("Jon", ASIDE), *RENOVATION[4:]]


# a session that crosses midnight (UTC): Gina's fact is stated on 8 May, the session ends on 9 May
MAY_8_LATE = datetime(2023, 5, 8, 23, 58, tzinfo=UTC)
ALLERGIES = [
    ("Gina", "I found out I am allergic to walnuts, the doctor confirmed it with a skin test."),
    ("Jon", "I am allergic to cats myself, I sneeze all day whenever one is around."),
    ("Gina", "So no walnut cake at the party then, and no cats either."),
    ("Jon", "Agreed, I will bake the lemon cake instead and keep the neighbour's cat outside."),
    ("Gina", "Perfect, the lemon cake it is for the party on Saturday."),
    ("Jon", "I will buy the lemons at the market tomorrow morning."),
]
# a turn of more than one embedder window (256 tokens): a dog is named only in its last sentence
FILLER = " ".join(
    f"On day {n} of the renovation the crew sanded cabinet door number {n} and stacked it in the garage."
    for n in range(1, 15)
)
DOG = "Our golden retriever puppy chews every shoe in the house and sleeps on the sofa all afternoon."
# the oldest session, between two other people: only the latest three sessions say who speaks now
CLIMBING = [
    ("Ann", "We climbed the north face of the quarry wall on Sunday morning."),
    ("Bob", "The north face is tough, did you place your own protection on the climb?"),
    ("Ann", "Yes, and the last pitch took us almost two hours in the wind."),
    ("Bob", "Two hours on one pitch is brutal, next time we start at dawn."),
]
SESSIONS: dict[str, tuple[datetime, list[tuple[str, str]]]] = {
    "climbing": (MAY_1 - timedelta(days=11), CLIMBING),
    "long-turn": (MAY_1 + timedelta(days=12), [("Gina", f"{FILLER} {DOG}"), ("Jon", "What a month that was!")]),
    "lh-main": (MAY_1, LIGHTHOUSE),
    "allergies": (MAY_8_LATE, ALLERGIES),
    **{f"lh-aside-{n}": (MAY_1 + timedelta(days=n), aside_session(n)) for n in range(1, ASIDES + 1)},
}


@pytest.fixture(scope="module")
def chat(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, Any]]]:
    """The app with :data:`SESSIONS` replayed; yields the client and each session's ended episode."""
    with isolated_app(redis_url, tmp_path_factory.mktemp("p4")) as (client, _, _):
        episodes = {}
        for sid, (start, lines) in SESSIONS.items():
            turns = gina_jon_turns(start, lines)
            for turn, (name, _) in zip(turns, lines, strict=True):
                turn |= {"name": name, "role": "user" if name in ("Gina", "Ann") else "assistant"}
            ended = end_session(client, USER, sid, turns)
            assert ended["saved"], ended
            episodes[sid] = ended["episode"]
        yield client, episodes


def search(client: TestClient, q: str, **params: Any) -> list[dict[str, Any]]:
    response = client.get("/api/memory/search", params={"q": q, **params}, headers=user(USER))
    assert response.status_code == 200, response.text
    return list(response.json()["results"])


def context(client: TestClient, query: str, **body: Any) -> dict[str, Any]:
    response = client.post("/api/memory/context", json={"query": query, **body}, headers=user(USER))
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_a_session_whose_turn_matches_best_outranks_one_only_its_summary_matches(
    chat: tuple[TestClient, dict[str, Any]],
) -> None:
    """Planted: the evidence weights of turns and summaries swapped (turn 0.5, summary 1). The verbatim
    turns are the main evidence (recall's docstring; weights turn 1, summary 0.5): at ``limit=1`` the
    BM25 search keeps five turn hits, the five short asides, so "lh-main" has only its summary hit,
    and an aside's session must come first."""
    client, episodes = chat
    assert "lighthouse" in episodes["lh-main"]["summary"].lower()
    for n in range(1, ASIDES + 1):
        assert "lighthouse" not in episodes[f"lh-aside-{n}"]["summary"].lower()
    top = search(client, "lighthouse", limit=1, mode="bm25")
    assert top[0]["sessionId"].startswith("lh-aside-"), top
    assert [(h["speaker"], h["text"]) for h in top[0]["highlights"]] == [("Jon", ASIDE)]


def test_a_hit_shows_its_three_best_matching_turns_best_first_and_scores_by_the_best(
    chat: tuple[TestClient, dict[str, Any]],
) -> None:
    """Planted: four highlights (``<`` as ``<=``); the turn hits searched at ``limit`` instead of
    five per hit asked for (one highlight at ``limit=1``); the turn hits ordered by position, not
    score; a hit scored by its last evidence, not its best. README: ``highlights`` are the matching
    turns (at most three, best first); a hit ranks and scores by its best evidence."""
    client, _ = chat
    hits = search(client, "restoring the lighthouse with the volunteer group", limit=1)
    assert [h["sessionId"] for h in hits] == ["lh-main"]
    shown = hits[0]["highlights"]
    said = dict((text, name) for name, text in LIGHTHOUSE)
    assert len(shown) == 3 and all(said[h["text"]] == h["speaker"] for h in shown), shown
    scores = [h["score"] for h in shown]
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[-1], scores
    assert hits[0]["score"] >= scores[0]


def test_bm25_highlight_scores_stay_below_one_and_favour_the_short_turn(
    chat: tuple[TestClient, dict[str, Any]],
) -> None:
    """Planted: the turn hits' scores scaled as hybrid RRF whatever the mode (every BM25 turn at 1.0).
    README: scores are 0-1 in every mode; BM25's is squashed (raw / (raw + 1)), and of two turns
    naming the word once, the shorter one scores higher (BM25's length normalisation)."""
    client, _ = chat
    hits = search(client, "lighthouse", limit=10, mode="bm25")
    by_session = {h["sessionId"]: h["highlights"] for h in hits}
    aside = by_session["lh-aside-1"][0]["score"]
    main = [h["score"] for h in by_session["lh-main"]]
    assert 0 < max(main) < aside < 1, (main, aside)


def test_the_profile_lines_sharing_most_words_with_the_question_come_first(
    chat: tuple[TestClient, dict[str, Any]],
) -> None:
    """Planted: the relevant profile lines kept in the profile's order, not those sharing most words
    first (the line that shares three words listed fourth is then cut by the three-line cap).
    README: profile lines only when they share a word with the question, at most three."""
    client, _ = chat
    facts = ["owns a red kayak", "wants a lighter paddle", "lost a helmet at the lake", "kayak paddle helmet shop"]
    assert client.put("/api/memory/profile", json={"facts": facts}, headers=user(USER)).status_code == 200
    try:
        items = context(client, "Which kayak paddle helmet should Gina buy?", token_budget=2_000)["items"]
    finally:
        client.put("/api/memory/profile", json={"facts": []}, headers=user(USER))
    profile = [i["text"] for i in items if i["tier"] == "profile"]
    assert sorted(profile) == sorted(facts[i] for i in (3, 0, 1)), profile


def semantic_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in body["items"] if i["tier"] == "semantic"]


def test_a_fact_is_dated_when_it_was_said_not_when_its_session_ended(
    chat: tuple[TestClient, dict[str, Any]],
) -> None:
    """Planted: a memory line dated by its source episode (the session's last turn, 9 May) instead of
    its own ``valid_from`` (the turn that stated it, 8 May 23:58:30 UTC); every memory dropped when
    the question names no speaker (``asked and`` dropped from the speakers' filter), both also caught
    elsewhere; an episode dated by its first turn instead of its last (``episodic.build_episode``)."""
    client, episodes = chat
    assert datetime.fromtimestamp(episodes["allergies"]["timestamp"] / 1000, UTC).date().isoformat() == "2023-05-09"
    body = context(client, "Who sneezes all day?", token_budget=2_000)
    facts = [i for i in semantic_items(body) if "sneezes" in i["text"]]
    assert [(i["text"], i["timestamp"], i["sessionId"]) for i in facts] == [
        ("Jon sneezes all day whenever one is around", int(MAY_8_LATE.timestamp() * 1000) + 30_000, "allergies")
    ]
    assert "- (8 May 2023) Jon sneezes all day whenever one is around" in body["context"].splitlines()


def test_a_long_turn_found_by_meaning_shows_the_window_that_matched(chat: tuple[TestClient, dict[str, Any]]) -> None:
    """Planted: a long turn's highlight cut around its first window whatever window matched. README: a turn
    over 256 tokens is cut to its sentences that share the query's words; none does here (the dog is
    found by meaning), so the highlight is the window that matched: the one naming the puppy."""
    client, _ = chat
    hits = search(client, "Which pet lives with them?", limit=10)
    shown = next(h["highlights"] for h in hits if h["sessionId"] == "long-turn")
    assert shown[0]["speaker"] == "Gina" and "golden retriever puppy" in shown[0]["text"], shown
    # and its context line (tasks/context cuts it the same way)
    lines = context(client, "Which pet lives with them?", token_budget=2_000)["context"].splitlines()
    assert [line for line in lines if line.startswith("- Gina: …") and "golden retriever puppy" in line], lines


def test_a_live_sessions_context_holds_its_summary_not_its_recent_turns(
    chat: tuple[TestClient, dict[str, Any]],
) -> None:
    """Planted: the working memory's raw turns put in the context instead of its summaries. 31 turns
    (``AGTOS_WM_MAX_MESSAGES`` 30) compact into one summary and the six latest turns; the latest turns
    are the agent's own prompt already, the summary is what the context adds (context_builder)."""
    client, _ = chat
    lines = [("Gina" if n % 2 else "Jon", f"Stage {n} of the bike trip went along the coast road.") for n in range(31)]
    turns = gina_jon_turns(MAY_1 + timedelta(days=20), lines)
    posted = client.post("/api/memory/sessions/live/turns", json={"turns": turns}, headers=user(USER))
    assert posted.status_code == 200, posted.text
    items = context(client, "How did the bike trip go?", session_id="live", token_budget=2_000)["items"]
    working = [i["text"] for i in items if i["tier"] == "working"]
    assert len(working) == 1 and working[0].startswith("Summary of earlier conversation: "), working


def test_the_speakers_left_out_of_a_question_are_those_of_the_latest_sessions(
    chat: tuple[TestClient, dict[str, Any]],
) -> None:
    """Planted: the people who speak read from the oldest sessions, not the latest three, for the
    context and for ``ask``. Ann spoke only in the oldest session: in a question she is a person
    talked about, not a speaker, so the profile line naming her shares a word with it (issue 14: profile
    lines when relevant; README: the names of the latest three sessions' speakers are left out of a query)."""
    client, _ = chat
    facts = ["Ann is the sister of Gina"]
    assert client.put("/api/memory/profile", json={"facts": facts}, headers=user(USER)).status_code == 200
    try:
        items = context(client, "Where does Ann work?", token_budget=2_000)["items"]
        asked = client.post("/api/memory/ask", json={"question": "Where does Ann work?"}, headers=user(USER))
    finally:
        client.put("/api/memory/profile", json={"facts": []}, headers=user(USER))
    assert [i["text"] for i in items if i["tier"] == "profile"] == facts
    assert asked.status_code == 200, asked.text
    assert [e["text"] for e in asked.json()["evidence"] if e["kind"] == "profile"] == facts, asked.json()
