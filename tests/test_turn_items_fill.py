"""``turn_items`` (agtos/tasks/context.py): the matched turn's line is cut to ``hit_tokens``, the room its matched
sentences leave going to the sentences a matched heading introduces (``fill``); a neighbour's line is cut to
NEIGHBOUR_TOKENS (60) without that fill; each line carries its turn's episode, session, place and UTC offset.
These kill the turn_items mutants the context tests of the mutation selection left alive at 4f31718 (they test
``focus``'s fill alone, and read lines' texts only): fill dropped, None or False; a field blanked.

Token counts come from the `tokenizers` library reading the MiniLM vocabulary directly, not from the code under
test."""

from __future__ import annotations

from tokenizers import Tokenizer

from agtos.schemas.records import Role, StoredTurn
from agtos.tasks.context import turn_items
from agtos.tasks.tokens import TOKENIZER_PATH

QUESTION = "Which hotels in Porto did you suggest?"
HEADING = "Here are some hotels in Porto:"
ITEMS = [
    "- Casa Mirador has a rooftop terrace over the old town.",
    "- Pension Adler includes a generous breakfast buffet.",
    "- Saltworks lends bicycles to guests for free.",
    "- Villa Serena has a small spa with a sauna and a plunge pool, and prices go up during festivals.",
    "- Granary Suites has family rooms with two separate bedrooms and a garden for the children.",
]
REPLY = HEADING + "\n" + "\n".join(ITEMS) + "\n"

COUNTER = Tokenizer.from_file(str(TOKENIZER_PATH))
COUNTER.no_truncation()
COUNTER.no_padding()


def tokens(text: str) -> int:
    return len(COUNTER.encode(text, add_special_tokens=False).ids)


def said(position: int, content: str) -> StoredTurn:
    return StoredTurn(
        user_id="u",
        episode_id="ep-1",
        session_id="s",
        position=position,
        role=Role.assistant,
        name="Guide",
        content=content,
        timestamp=1_683_540_000_000,
    )


def test_the_matched_turns_heading_brings_its_items_and_a_neighbours_comes_alone() -> None:
    allowance = sum(tokens(s) + 1 for s in [HEADING, *ITEMS[:3]])  # the heading and three items, to the token
    assert tokens(REPLY) > max(allowance, 60)  # both lines need cutting
    hit, neighbour = said(1, REPLY), said(0, REPLY)
    lines = turn_items([neighbour, hit], hit, 0.5, QUESTION, 0, allowance)
    assert [(line.id, line.neighbour) for line in lines] == [("ep-1.t0", True), ("ep-1.t1", False)]
    assert lines[1].text == "Guide: " + " ".join([HEADING, *ITEMS[:3]]) + " …"
    assert lines[0].text == f"Guide: {HEADING} …"  # a neighbour's line: the heading alone, though 60 tokens hold more


def test_each_line_carries_its_turns_episode_session_place_and_offset() -> None:
    """What the context's ordering, dedupe and dates read from a turn's line (turn_items mutants 43-47, 55, 57 and 64
    at 4f31718 dropped or blanked them unseen)."""
    when = 1_683_540_000_000
    hit = StoredTurn(
        user_id="u",
        episode_id="ep-7",
        session_id="s-3",
        position=4,
        role=Role.user,
        name="Gina",
        content="I adopted a cat.",
        timestamp=when,
        utc_offset=120,
    )
    before = hit.model_copy(update={"position": 3, "content": "Any news?", "utc_offset": -300})
    lines = turn_items([before, hit], hit, 0.75, "cat")
    assert [
        (
            i.tier,
            i.id,
            i.text,
            i.relevance,
            i.timestamp,
            i.episode_id,
            i.session_id,
            i.position,
            i.neighbour,
            i.utc_offset,
        )
        for i in lines
    ] == [
        ("turn", "ep-7.t3", "Gina: Any news?", 0.75, when, "ep-7", "s-3", 3, True, -300),
        ("turn", "ep-7.t4", "Gina: I adopted a cat.", 0.75, when, "ep-7", "s-3", 4, False, 120),
    ]
    unsessioned = hit.model_copy(update={"session_id": ""})
    assert [i.session_id for i in turn_items([unsessioned], unsessioned, 0.75, "cat")] == [None]
