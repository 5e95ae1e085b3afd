"""Context assembly (``agtos/tasks/context.py``, pure): how long texts are cut, which lines are
said already, and in which order tiers and turns are written. Literal expectations: every word
below is one token of the MiniLM tokenizer ("one" … "twenty", "Zebra violin quartz." is 4 tokens)."""

from __future__ import annotations

from agtos.schemas.records import StoredTurn
from agtos.tasks.context import (
    ContextItem,
    _densest,
    _said,
    chunk_offset,
    clip,
    fit_budget,
    focus,
    format_section,
    prioritise,
    turn_items,
)
from agtos.tasks.tokens import count_tokens
from agtos.tasks.verbatim_turns import turn_units

WORDS = (
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen"
    " eighteen nineteen twenty"
)
# five sentences of 4 tokens each (a sentence costs 4 + 1 in focus's budget)
SENTENCES = "Tiger river castle. Zebra violin quartz. Piano garden rocket. Zebra piano river. Lemon mango tiger."
LONG = " ".join(f"Entry {n} records parcel {n * 7} at the depot." for n in range(1, 61))
DAY_MS = 1_683_540_000_000


def test_clip_keeps_a_window_of_max_tokens_marked_where_it_was_cut() -> None:
    assert clip(WORDS, 8) == "one two three four five six seven eight…"
    # the window holding character `around` starts a quarter of the window before it
    assert clip(WORDS, 8, WORDS.index("eleven")) == "…nine ten eleven twelve thirteen fourteen fifteen sixteen…"
    assert (
        clip(WORDS, 8, WORDS.index("fourteen"))
        == "…twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen…"
    )
    assert (
        clip(WORDS, 8, WORDS.index("twenty")) == "…thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty"
    )
    assert clip(WORDS, 2, 3) == "…two three…"  # character 3 ends "one": the window starts at "two"
    assert clip(WORDS, 2, len(WORDS) + 5) == "one two…"  # past the end: the start
    assert clip("one two three\n", 3) == "one two three\n"  # a text that fits is returned as it is


def test_focus_keeps_the_sentences_sharing_most_query_terms_in_their_order() -> None:
    assert count_tokens(SENTENCES) == 20
    assert focus(SENTENCES, {"zebra"}, 20) == SENTENCES  # fits: unchanged
    # 9 tokens hold one sentence: the one sharing two terms, not the first sharing one
    assert focus(SENTENCES, {"zebra", "piano"}, 9) == "… Zebra piano river. …"
    # 10 tokens hold two (4 + 1 each): the best, then the first of the next best; "…" marks each gap
    assert focus(SENTENCES, {"zebra", "piano"}, 10) == "… Zebra violin quartz. … Zebra piano river. …"
    assert focus(SENTENCES, {"piano"}, 10) == "… Piano garden rocket. Zebra piano river. …"  # adjacent: no gap
    assert focus(SENTENCES, {"tiger"}, 10) == "Tiger river castle. … Lemon mango tiger."  # first and last: no ends
    assert focus(SENTENCES, {"tiger"}, 14) == "Tiger river castle. … Lemon mango tiger."
    assert focus(SENTENCES, {"zebra", "tiger"}, 15) == (
        "Tiger river castle. Zebra violin quartz. … Zebra piano river. …"
    )


def test_focus_falls_back_to_the_window_at_the_best_sentence_when_none_fits() -> None:
    # "Piano garden rocket." costs 5 > 4: the 4-token window around its start (one token before it)
    assert focus(SENTENCES, {"rocket"}, 4) == "…. Piano garden rocket…"
    assert focus(SENTENCES, {"zebra", "river"}, 4) == "…. Zebra piano river…"  # the sentence sharing most


def test_focus_on_one_long_unpunctuated_sentence_shows_where_its_query_terms_are() -> None:
    """A dictated turn is one 'sentence' too long for the window: the window goes where most distinct
    query terms sit within it, not to the sentence's start (760d119)."""
    drive = "and then we drove on " * 30
    text = drive + "the wifi password is tangerine kestrel " + "and then we drove on " * 5
    cut = focus(text, {"wifi", "password", "tangerine", "kestrel"}, 20)
    assert "the wifi password is tangerine kestrel" in cut and cut.startswith("…")
    assert count_tokens(cut.strip("…")) <= 20
    # a lone early term loses to three later ones together
    scattered = "my wifi " + drive + "the password is tangerine kestrel " + drive
    cut = focus(scattered, {"wifi", "password", "tangerine", "kestrel"}, 20)
    assert "password is tangerine kestrel" in cut and "my wifi" not in cut


def test_densest_counts_distinct_terms_in_a_window_sliding_over_the_hits() -> None:
    """``_densest(text, start, end, terms, width)``: the first hit whose window (``width`` characters
    from it) holds the most distinct query terms, and how many; only hits in ``text[start:end]``.
    Each expected pair is worked out by hand from the words' character positions."""
    terms = {"zebra", "lemon", "piano"}
    assert _densest("oak oak zebra", 0, 13, {"zebra"}, 10) == (8, 1)  # a lone hit, not the start
    assert _densest("zebra lemon", 0, 11, terms, 6) == (0, 1)  # lemon at 6 is not < 0 + 6
    assert _densest("zebra lemon", 0, 11, terms, 7) == (0, 2)
    tie = "zebra lemon oak oak oak oak oak zebra lemon"  # two windows of 2 terms: the first
    assert _densest(tie, 0, len(tie), terms, 12) == (0, 2)
    later = "zebra oak oak oak oak oak zebra lemon piano"  # the 3 terms lie past ``end``
    assert _densest(later, 0, later.index("zebra", 1), terms, 20) == (0, 1)
    assert _densest(later, 0, len(later), terms, 20) == (later.index("zebra", 1), 3)
    assert _densest("zebra zebra lemon piano", 0, 23, terms, 13) == (6, 3)  # a repeated term counted once
    assert _densest("zebra piano zebra oak", 0, 21, terms, 18) == (0, 2)
    spread = "zebra oak piano lemon zebra piano zebra"  # hits 6 apart: every window holds its own only
    assert _densest(spread, 0, len(spread), terms, 6) == (0, 1)
    repeated = "lemon lemon oak piano piano oak piano zebra oak"
    assert _densest(repeated, 0, len(repeated), terms, 24) == (0, 2)


def item(tier: str, text: str, relevance: float = 0.5, **extra: object) -> ContextItem:
    return ContextItem(tier, extra.pop("id", text), text, relevance, DAY_MS, **extra)  # type: ignore[arg-type]


def texts(items: list[ContextItem]) -> list[str]:
    return [i.text for i in items]


def test_a_fact_said_already_is_left_out() -> None:
    nine = "alpha bravo charlie delta echo foxtrot golf hotel india"
    facts = [
        item("semantic", nine),
        item("semantic", "alpha bravo charlie delta echo foxtrot golf hotel juliet"),  # Jaccard 8/10 = 0.8: said
        item("semantic", "alpha bravo charlie delta echo foxtrot golf kilo lima"),  # 7/11: new
    ]
    assert texts(fit_budget(facts, 1_000)[0]) == [nine, "alpha bravo charlie delta echo foxtrot golf kilo lima"]
    twelve = "amber basil cedar dune ember fern grove heath iris jade kelp lotus"
    inside = "amber basil cedar dune ember fern grove heath iris moss"  # 9 of its 10 words in the longer line
    assert texts(fit_budget([item("semantic", twelve), item("semantic", inside)], 1_000)[0]) == [twelve]
    # lines without content words are compared as written: "OK." twice is one line, "Yes." is another
    short = [
        item("semantic", "I like green tea."),
        item("semantic", "OK."),
        item("semantic", "Yes."),
        item("semantic", "OK.", id="ok-2"),
    ]
    assert texts(fit_budget(short, 1_000)[0]) == ["I like green tea.", "OK.", "Yes."]
    # a kept line without content words does not end the comparison with the lines kept after it
    after_ok = [item("semantic", "OK."), item("semantic", nine), facts[1]]
    assert texts(fit_budget(after_ok, 1_000)[0]) == ["OK.", nine]


def test_a_turn_is_taken_once_by_id_and_once_by_its_words() -> None:
    said = "Gina: I love jazz"
    turns = [
        item("turn", said, id="ep-1.t0", episode_id="ep-1", position=0),
        item("turn", "Gina: I love jazz…", id="ep-1.t0", episode_id="ep-1", position=0, neighbour=True),  # same turn
        item("turn", said, id="ep-2.t3", episode_id="ep-2", position=3),  # the same words the same day
        item("turn", "Gina: I really love jazz", id="ep-3.t1", episode_id="ep-3", position=1),  # a turn of its own
    ]
    assert [i.id for i in fit_budget(turns, 1_000)[0]] == ["ep-1.t0", "ep-3.t1"]


def test_turn_lines_are_written_in_the_order_they_were_said() -> None:
    same_time = [
        item("turn", "Gina: b0", id="ep-b.t0", episode_id="ep-b", position=0),
        item("turn", "Gina: a1", id="ep-a.t1", episode_id="ep-a", position=1),
        item("turn", "Gina: a0", id="ep-a.t0", episode_id="ep-a", position=0),
    ]
    section = format_section(same_time)
    assert section.splitlines()[-3:] == ["- Gina: a0", "- Gina: a1", "- Gina: b0"]


def test_each_tier_ranks_its_own_items() -> None:
    items = [
        item("working", "w1", 0.8),
        item("working", "w2", 0.7),
        item("semantic", "s1", 0.6),  # 0.6 / (10 + 1) = 0.0545
        item("profile", "p1", 0.9),  # 0.5 / (10 + 1) = 0.0455, however relevant it is beside other tiers
    ]
    assert texts(prioritise(items)) == ["w1", "w2", "s1", "p1"]


def long_turn(content: str, position: int = 0) -> StoredTurn:
    return StoredTurn(
        user_id="u",
        episode_id="ep-1",
        session_id="s",
        position=position,
        role="user",
        name="Gina",
        content=content,
        timestamp=DAY_MS,
    )


def test_a_long_turns_window_offsets() -> None:
    turn = long_turn(LONG)
    units = turn_units([turn])
    assert len(units) >= 3
    assert chunk_offset(turn, 0) == 0 and chunk_offset(turn, len(units)) == 0  # the start; no such window: the start
    second = chunk_offset(turn, 1)
    assert second > 0 and LONG[second:].startswith(units[1].text.split("Gina: ", 1)[1])  # where the index window starts
    twice = long_turn(LONG + " " + LONG)  # a pasted log, twice: the window's first occurrence
    assert chunk_offset(twice, 1) == second


def test_a_matched_turn_gets_200_tokens_and_a_neighbour_60_focused_on_the_query() -> None:
    hit = long_turn(LONG, position=1)
    neighbour = long_turn(LONG + " The zebra escaped from the depot.", position=0)
    lines = turn_items([neighbour, hit], hit, 0.5, query="zebra")
    assert [i.neighbour for i in lines] == [True, False]
    assert lines[0].text.endswith("… The zebra escaped from the depot.")  # the neighbour's sentence on the query
    matched = lines[1].text.removeprefix(lines[1].text.split(": ", 1)[0] + ": ")
    assert matched.startswith("Entry 1 records parcel 7 at the depot.") and matched.endswith(
        "…"
    )  # no query word: its start
    assert 195 <= count_tokens(matched) <= 201
    plain = turn_items([neighbour], neighbour, 0.5)[0].text  # no query, window 0 by default: the start
    assert "Entry 1 records parcel 7 at the depot." in plain
    cut = turn_items([neighbour, hit], hit, 0.5)[0].text  # a neighbour without a query: its first 60 tokens
    assert 55 <= count_tokens(cut.split(": ", 1)[1]) <= 61


def test_clip_reads_the_first_tokens_from_a_prefix_long_enough_or_from_the_whole_text() -> None:
    # ten one-token words of 9-10 characters: the first prefix read (to the space after character 5 x 8)
    # holds 5 tokens, too few for 8, so a prefix twice as long is read
    words = "wonderful yesterday something important different community education following tremendous beautiful"
    assert clip(f"{words} {words}", 8) == (
        "wonderful yesterday something important different community education following…"
    )
    # no space to cut at: the whole text's tokens (abc, ##de, ##f, ...), without [CLS]
    assert clip("abcdefghijklmnopqrstuvwxyz", 3) == "abcdef…"
    # the start by default, also when the first token is one character long
    assert clip("a b c d e", 2) == "a b…"
    assert focus("a b c d e", set(), 2) == "a b…"  # no query terms: the start
    # a window asked for around a character of a text of exactly max_tokens tokens: the text as it is
    assert clip("one two three\n", 3, 5) == "one two three\n"


def test_focus_reads_the_terms_of_a_sentence_longer_than_the_memo_limit() -> None:
    long_sentence = "word " * 250  # 1,250 characters: its terms are not memoised
    assert focus(long_sentence + ". Zebra piano river.", {"zebra"}, 10) == "… Zebra piano river."


def test_window_offsets_of_a_turn_that_starts_with_a_space_or_repeats_itself() -> None:
    assert chunk_offset(long_turn(" " + LONG), 0) == 0  # window 0 is the start, whatever its first token
    assert chunk_offset(long_turn("zebra " * 600), 1) == 0  # window 1's words are found first at the start


def test_a_turn_without_a_query_starts_at_its_start() -> None:
    turn = long_turn(LONG + " Then XXXX was written on the parcel.")
    (line,) = turn_items([turn], turn, 0.5)
    assert line.text.startswith("Gina: Entry 1 records parcel 7 at the depot.") and "XXXX" not in line.text


def test_a_turn_taken_is_not_taken_again_in_other_words() -> None:
    turns = [
        item("turn", "Gina: I love jazz and blues", id="ep-1.t0", episode_id="ep-1", position=0),
        item("turn", "Gina: I love jazz…", id="ep-1.t0", episode_id="ep-1", position=0, neighbour=True),
    ]
    assert texts(fit_budget(turns, 1_000)[0]) == ["Gina: I love jazz and blues"]


def test_a_line_is_contained_only_in_a_longer_one() -> None:
    ten = {f"w{n}" for n in range(10)}
    other = ten - {"w9"} | {"x"}  # 9 of 10 shared: Jaccard 9 / 11, below 0.95
    assert not _said(ten, "ten", [(other, 10)], set(), 0.95)  # as long: not contained
    assert _said(ten, "ten", [(other | {"y"}, 11)], set(), 0.95)  # longer: contained


def test_a_tier_without_a_title_is_titled_by_its_name() -> None:
    def used(tier: str) -> int:
        return fit_budget([item(tier, "hello")], 1_000)[1]

    # "### extra long tier name here" is 4 tokens more than "### notes" (one word for five)
    assert used("extra long tier name here") - used("notes") == 4


def test_turn_lines_said_at_the_same_time_without_an_episode_come_first() -> None:
    lines = [
        item("turn", "Gina: e0", id="EP1.t0", episode_id="EP1", position=0),
        item("turn", "Gina: x0", id="x0", position=0),
    ]
    assert format_section(lines).splitlines()[-2:] == ["- Gina: x0", "- Gina: e0"]


def test_the_tokens_counted_are_those_of_the_section_written() -> None:
    """``fit_budget``'s count is what the written section costs, line by line: the header, each title
    once, each day heading once per day (two turns the same day share one), every bullet."""
    day = 86_400_000
    turns = [
        ContextItem("turn", f"t{n}", f"Gina: {text}", 0.9 - n / 10, at, episode_id="e1", position=n)
        for n, (text, at) in enumerate(
            [
                ("I adopted a grey cat called Pixel.", 19_500 * day),
                ("Pixel sleeps on my keyboard all day.", 19_500 * day + 60_000),
                ("We moved to Porto last spring.", 19_530 * day),
            ]
        )
    ]
    fact = ContextItem("semantic", "m1", "Gina works as a nurse.", 0.8, 19_510 * day)
    chosen, used = fit_budget([*turns, fact], 10_000)
    assert len(chosen) == 4
    section = format_section(chosen)
    assert section.count(":\n") >= 2 and used == sum(count_tokens(line) for line in section.split("\n"))
    # a budget one token short of that leaves a line out; the exact figure takes all four
    assert len(fit_budget([*turns, fact], used)[0]) == 4
    assert len(fit_budget([*turns, fact], used - 1)[0]) == 3
