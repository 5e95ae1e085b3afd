"""Ranking core: RRF, BM25 and context assembly against literals from the spec and an independent BM25.

Expected values are written out (RRF k = 60, BM25 k1 = 1.2 / b = 0.75, context tier weights over k = 10,
Jaccard 0.8) or computed by ``bm25s`` (a maintained BM25 implementation), never by the code under test.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import pytest

from agtos.schemas import ResolvedDate, StoredTurn
from agtos.tasks import bm25
from agtos.tasks.context import ContextItem, assemble, fit_budget, format_section, prioritise, turn_items
from agtos.tasks.ranking import fuse_evidence, max_evidence_score, reciprocal_rank_fusion
from agtos.tasks.tokens import count_tokens
from tests.helpers import bm25_oracle

DAY_MS = 86_400_000
NOW_MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z


# -- RRF ------------------------------------------------------------------------------
def test_rrf_default_k_is_60_and_weights_default_to_one() -> None:
    assert reciprocal_rank_fusion([["a", "b"]]) == [("a", pytest.approx(1 / 61)), ("b", pytest.approx(1 / 62))]
    fused = dict(reciprocal_rank_fusion([["a", "b"], ["b"]]))
    assert fused == pytest.approx({"a": 1 / 61, "b": 1 / 62 + 1 / 61})


def test_rrf_k_zero_is_allowed_and_negative_k_names_the_problem() -> None:
    assert reciprocal_rank_fusion([["a", "b"]], k=0) == [("a", 1.0), ("b", 0.5)]
    with pytest.raises(ValueError, match=r"^k must be >= 0$"):
        reciprocal_rank_fusion([["a"]], k=-1)
    with pytest.raises(ValueError, match=r"^got 1 weights for 2 lists$"):
        reciprocal_rank_fusion([["a"], ["b"]], weights=[1.0])


def test_rrf_duplicates_count_once_at_their_best_rank_per_list() -> None:
    # "a" at ranks 1 and 3 of list 0 counts 1/(60+1) only; "b" keeps rank 2, "c" rank 4
    fused = dict(reciprocal_rank_fusion([["a", "b", "a", "c"]]))
    assert fused == pytest.approx({"a": 1 / 61, "b": 1 / 62, "c": 1 / 64})


def test_rrf_weights_scale_each_list_and_order_is_by_descending_score() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "b"]], k=1, weights=[1.0, 3.0])
    # a: 1/2; b: 1/3 + 3/3; c: 1/4 + 3/2
    assert [d for d, _ in fused] == ["c", "b", "a"]
    assert [s for _, s in fused] == pytest.approx([1.75, 4 / 3, 0.5])


# -- BM25 tokenisation ----------------------------------------------------------------
def test_fuse_evidence_ranks_owners_by_their_best_evidence_or_their_first_depth_items() -> None:
    owners = {"turn": ["e1", "e1", "e2"], "episode": ["e2", "e3"]}
    weights = {"turn": 1.0, "episode": 0.5}
    # e1: 1/61 = 0.01639; e2: 1/63 + 0.5/61 = 0.02407; e3: 0.5/62 = 0.00806
    fused = fuse_evidence(owners, weights)
    assert [o for o, _ in fused] == ["e2", "e1", "e3"]
    assert [v for _, v in fused] == pytest.approx([1 / 63 + 0.5 / 61, 1 / 61, 0.5 / 62])
    # depth 2: e1 also counts its second turn, 1/61 + 1/62 = 0.03252
    assert [o for o, _ in fuse_evidence(owners, weights, depth=2)] == ["e1", "e2", "e3"]
    assert max_evidence_score(weights) == pytest.approx(1.5 / 61)
    assert max_evidence_score(weights, depth=2) == pytest.approx(1.5 / 61 + 1.5 / 62)
    for bad in ({"depth": 0}, {"k": -1}):  # the message tells the caller what is allowed
        with pytest.raises(ValueError, match=r"^need k >= 0 and depth >= 1$"):
            fuse_evidence(owners, weights, **bad)
    assert fuse_evidence({"turns": ["e1"]}, {"turns": 2.0}, k=0) == [("e1", 2.0)]  # k = 0 is allowed: 2 / (0 + 1)


def test_light_stem_folds_plurals_only() -> None:
    cases = {
        "dogs": "dog",
        "cities": "city",
        "ties": "tie",  # 4 letters: "-ies" folding needs more than 4
        "spies": "spy",  # 5 letters: folded
        "batteries": "battery",
        "class": "class",
        "status": "status",
        "analysis": "analysis",
        "famous": "famous",
        "bus": "bus",  # 3 letters: untouched
        "gas": "gas",
        "b2bs": "b2bs",  # not purely alphabetic
        "runs": "run",
        "go": "go",
    }
    assert {w: bm25.light_stem(w) for w in cases} == cases


def test_tokenize_drops_stopwords_single_chars_and_overlong_terms() -> None:
    long_term, too_long = "x" * 64, "y" * 65
    text = f"The cats and a 7 dogs: {long_term} {too_long} 42 deploy"
    assert bm25.tokenize(text) == ["cat", "dog", long_term, "42", "deploy"]
    assert bm25.query_terms("dogs dog cats DOGS") == ["dog", "cat"]
    assert bm25.term_frequencies(["a", "b", "a"]) == {"a": 2, "b": 1}


# -- BM25 scores against bm25s (Lucene idf; agtos scores carry the classic (k1 + 1) factor) --
CORPUS = {
    "d1": "billing service billing outage on friday",
    "d2": "billing report for alice",
    "d3": "kubernetes upgrade failed and the billing job stopped after the upgrade yesterday evening",
    "d4": "dinner pasta friday",
    "d5": "outage outage outage",
}


def oracle(query: str, docs: dict[str, str]) -> dict[str, float]:
    """BM25 by bm25s (tests.helpers.bm25_oracle) over the documents' tokens."""
    return dict(bm25_oracle({i: bm25.tokenize(t) for i, t in docs.items()}, bm25.query_terms(query), len(docs)))


@pytest.mark.parametrize("query", ["billing outage", "friday", "upgrade billing", "outage", "alice pasta"])
def test_rank_texts_matches_bm25s(query: str) -> None:
    got = bm25.rank_texts(query, CORPUS, limit=10)
    want = oracle(query, CORPUS)
    assert dict(got) == pytest.approx(want, rel=1e-5)
    assert [s for _, s in got] == pytest.approx(sorted(want.values(), reverse=True), rel=1e-5)


def test_bm25_formula_literals() -> None:
    # idf(N=4, df=1) = ln(1 + 3.5 / 1.5); with tf = 1 at the average length the score is idf exactly
    assert bm25.idf(4, 1) == pytest.approx(math.log(1 + 3.5 / 1.5))
    assert bm25.term_score(1, 5, 5, 2.0) == pytest.approx(2.0)
    # tf = 2, doc twice the average: norm = 0.25 + 0.75 * 2 = 1.75; 2 * 2.2 / (2 + 1.2 * 1.75) = 4.4 / 4.1
    assert bm25.term_score(2, 10, 5, 1.0) == pytest.approx(4.4 / 4.1)
    # an average length of 0 counts every document as average
    assert bm25.term_score(2, 10, 0, 1.0) == pytest.approx(4.4 / 3.2)
    assert bm25.term_score(3, 10, 5, 1.0, k1=2.0, b=0.0) == pytest.approx(9 / 5)
    assert bm25.term_score(0, 5, 5, 9.0) == 0.0
    assert bm25.term_score(-1, 5, 5, 9.0) == 0.0
    assert bm25.term_score(0, 5, 5, 9.0, k1=0.0) == 0.0  # no 0/0 without saturation
    # an average below one token is still an average: doc twice as long, norm 1.75 as above
    assert bm25.term_score(2, 1, 0.5, 1.0) == pytest.approx(4.4 / 4.1)


def test_score_documents_sums_terms_and_skips_removed_or_empty_postings() -> None:
    postings = {
        "c": (0, {"y": 5.0}),  # df 0: skipped, the next terms still count
        "a": (1, {"x": 1.0}),
        "b": (2, {"x": 1.0, "gone": 3.0, "y": 2.0}),  # "gone" was removed: skipped, "y" still counts
    }
    lengths = {"x": 4.0, "y": 4.0}
    got = bm25.score_documents(postings, lengths, n_docs=3, avg_len=4.0)
    idf_a, idf_b = math.log(1 + 2.5 / 1.5), math.log(1 + 1.5 / 2.5)
    assert got == pytest.approx({"x": idf_a + idf_b, "y": idf_b * 2 * 2.2 / 3.2})
    # k1 and b reach every term score: b = 0 ignores length, so y (length 8) scores like an average doc
    lengths = {"x": 4.0, "y": 8.0}
    got = bm25.score_documents(postings, lengths, n_docs=3, avg_len=4.0, k1=2.0, b=0.0)
    assert got == pytest.approx({"x": idf_a + idf_b, "y": idf_b * 2 * 3.0 / 4.0})


def test_top_orders_by_score_then_id_and_clamps_the_limit() -> None:
    scores = {"b": 1.0, "a": 1.0, "c": 2.0, "d": 0.5}
    assert bm25.top(scores, 3) == [("c", 2.0), ("a", 1.0), ("b", 1.0)]
    assert bm25.top(scores, 0) == []
    assert bm25.top(scores, -2) == []


def test_rank_texts_empty_inputs_and_limit() -> None:
    assert bm25.rank_texts("", CORPUS, 5) == []
    assert bm25.rank_texts("billing", {}, 5) == []
    assert [d for d, _ in bm25.rank_texts("billing", CORPUS, 1)] == ["d1"]


# -- context assembly -----------------------------------------------------------------
def item(
    tier: str, text: str, relevance: float = 1.0, age_days: float = 0.0, id_: str = "", **kw: object
) -> ContextItem:
    return ContextItem(tier, id_ or text[:12], text, relevance, int(NOW_MS - age_days * DAY_MS), **kw)  # type: ignore[arg-type]


def test_prioritise_is_weighted_reciprocal_rank_per_tier_and_ignores_age() -> None:
    # weight / (10 + rank in the tier): turn 1.0, semantic 0.6, neighbour 0.4, episodic 0.3
    turns = [item("turn", f"turn {n}", relevance=1 - n / 100, id_=f"t{n}") for n in range(1, 10)]
    old_fact = item("semantic", "fact", relevance=1.0, age_days=3_000, id_="s1")  # 0.6/11 = 0.0545
    neighbour = item("turn", "said next", relevance=1.0, id_="n1", neighbour=True)  # 0.4/11 = 0.0364
    summary = item("episodic", "summary", relevance=1.0, id_="e1")  # 0.3/11 = 0.0273
    ranked = [i.id for i in prioritise([summary, neighbour, old_fact, *reversed(turns)])]
    # turn 8 scores 1/18 = 0.0556 > 0.0545 > turn 9's 1/19 = 0.0526
    assert ranked == ["t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "s1", "t9", "n1", "e1"]


def test_fit_budget_pays_header_titles_and_dated_bullets_once_and_is_greedy() -> None:
    a, b, c = item("semantic", "alpha beta"), item("semantic", "gamma delta epsilon"), item("semantic", "zeta")
    header = count_tokens("## Memory") + count_tokens(
        "Use these memories about the user when relevant; they may be outdated."
    )
    title = count_tokens("### Known facts and preferences")
    costs = [count_tokens(f"- (14 November 2023) {t}") for t in ("alpha beta", "gamma delta epsilon", "zeta")]
    assert (header, title, costs) == (17, 7, [9, 10, 8])
    assert fit_budget([a, b, c], 43) == ([a, b], 43)  # 17 + 7 + 9 + 10: exactly full
    assert fit_budget([a, b, c], 42) == ([a, c], 41)  # b does not fit, c still does
    assert fit_budget([a, b, c], 32) == ([c], 32)
    assert fit_budget([a], 31) == ([], 0)


def test_fit_budget_leaves_out_repeats_near_duplicates_and_facts_a_turn_already_says() -> None:
    line = item("turn", "(1 May 2023) Gina: I lost my job at Door Dash yesterday [= 30 April 2023]", id_="ep.t3")
    again = item("turn", line.text, relevance=0.5, id_="ep.t3", neighbour=True)
    contained = item("semantic", "Gina lost her job at Door Dash", id_="said")  # every content word in the turn
    base = item("semantic", "alpha beta gamma delta epsilon", id_="base")
    four_of_five = item("episodic", "alpha beta gamma delta", id_="dup")  # Jaccard 4/5 = 0.8
    three_of_five = item("episodic", "alpha beta gamma zeta", id_="keep")  # 3/5, 3 of its 4 words
    same_text = item("working", "Alpha, BETA gamma delta epsilon!", id_="same")
    chosen, _ = fit_budget([line, again, contained, base, four_of_five, three_of_five, same_text], 1_000)
    assert [i.id for i in chosen] == ["ep.t3", "base", "keep"]


@pytest.fixture
def far_east_local_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A local zone 14 hours ahead of UTC, so a date printed in local time shows the next day."""
    monkeypatch.setenv("TZ", "Pacific/Kiritimati")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("far_east_local_time")
def test_format_section_groups_tiers_dates_lines_in_utc_and_orders_turns_as_said() -> None:
    items = [
        ContextItem("working", "w1", "we were talking about trains", 1.0, NOW_MS),
        ContextItem("turn", "e2.t0", "Jon: booked the night train", 0.9, NOW_MS, "e2", "s2", 0),
        ContextItem("episodic", "e1", "planned a trip to Lyon", 1.0, NOW_MS - DAY_MS),
        ContextItem("turn", "e1.t4", "Gina: Lyon it is", 1.0, NOW_MS - DAY_MS, "e1", "s1", 4),
        ContextItem("turn", "e1.t5", "Jon: Lyon!", 1.0, NOW_MS - DAY_MS + 1, "e1", "s1", 5),
        ContextItem("semantic", "s1", "Gina prefers window seats", 1.0, NOW_MS),
        ContextItem("profile", "p1", "lives in Paris", 1.0, NOW_MS),
        ContextItem("conclusion", "c1", "Gina travels by train", 1.0, NOW_MS),
    ]
    assert format_section(items) == "\n".join(
        [
            "## Memory",
            "Use these memories about the user when relevant; they may be outdated.",
            "### About the user",
            "- lives in Paris",
            "### Known facts and preferences",
            "- (14 November 2023) Gina prefers window seats",
            "### Conclusions",
            "- (14 November 2023) Gina travels by train",
            "### From past conversations",
            "13 November 2023:",  # one heading dates the turn lines of its day
            "- Gina: Lyon it is",
            "- Jon: Lyon!",
            "14 November 2023:",
            "- Jon: booked the night train",
            "### Relevant past sessions",
            "- (13 November 2023) planned a trip to Lyon",
            "### Earlier in this conversation",
            "- we were talking about trains",
        ]
    )
    assert format_section([]) == ""


def stored(position: int, name: str, content: str, **kw: object) -> StoredTurn:
    return StoredTurn(
        user_id="u",
        episode_id="ep",
        session_id="s",
        position=position,
        role="user",
        name=name,
        content=content,
        timestamp=NOW_MS,
        **kw,  # type: ignore[arg-type]
    )


def test_turn_items_date_and_attribute_each_turn_and_keep_the_matching_sentences_of_a_long_one() -> None:
    question = stored(
        0,
        "Jon",
        "What did you do yesterday?",
        dates=[ResolvedDate(text="yesterday", start=16, date="2023-11-13", period="day")],
    )
    filler = "We talked about the weather and the traffic on the way home. " * 30
    answer = stored(1, "Gina", filler + "Then I adopted a greyhound called Biscuit at the shelter. " + filler)
    hit, neighbour = turn_items([question, answer], answer, 0.8, "What is the name of Gina's greyhound?")[::-1]
    assert neighbour == item(
        "turn",
        "Jon: What did you do yesterday [= 13 November 2023]?",
        0.8,
        id_="ep.t0",
        episode_id="ep",
        session_id="s",
        position=0,
        neighbour=True,
    )
    assert (hit.text, hit.day) == (
        "Gina: … Then I adopted a greyhound called Biscuit at the shelter. …",
        "14 November 2023",
    )
    assert (hit.id, hit.position, hit.neighbour, hit.relevance) == ("ep.t1", 1, False, 0.8)


def test_assemble_keeps_an_old_relevant_line_and_counts_the_section_it_writes() -> None:
    old_relevant = item("episodic", "kyoto temple visit notes", relevance=0.9, age_days=365, id_="old")
    fresh = item("semantic", "likes green tea", relevance=0.6, id_="fresh")
    fresh_dup = item("episodic", "Likes green tea!", relevance=0.59, id_="dup")
    huge = item("semantic", "word " * 200, relevance=1.0, id_="huge")
    chosen, text, used = assemble([old_relevant, fresh_dup, huge, fresh], budget_tokens=60)
    assert [i.id for i in chosen] == ["fresh", "old"]  # huge does not fit; the duplicate is said already
    assert text.splitlines()[2:] == [
        "### Known facts and preferences",
        "- (14 November 2023) likes green tea",
        "### Relevant past sessions",
        "- (14 November 2022) kyoto temple visit notes",
    ]
    assert used == count_tokens(text) <= 60
    assert assemble([], 100) == ([], "", 0)


def test_fuse_evidence_counts_at_most_depth_items_per_owner() -> None:
    """RRF k = 60: with depth 2 an owner scores its first two pieces of evidence in a list, not a third."""
    fused = dict(fuse_evidence({"turns": ["e1", "e1", "e1", "e2"]}, {"turns": 1.0}, depth=2))
    assert fused["e1"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["e2"] == pytest.approx(1 / 64)


def test_a_turn_line_is_dated_on_the_day_where_it_was_said_and_attributed_once() -> None:
    """2023-11-14T22:13:20Z said at UTC+02:00 is 15 November there, at UTC-05:00 still 14 November
    (1f50b5c); a content that opens with its speaker's 'Gina: ' is not attributed twice (c75c67c)."""
    east = stored(0, "Gina", "Gina: I booked the night train.", utc_offset=120)
    west = stored(1, "Jon", "Jon - I will bring snacks", utc_offset=-300)
    first, second = turn_items([east, west], east, 1.0)
    assert (first.text, first.utc_offset, first.day) == ("Gina: I booked the night train.", 120, "15 November 2023")
    assert (second.text, second.utc_offset, second.day) == ("Jon: Jon - I will bring snacks", -300, "14 November 2023")


def test_a_speakers_name_in_decomposed_unicode_is_read_as_its_composed_form() -> None:
    """'Zoe' + U+0308 (a combining diaeresis: macOS file names, some keyboards) is the name 'Zoë': a speaker
    named so was matched neither by 'Zoe' nor by a typed 'Zoë', nor a decomposed query by the speaker 'Zoë'
    (found by mutmut over _unaccented, 2026-12-06)."""
    from agtos.tasks.ranking import named_speakers, without_speakers

    decomposed = "Zoe\u0308"
    for query in ("What does Zoe do for work?", "What does Zoë do for work?", f"What does {decomposed} do for work?"):
        for name in ("Zoë", decomposed):
            assert without_speakers(query, [name]) == "What does do for work?", (query, name)
            assert named_speakers(query, [name, "Jon"]) == {name.lower()}, (query, name)


def test_a_name_said_in_capitals_names_its_speaker_whatever_the_is_dots() -> None:
    """'IŞIL' names the speaker 'Işıl' (upper-cased, the dotless ı is an I): the speaker's own name comes back,
    not the query's spelling ('işil' is nobody's); only the conversation's names are ever returned."""
    from agtos.tasks.ranking import named_speakers

    assert named_speakers("What did IŞIL say about Ankara?", ["Işıl", "Jon"]) == {"işıl"}
    assert named_speakers("What did Işıl say about Ankara?", ["Işıl", "Jon"]) == {"işıl"}
    assert named_speakers("Did JON and Işıl go?", ["Işıl", "Jon"]) == {"işıl", "jon"}
    assert named_speakers("Did Maria go?", ["Işıl", "Jon"]) == set()
