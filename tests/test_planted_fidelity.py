"""Planted-bug audit of the verbatim-memory path (issue 20; issue 14's promises): each test here
failed with one realistic one-line bug planted in ``tasks/verbatim_turns.py``, ``tasks/speakers.py``,
``tasks/dates.py``, ``memory/context_builder.py``, ``memory/recall.py``,
``memory/ingestion_pipeline.py``, ``memory/conversation_ingest.py``, ``tasks/summarize.py`` or
``tasks/extract.py`` that the rest of the suite let through (docs/testing.md, "Planted bugs in the
verbatim-memory path"), and passes without it. Expected values are literals from issue 14's text.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

import numpy as np
from fastapi.testclient import TestClient

from agtos.memory.context_builder import evidence_items
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.ingestion_pipeline import IngestionReport, episode_rows_first, without_forgotten
from agtos.memory.recall import dated_turns, recall
from agtos.schemas import Episode, IngestItem, Memory, Role, Turn
from agtos.tasks.dates import annotate, format_turn
from agtos.tasks.extract import extract
from agtos.tasks.speakers import utterances
from agtos.tasks.summarize import extractive_summary
from agtos.tasks.verbatim_turns import TurnBatch, TurnUnit, episode_vectors, stored_turns
from tests.helpers import user

MAY_8 = int(datetime(2023, 5, 8, 18, 0, tzinfo=UTC).timestamp() * 1000)


def test_a_date_in_a_name_prefixed_turn_is_resolved_where_it_stands() -> None:
    """Planted: the dates of a turn found in its text less the ``"Caroline: "`` prefix (the stored
    offsets then miss the stored content, and the date is never shown)."""
    sent = [
        ("user", "Caroline: I went to the LGBTQ support group yesterday, it was powerful"),
        ("assistant", "Melanie: That's amazing! I ran a charity race for mental health"),
        ("user", "Caroline: I'm researching adoption agencies for my future family"),
        ("assistant", "Melanie: You'd be a great mum, I'm proud of you"),
    ]
    turns = [Turn(role=Role(r), content=c, timestamp=MAY_8 + i * 60_000) for i, (r, c) in enumerate(sent)]
    first = stored_turns("caro", "ep-1", "s-prefixed", turns)[0]
    assert (first.name, first.content) == ("Caroline", sent[0][1])  # verbatim, prefix kept
    assert [(d.text, d.start, d.date) for d in first.dates] == [("yesterday", 44, "2023-05-07")]
    assert annotate(first.content, first.dates).endswith("support group yesterday [= 7 May 2023], it was powerful")


def test_an_episode_vector_weighs_its_turns_and_its_facts_equally() -> None:
    """Planted: the facts' rows averaged in with the turn units' (three facts then outvote one turn);
    the promise (``episode_vectors``): the mean of the units and the mean of the facts, added with
    equal weight, normalised."""
    units = [TurnUnit("u", "ep-1", 0, 0, "(8 May 2023) Caroline: I bought a red guitar")]
    facts = [Memory(user_id="u", text=f"fact {i}", source_episode_ids=["ep-1"]) for i in range(3)]
    unit_rows = np.array([[1.0, 0.0]], dtype=np.float32)
    fact_rows = np.array([[0.0, 1.0]] * 3, dtype=np.float32)
    made = episode_vectors(units, unit_rows, facts, fact_rows)
    assert list(made) == ["ep-1"]
    np.testing.assert_allclose(made["ep-1"], [0.70710678, 0.70710678], atol=1e-6)  # (1, 1) / sqrt(2)


def test_a_one_off_prefix_in_an_agent_chat_stays_content() -> None:
    """Planted: every conversation of two turns or more read as "every turn carries a prefix"
    (``and`` -> ``or``), so the user's only turn, "Dinner: …", names a speaker "Dinner"."""
    said = utterances(
        [
            Turn(role=Role.user, content="Dinner: pasta with friends tonight, any wine ideas?"),
            Turn(role=Role.assistant, content="A Chianti goes well with tomato sauces."),
        ]
    )
    assert [(u.speaker, u.text) for u in said] == [
        (None, "Dinner: pasta with friends tonight, any wine ideas?"),
        (None, "A Chianti goes well with tomato sauces."),
    ]


def test_a_named_agent_of_an_unnamed_user_is_not_a_person() -> None:
    """Planted: a named assistant counted as a person though the user is unnamed (an agent chat,
    not two people): its own statements then become facts about "Aria"."""
    facts = extract(
        [
            Turn(role=Role.user, content="Can you help me plan a trip to Lisbon in June?"),
            Turn(role=Role.assistant, name="Aria", content="I am a travel planner and I have booked many trips."),
            Turn(role=Role.user, content="I'm vegetarian and I live in Berlin."),
        ]
    ).facts
    assert not [f for f in facts if "Aria" in f]
    assert any("Berlin" in f for f in facts)


def test_the_turns_own_name_wins_over_a_prefix_and_a_lower_case_name_is_capitalised() -> None:
    """Planted: a recurring ``"Mel: "`` prefix preferred to the name the turn was sent with; and
    ``display_name`` capitalising only names in capitals (``isupper`` for ``islower``)."""
    said = utterances(
        [
            Turn(role=Role.user, name="elise", content="I adopted a grey cat from the shelter."),
            Turn(role=Role.assistant, name="Melanie", content="Mel: I ran a charity race for mental health."),
            Turn(role=Role.user, name="elise", content="She sleeps on my keyboard all day."),
            Turn(role=Role.assistant, name="Melanie", content="Mel: My kids want a puppy now."),
        ]
    )
    assert [u.speaker for u in said] == ["Elise", "Melanie", "Elise", "Melanie"]
    assert said[1].text == "I ran a charity race for mental health."  # the prefix is still not content


def test_the_name_of_an_unnamed_users_agent_is_not_a_persons_name() -> None:
    """Planted: ``human_names`` listing every named speaker, the agent "Aria" of an unnamed user
    included; its name then counts as no information, and the user's fact about it is lost."""
    facts = extract(
        [
            Turn(role=Role.user, content="My assistant is called Aria."),
            Turn(role=Role.assistant, name="Aria", content="Happy to help with anything you need."),
        ]
    ).facts
    assert any("Aria" in f for f in facts), facts


def test_a_capitalised_label_that_recurs_is_not_a_speaker() -> None:
    """Planted: the label list matched case-sensitively, so a recurring "Note: " names a speaker."""
    said = utterances(
        [
            Turn(role=Role.user, content="Note: my dentist appointment moved to Tuesday."),
            Turn(role=Role.assistant, content="Got it, Tuesday it is."),
            Turn(role=Role.user, content="Note: the car goes to the garage on Friday."),
        ]
    )
    assert [u.speaker for u in said] == [None, None, None]
    assert said[0].text == "Note: my dentist appointment moved to Tuesday."


def test_a_date_that_opens_the_turn_is_shown() -> None:
    """Planted: ``annotate`` skipping an expression that starts where the last one ended (``<=``
    for ``<``), which drops the one at the very start of a turn."""
    said = Turn(role=Role.user, name="Caroline", content="Yesterday I went to the support group.", timestamp=MAY_8)
    (turn,) = stored_turns("caro", "ep-1", "s-1", [said])
    assert format_turn(turn) == "(8 May 2023) Caroline: Yesterday [= 7 May 2023] I went to the support group."


TRIP = [
    {"role": "user", "name": "Gina", "content": "We finally booked the ferry to Santorini for the first week of July."},
    {"role": "assistant", "name": "Jon", "content": "Santorini in July! Are you staying in Oia or Fira?"},
    {
        "role": "user",
        "name": "Gina",
        "content": "In Oia, my aunt rented a cave house yesterday, it looks on the caldera.",
    },
    {
        "role": "assistant",
        "name": "Jon",
        "content": "I went there in 2019, the sunsets from the caves are unreal.",
    },
]


def test_every_context_item_names_its_own_session(client: TestClient, coordinator: MemoryCoordinator) -> None:
    """Planted: the episode-summary items of a context given the episode id as their ``sessionId``
    (issue 14: evidence is attributed to its session); the turns found without a neighbour, or with
    the wrong one. Read
    before the budget's dedupe, which keeps no summary sentence that a turn line already holds."""
    timed = [{**t, "timestamp": MAY_8 + i * 60_000} for i, t in enumerate(TRIP)]
    posted = client.post("/api/memory/sessions/s-trip/turns", json={"turns": timed}, headers=user("gina"))
    assert posted.status_code == 200, posted.text
    ended = client.post("/api/memory/sessions/s-trip/end", headers=user("gina"))
    assert ended.status_code == 200 and ended.json()["saved"], ended.text
    episode_id = ended.json()["episode"]["id"]
    items, degraded = evidence_items(coordinator.services, "gina", "Where is Gina staying on Santorini?", 2_000, 10)
    assert degraded is None and {i.tier for i in items} >= {"turn", "semantic", "episodic"}, items
    for item in items:
        assert (item.episode_id, item.session_id) == (episode_id, "s-trip"), item
    # planted: the context's turns searched without neighbours (issue 14: "turns with a neighbour")
    assert [i for i in items if i.tier == "turn" and i.neighbour], items
    # planted: a turn of a day the question names given itself, not the next turn, as its neighbour
    # (one turn asked of the index: the others are found by their day alone)
    found = recall(coordinator.services, "gina", "What happened on 8 May 2023?", 5, "bm25", turns=1, neighbours=1)
    windows = {m.turn.position: [t.position for t in m.window] for m in found.turns}
    assert windows == {0: [0, 1], 1: [0, 1, 2], 2: [1, 2, 3], 3: [2, 3]}
    # planted: the turns that name a day ("yesterday [= 7 May 2023]") looked for in that day's
    # sessions only, not in those of the two days after
    named = dated_turns(coordinator.services, "gina", "Oia cave house", [date(2023, 5, 7)])
    assert [(m.turn.session_id, m.turn.position) for m in named] == [("s-trip", 2)]


JON_NEWS = "I lost my job at Door Dash last week, so I am looking for work as a delivery driver."
GINA = [
    "I finally finished renovating the kitchen with new oak cabinets and a marble countertop"
    " after three months of work.",
    "Next spring I am planting tomatoes and basil in the raised garden beds behind the garage.",
    "My sister Marisol opened a bakery in Tucson and sells cinnamon buns every morning.",
    "I signed up for a marathon in October and I run twenty miles every weekend.",
    "Our daughter starts kindergarten in September at the school on Maple Street.",
    "I am learning Portuguese because we plan to move to Lisbon next year.",
    "My husband bought a used camper van and we drive it to the coast every summer.",
    "I started volunteering at the animal shelter on Saturdays walking the older dogs.",
    "My manager promoted me to team lead of the data platform group in March.",
    "We repainted the living room a pale green and hung my grandmother's old mirror.",
]


def test_each_of_two_speakers_gets_a_sentence_into_the_summary() -> None:
    """Planted: each person's best sentence put in first only when three or more speak (``> 2``
    for ``> 1``): Gina's ten statements then fill the 600 characters and Jon is left out."""
    jon = "Did you see the new bakery that opened downtown near the old train station last Saturday?"
    summary = extractive_summary(
        [
            Turn(role=Role.user, name="Gina", content=" ".join(GINA[:3])),
            Turn(role=Role.assistant, name="Jon", content=jon),
            Turn(role=Role.user, name="Gina", content=" ".join(GINA[3:])),
        ]
    )
    assert len(summary) <= 600 and f"Jon: {jon}" in summary, summary


def test_the_summary_picks_another_topic_before_a_repeat() -> None:
    """Planted: maximal marginal relevance adding the redundancy instead of subtracting it, so a
    paraphrase of the kitchen renovation displaces the one sentence about the garden."""
    kitchen = [
        GINA[0],
        "The kitchen renovation took three months because the oak cabinets arrived late from the carpenter.",
        "We chose a white marble countertop for the kitchen and matching oak cabinets for the renovation.",
        "My brother helped me install the oak cabinets in the kitchen during the renovation weekend.",
    ]
    summary = extractive_summary(
        [
            Turn(role=Role.user, name="Gina", content=" ".join(kitchen[:2])),
            Turn(
                role=Role.assistant,
                name="Jon",
                content=JON_NEWS,
            ),
            Turn(role=Role.user, name="Gina", content=" ".join([*kitchen[2:], GINA[1]])),
        ]
    )
    assert GINA[1] in summary and kitchen[1] not in summary, summary


def test_an_ingested_episode_row_is_made_of_its_turns_and_its_facts() -> None:
    """Planted: the ingestion's episode rows made of the turn units alone (the facts' rows not
    handed to ``episode_vectors``). Rows: the memories', then the turn units' (no episode of
    the batch is embedded by its text); out: the episode's row first, then those rows."""
    episode = Episode(id="ep-1", user_id="u", session_id="s-1", summary="Caroline bought a red guitar.")
    facts = [Memory(user_id="u", text=f"fact {i}", source_episode_ids=["ep-1"]) for i in range(2)]
    unit = TurnUnit("u", "ep-1", 0, 0, "(8 May 2023) Caroline: I bought a red guitar")
    embedded = np.array([[0.0, 1.0], [0.0, 1.0], [1.0, 0.0]], dtype=np.float32)
    rows = episode_rows_first([episode], [], facts, TurnBatch([], [unit]), embedded)
    np.testing.assert_allclose(rows, [[0.70710678, 0.70710678], [0.0, 1.0], [0.0, 1.0], [1.0, 0.0]], atol=1e-6)


def test_you_in_a_three_person_chat_is_not_resolved_to_one_of_them() -> None:
    """Planted: "you" rewritten as the first other person even when two others are listening (the
    ``len(others) == 1`` check dropped): Gina's fact would say she owes Jon."""
    facts = extract(
        [
            Turn(role=Role.user, name="Gina", content="I owe you fifty dollars for the concert tickets."),
            Turn(role=Role.assistant, name="Jon", content="My sister Marisol opened a bakery in Tucson."),
            Turn(role=Role.user, name="Maria", content="I moved to Denver in March for my new job."),
        ]
    ).facts
    (gina,) = [f for f in facts if f.startswith("Gina")]
    assert "Jon" not in gina and "Maria" not in gina, facts


def test_a_chat_between_two_people_yields_no_corrections_of_the_agent() -> None:
    """Planted: corrections taken from every user turn, a chat between two people included (they
    correct each other, not an agent: ``agent_chat and`` dropped)."""
    said = extract(
        [
            Turn(role=Role.user, name="Gina", content="The concert is on Saturday at the old theatre."),
            Turn(role=Role.assistant, name="Jon", content="I thought it was on Sunday at the arena."),
            Turn(role=Role.user, name="Gina", content="No, I meant the jazz concert, not the rock one."),
        ]
    )
    assert said.corrections == []
    agent = extract([Turn(role=Role.user, content="No, I meant the jazz concert, not the rock one.")])
    assert agent.corrections == ["No, I meant the jazz concert, not the rock one."]


def test_a_session_taken_before_a_forget_mark_is_not_ingested() -> None:
    """Planted: an item dropped only when the forget-everything mark is later than when it was
    taken (``>`` for ``>=``: a mark of the same millisecond lets it through), or compared with the
    batch's start instead of the item's own ``since_ms``."""
    said = [Turn(role=Role.user, content="I bought a red guitar.", timestamp=MAY_8)]
    items = [
        IngestItem(user_id="same-ms", session_id="s-1", turns=said, since_ms=5_000),
        IngestItem(user_id="taken-earlier", session_id="s-2", turns=said, since_ms=1_000),
        IngestItem(user_id="kept", session_id="s-3", turns=said, since_ms=5_000),
    ]
    report = IngestionReport()
    kept = without_forgotten(report, items, 9_000, {"same-ms": 5_000, "taken-earlier": 2_000, "kept": 4_999})
    assert [i.session_id for i in kept] == ["s-3"]
    assert report.skipped == [
        {"sessionId": "s-1", "reason": "the user forgot everything after it was taken"},
        {"sessionId": "s-2", "reason": "the user forgot everything after it was taken"},
    ]


def test_a_long_turn_ranks_by_its_best_window(client: TestClient, coordinator: MemoryCoordinator) -> None:
    """Planted: a long turn scored by its weakest matched window (``min`` for ``max`` over the
    turn's doc ids in ``recall``): the telescope named once in its first window then ranks it
    below a short turn that names it once, though its last window is all about the telescope."""
    filler = " ".join(
        f"On day {i} of the road trip we drove through farmland, stopped for coffee and talked about music."
        for i in range(1, 21)
    )  # ~450 tokens in all: the turn is cut into windows of 254 tokens
    ending = " ".join(["My grandmother gave me her brass telescope, the brass telescope of her father."] * 3)
    sent = [
        {"role": "user", "name": "Caroline", "content": f"I packed the telescope. {filler} {ending}"},
        {"role": "assistant", "name": "Melanie", "content": "My neighbour sold his old telescope at the flea market."},
    ]
    timed = [{**t, "timestamp": MAY_8 + i * 60_000} for i, t in enumerate(sent)]
    posted = client.post("/api/memory/sessions/s-scope/turns", json={"turns": timed}, headers=user("caro"))
    assert posted.status_code == 200, posted.text
    ended = client.post("/api/memory/sessions/s-scope/end", headers=user("caro"))
    assert ended.status_code == 200 and ended.json()["saved"], ended.text
    found = recall(coordinator.services, "caro", "brass telescope", 5, "bm25", turns=5)
    assert [m.turn.position for m in found.turns] == [0, 1], found.turns
    assert len(found.turns[0].doc_ids) >= 2  # the long turn matched in more than one window


def test_a_working_memory_summary_weighs_as_a_person_not_as_the_agent() -> None:
    """Planted: the working-memory summary turn weighed as an agent's sentence (``or
    u.turn.is_summary`` dropped): the agent's hotel offer then displaces what the summary carried."""
    said = [
        Turn(
            role=Role.system,
            is_summary=True,
            content="User is planning a week in Lisbon in June with a budget of two thousand euros"
            " and wants a quiet hotel near the river.",
        ),
        Turn(role=Role.user, content="Can you find me a hotel in Alfama for the second week of June?"),
        Turn(
            role=Role.assistant,
            content="The Casa Alfama hotel has a quiet double room near the river in the second week of June"
            " for ninety euros a night.",
        ),
    ]
    assert extractive_summary(said, max_chars=250) == (
        "Summary: User is planning a week in Lisbon in June with a budget of two thousand euros and wants a"
        " quiet hotel near the river. User: Can you find me a hotel in Alfama for the second week of June?"
    )


def test_an_agent_chat_summary_keeps_the_users_request_not_the_agents_opening() -> None:
    """Planted: the first turn of an agent chat forced into its summary whoever said it (``and
    u.human`` dropped): the agent's opening pitch then takes the place of the user's request."""
    said = [
        Turn(
            role=Role.assistant,
            content="Welcome back to the Lisbon trip planner, I can compare hotel prices across the Alfama"
            " and Baixa districts for you.",
        ),
        Turn(
            role=Role.user,
            content="Can you book a table for two at a seafood restaurant in Alfama on Friday evening?",
        ),
        Turn(
            role=Role.assistant,
            content="I found three seafood restaurants in Alfama with tables free on Friday evening at eight.",
        ),
        Turn(
            role=Role.user,
            content="I am allergic to shellfish, and my partner Sofia is vegetarian, so we need grilled fish"
            " and vegetable dishes.",
        ),
        Turn(
            role=Role.assistant,
            content="Noted: grilled fish and vegetable dishes, no shellfish, for two on Friday evening in Alfama.",
        ),
    ]
    assert extractive_summary(said, max_chars=300) == (
        "User: Can you book a table for two at a seafood restaurant in Alfama on Friday evening? I am allergic"
        " to shellfish, and my partner Sofia is vegetarian, so we need grilled fish and vegetable dishes."
    )


def test_a_request_to_the_agent_is_not_a_fact() -> None:
    """Planted: a statement that asks the agent for something kept as a fact (``and not
    _REQUEST.search(text)`` dropped): "User need you to book a table …" would be remembered."""
    facts = extract(
        [
            Turn(role=Role.user, content="I need you to book a table for four at Nopa on Friday night."),
            Turn(role=Role.user, content="I would like you to remind me about the dentist on Tuesday."),
            Turn(role=Role.user, content="My sister arrives on Friday."),
        ]
    ).facts
    assert facts == ["The user's sister arrives on Friday"]


def test_the_speakers_names_are_no_information_word_by_word() -> None:
    """Planted: the speakers' names not split into words (``frozenset(people)``), so "Gina Rossi"
    excludes neither "gina" nor "rossi" and introductions become facts ("Gina Rossi is Gina Rossi")."""
    facts = extract(
        [
            Turn(role=Role.user, name="Gina Rossi", content="Hi Jon, I'm Gina Rossi!"),
            Turn(role=Role.assistant, name="Jon", content="Hey Gina! I'm Jon."),
            Turn(role=Role.user, name="Gina Rossi", content="I adopted a grey cat from the shelter."),
        ]
    ).facts
    assert facts == ["Gina Rossi adopted a grey cat from the shelter"]
