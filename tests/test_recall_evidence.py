"""Search and context return evidence (issue 14, items 5 and 6), through the HTTP API.

A 20-session chat between two named people (a week apart, historical timestamps) is replayed
once; one turn of session 8 alone says where Jon's sister opened her bakery, and says it
happened "yesterday". Search must find that session by the turn (its summary does not say it),
with the turn as a highlight; a 1,000-token context must hold the turn, dated and attributed,
with its date resolved; the default budget must be used, not left a third empty; profile lines
come only when they share a word with the question, three at most; an old session holding the
evidence is not buried under newer, weaker ones.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agtos.tasks.dates import named_days
from agtos.tasks.tokens import count_tokens
from tests.helpers import end_session, gina_jon_turns, isolated_app, user

USER = "gina-and-jon"
START = datetime(2023, 3, 6, 19, 0, tzinfo=UTC)  # a Monday; session n is n weeks later
EVIDENCE_SESSION = 8
NEWS = "My sister Marisol finally opened her bakery, the queue went round the block!"
EVIDENCE = "In Tucson, yesterday. She wants you to come and taste the cinnamon buns."
QUESTION = "In which city did Jon's sister open her bakery?"

TOPICS = [
    ("hiking", "We hiked the ridge trail on Saturday, my calves still hurt.", "Which trail was it, the long loop?"),
    ("cooking", "I tried a new risotto recipe with saffron and peas.", "Saffron is so pricey, was it worth it?"),
    ("work", "My manager moved our standup to eight in the morning.", "Eight is brutal, do you get coffee first?"),
    ("movies", "We watched an old Kurosawa film last night, Ran.", "The colours in that one are unreal."),
    ("garden", "The tomatoes finally turned red on the balcony.", "Do you water them every day in this heat?"),
    ("music", "I started learning the ukulele with an online course.", "Which song are you practising first?"),
    ("travel", "We are thinking about a weekend in Portland in the autumn.", "Portland has great food carts."),
    ("bakery", NEWS, "That is amazing! Where did she open it in the end?"),
    ("books", "I am halfway through a novel about a lighthouse keeper.", "Is it sad? Those usually are."),
    ("fitness", "I signed up for a spin class on Thursdays.", "Spin classes are intense, good luck."),
    ("pets", "The neighbour's cat keeps sleeping on our porch chair.", "Maybe it has adopted you."),
    ("car", "The car needed new brake pads, it cost a fortune.", "Brakes are not something to skimp on."),
    ("family", "My sister called, she is busy with her flour orders.", "Sounds like things are going well."),
    ("weather", "It rained all weekend so we stayed in and played chess.", "Who won the chess games?"),
    ("cooking", "I baked bread for the first time, it came out flat.", "Maybe the yeast was old."),
    ("work", "We got a new coffee machine at the office.", "Finally, the old one was terrible."),
    ("travel", "My cousin is visiting from Denver next month.", "Are you going to show him around?"),
    ("music", "We went to a jazz concert downtown on Friday.", "Jazz downtown is always a good night."),
    ("garden", "The basil died, I think I overwatered it.", "Basil is picky, try a sunnier spot."),
    ("hiking", "Next weekend we want to try the canyon trail.", "Bring lots of water for the canyon."),
]


# what every session is mostly about, so a summary has better candidates than the one-off news
RENOVATION = [
    ("Gina", "We finally started renovating the kitchen, the old cabinets are gone."),
    ("Jon", "Did you pick the oak cabinets or the white lacquer ones in the end?"),
    ("Gina", "The oak ones, with a quartz countertop and a deep ceramic sink."),
    ("Jon", "Quartz countertops are great, they never stain and the contractor can cut them to fit."),
    ("Gina", "The contractor says the plumbing and the electrical work take another three weeks."),
    ("Jon", "Renovations always take longer than the contractor promises, the kitchen will be worth it."),
]


def session_turns(n: int) -> list[dict[str, Any]]:
    """Session ``n`` (1-based): small talk around one topic line said by Jon and answered by Gina."""
    _, said, answer = TOPICS[n - 1]
    start = START + timedelta(weeks=n - 1)
    lines = [
        ("Gina", f"Hey Jon! How was your week? Anything new on the {TOPICS[n - 1][0]} front?"),
        ("Jon", "Hi Gina! Busy as always, but good."),
        ("Gina", "Same here, the days just fly by."),
        *RENOVATION,
        ("Jon", "Oh, and I have news."),
        ("Jon", said),
        ("Gina", answer),
        *([("Jon", EVIDENCE)] if n == EVIDENCE_SESSION else []),
        ("Jon", "Anyway, how is your brother doing?"),
        ("Gina", "He is fine, still building that treehouse for the kids."),
        ("Jon", "Ha, sounds fun. Talk soon!"),
        ("Gina", "Bye Jon, have a good evening."),
    ]
    return gina_jon_turns(start, lines)


@pytest.fixture(scope="module")
def chat(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """The app with the 20 sessions replayed; yields the client and each session's episode id."""
    with isolated_app(redis_url, tmp_path_factory.mktemp("evidence")) as (client, _, _):
        episodes = {}
        for n in range(1, len(TOPICS) + 1):
            sid = f"week-{n:02d}"
            ended = end_session(client, USER, sid, session_turns(n))
            assert ended["saved"], ended
            episodes[sid] = ended["episode"]["id"]
        yield client, episodes


def search(client: TestClient, q: str, **params: Any) -> list[dict[str, Any]]:
    response = client.get("/api/memory/search", params={"q": q, **params}, headers=user(USER))
    assert response.status_code == 200, response.text
    return response.json()["results"]


def context(client: TestClient, query: str, **body: Any) -> dict[str, Any]:
    response = client.post("/api/memory/context", json={"query": query, **body}, headers=user(USER))
    assert response.status_code == 200, response.text
    return response.json()


def under_day(text: str, day: str) -> list[str]:
    """The turn lines of a context under the heading of ``day`` (``24 April 2023:``)."""
    lines = text.splitlines()
    start = lines.index(f"{day}:") + 1
    return list(itertools.takewhile(lambda line: line.startswith("- "), lines[start:]))


def test_a_search_hit_carries_its_session_id_and_the_matching_turn(chat: tuple[TestClient, dict[str, str]]) -> None:
    client, episodes = chat
    evidence_sid = f"week-{EVIDENCE_SESSION:02d}"
    listed = client.get("/api/memory/episodes", params={"limit": 50}, headers=user(USER)).json()["episodes"]
    summary = next(e["summary"] for e in listed if e["id"] == episodes[evidence_sid])
    assert "Tucson" not in summary  # only the turn holds the answer: the summary alone cannot rank it
    hits = search(client, "Tucson bakery", limit=5)
    top = hits[0]
    assert top["sessionId"] == evidence_sid and top["id"] == episodes[evidence_sid]
    assert set(top) >= {"id", "summary", "keywords", "topic", "timestamp", "importance", "type", "score", "matchType"}
    first = top["highlights"][0]
    assert first["speaker"] == "Jon" and first["role"] == "assistant" and first["position"] == 12
    assert first["text"] == EVIDENCE.replace("yesterday", "yesterday [= 23 April 2023]")
    assert first["timestamp"] == int((START + timedelta(weeks=7, seconds=360)).timestamp() * 1000)
    assert 0 < first["score"] <= 1 and 0 < top["score"] <= 1
    # every hit names its own session, and each highlight is a turn of that session
    assert {h["sessionId"] for h in hits} <= set(episodes)
    for hit in hits:
        assert all(h["speaker"] in ("Gina", "Jon") for h in hit["highlights"])


def test_a_1000_token_context_holds_the_one_turn_with_the_answer(chat: tuple[TestClient, dict[str, str]]) -> None:
    client, _ = chat
    body = context(client, QUESTION, token_budget=1_000)
    assert body["tokens"] <= 1_000 and body["tokens"] == count_tokens(body["context"])
    assert "- Jon: In Tucson, yesterday [= 23 April 2023]. She wants you to come" in body["context"]
    assert any(line.startswith("- Jon: In Tucson") for line in under_day(body["context"], "24 April 2023"))
    turn_items = [i for i in body["items"] if i["tier"] == "turn"]
    assert turn_items and all(i["sessionId"] and i["episodeId"] for i in turn_items)
    assert any("Tucson" in i["text"] and i["sessionId"] == f"week-{EVIDENCE_SESSION:02d}" for i in turn_items)


def test_context_lines_are_dated_and_attributed(chat: tuple[TestClient, dict[str, str]]) -> None:
    client, _ = chat
    question = "What did Jon say about the coffee machine and the chess games?"
    text = context(client, question, token_budget=2_000)["context"]
    section = text.split("### From past conversations\n", 1)[1].split("\n###", 1)[0].splitlines()
    assert len(section) >= 10
    heading, said = re.compile(r"^(\d{1,2} [A-Z][a-z]+ 2023):$"), re.compile(r"^- (Gina|Jon): \S")
    assert heading.match(section[0])  # every turn line is under the heading of its day
    assert all(heading.match(line) or said.match(line) for line in section), section
    days = [datetime.strptime(m[1], "%d %B %Y") for m in map(heading.match, section) if m]
    assert len(days) >= 2 and days == sorted(set(days))  # in the order they were said, each day once


def test_the_default_budget_is_spent_not_left_a_third_empty(chat: tuple[TestClient, dict[str, str]]) -> None:
    client, _ = chat
    body = context(client, "What has Jon been cooking and baking lately?")
    assert 800 * 2 / 3 <= body["tokens"] <= 800
    assert body["tokens"] == count_tokens(body["context"])


def test_profile_lines_come_only_when_relevant_and_three_at_most(chat: tuple[TestClient, dict[str, str]]) -> None:
    client, _ = chat
    facts = [f"likes hiking trail{n} in spring" for n in range(40)] + ["allergic to walnuts"]
    assert client.put("/api/memory/profile", json={"facts": facts}, headers=user(USER)).status_code == 200
    try:
        items = context(client, "Which hiking trail should Gina try next?", token_budget=4_000)["items"]
        profile = [i for i in items if i["tier"] == "profile"]
        assert len(profile) == 3 and all(i["text"].startswith("likes hiking trail") for i in profile)
        unrelated = context(client, "What happened to the basil?", token_budget=4_000)["items"]
        assert [i for i in unrelated if i["tier"] == "profile"] == []
    finally:
        client.put("/api/memory/profile", json={"facts": []}, headers=user(USER))


def test_an_old_session_with_the_evidence_is_not_buried_by_newer_ones(
    chat: tuple[TestClient, dict[str, str]],
) -> None:
    client, _ = chat
    # session 1 (the oldest, 19 weeks before the newest) alone names the ridge trail; the newer
    # hiking session (20) and the chatter of every session share only weaker words with the query
    assert search(client, "ridge trail calves", limit=3)[0]["sessionId"] == "week-01"


def test_fact_and_conclusion_items_name_their_source_episode_and_session(
    chat: tuple[TestClient, dict[str, str]],
) -> None:
    client, episodes = chat
    items = context(client, "What are Gina and Jon renovating in the kitchen?", token_budget=8_000)["items"]
    derived = [i for i in items if i["tier"] in ("semantic", "conclusion")]
    assert [i for i in derived if i["tier"] == "semantic"], items
    session_of = {episode: session for session, episode in episodes.items()}
    for i in derived:
        assert i["episodeId"] in session_of and i["sessionId"] == session_of[i["episodeId"]], i


@pytest.mark.parametrize(
    ("text", "days"),
    [
        ("What did Elise buy on 7 Jan 2024?", [date(2024, 1, 7)]),
        ("What class did Kevin have on 21.01.2024?", [date(2024, 1, 21)]),
        ("on January 5th, 2024 and on 2024-01-21", [date(2024, 1, 5), date(2024, 1, 21)]),
        ("the 3rd of May, 2023", [date(2023, 5, 3)]),
        ("01/02/2024", [date(2024, 2, 1), date(2024, 1, 2)]),  # both readings
        ("13/02/2024", [date(2024, 2, 13)]),
        ("31.02.2024 or in May or in 2019", []),  # no such day; no day named
    ],
)
def test_named_days_reads_the_days_a_question_names(text: str, days: list[date]) -> None:
    assert named_days(text) == days


def test_a_question_naming_a_day_finds_the_session_of_that_day(chat: tuple[TestClient, dict[str, str]]) -> None:
    client, _ = chat
    question = "What did Jon tell Gina on 24.04.2023?"  # session 8's day; its words are in every session
    assert search(client, question, limit=3)[0]["sessionId"] == f"week-{EVIDENCE_SESSION:02d}"
    text = context(client, question, token_budget=1_000)["context"]
    assert len(under_day(text, "24 April 2023")) >= 5  # the day's turns
    assert search(client, "What did Jon tell Gina?", limit=3)[0]["sessionId"] != f"week-{EVIDENCE_SESSION:02d}"
