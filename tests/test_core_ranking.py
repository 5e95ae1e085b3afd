"""Ranking core: RRF, BM25 and context assembly against literals from the spec and an independent BM25.

Expected values are written out (RRF k = 60, BM25 k1 = 1.2 / b = 0.75, a 30-day recency half-life,
Jaccard 0.8) or computed by ``bm25s`` (a maintained BM25 implementation), never by the code under test.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import pytest

from agtos.tasks import bm25
from agtos.tasks.context import ContextItem, assemble, dedupe, fit_budget, format_section
from agtos.tasks.ranking import reciprocal_rank_fusion
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
def item(tier: str, text: str, relevance: float = 1.0, age_days: float = 0.0, id_: str = "") -> ContextItem:
    return ContextItem(tier, id_ or text[:12], text, relevance, int(NOW_MS - age_days * DAY_MS))


def test_rank_halves_the_recency_bonus_every_30_days_down_to_half() -> None:
    assert item("semantic", "t", 0.8).rank(NOW_MS) == pytest.approx(0.8)
    assert item("semantic", "t", 1.0, age_days=30).rank(NOW_MS) == pytest.approx(0.75, abs=1e-12)  # a day: 86.4M ms
    assert item("semantic", "t", 1.0, age_days=60).rank(NOW_MS) == pytest.approx(0.625)
    assert item("semantic", "t", 1.0, age_days=3000).rank(NOW_MS) == pytest.approx(0.5)
    assert item("semantic", "t", 0.6, age_days=-5).rank(NOW_MS) == pytest.approx(0.6)  # future: no bonus above 1


def test_dedupe_collapses_at_jaccard_08_and_identical_normalised_text() -> None:
    base = item("semantic", "alpha beta gamma delta epsilon", id_="base")
    four_of_five = item("episodic", "alpha beta gamma delta", id_="dup")  # 4/5 = 0.8: a duplicate
    three_of_five = item("episodic", "alpha beta gamma zeta", id_="keep")  # 3/5 = 0.6
    same_text = item("working", "Alpha, BETA gamma delta epsilon!", id_="same")
    stop_only = item("profile", "the and of", id_="stop1")  # no content words: compared by text only
    stop_again = item("profile", "The and of.", id_="stop2")
    other_stop = item("profile", "it is", id_="stop3")
    kept = dedupe([base, four_of_five, three_of_five, same_text, stop_only, stop_again, other_stop])
    assert [i.id for i in kept] == ["base", "keep", "stop1", "stop3"]
    assert [i.id for i in dedupe([base, four_of_five], threshold=0.81)] == ["base", "dup"]


def test_fit_budget_charges_three_tokens_per_bullet_and_is_greedy() -> None:
    a, b, c = item("semantic", "alpha beta"), item("semantic", "gamma delta epsilon"), item("semantic", "zeta")
    costs = [count_tokens(i.text) + 3 for i in (a, b, c)]
    assert costs == [5, 6, 4]
    assert fit_budget([a, b, c], 11) == ([a, b], 11)  # exactly full
    assert fit_budget([a, b, c], 10) == ([a, c], 9)  # b does not fit, c still does
    assert fit_budget([a, b, c], 4) == ([c], 4)
    assert fit_budget([a], 0) == ([], 0)


@pytest.fixture
def far_east_local_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A local zone 14 hours ahead of UTC, so a date printed in local time shows the next day."""
    monkeypatch.setenv("TZ", "Pacific/Kiritimati")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("far_east_local_time")
def test_format_section_groups_tiers_in_order_with_dated_episodes() -> None:
    items = [
        ContextItem("working", "w1", "we were talking about trains", 1.0, NOW_MS),
        ContextItem("episodic", "e1", "planned a trip to Lyon", 1.0, NOW_MS),
        ContextItem("semantic", "s1", "prefers window seats", 1.0, NOW_MS),
        ContextItem("profile", "p1", "lives in Paris", 1.0, NOW_MS),
        ContextItem("semantic", "s2", "is vegetarian", 1.0, NOW_MS),
    ]
    assert format_section(items) == "\n".join(
        [
            "## Memory",
            "Use these memories about the user when relevant; they may be outdated.",
            "### About the user",
            "- lives in Paris",
            "### Known facts and preferences",
            "- prefers window seats",
            "- is vegetarian",
            "### Relevant past sessions",
            "- (2023-11-14) planned a trip to Lyon",
            "### Earlier in this conversation",
            "- we were talking about trains",
        ]
    )
    assert format_section([]) == ""


def test_assemble_ranks_by_relevance_times_recency_then_dedupes_and_fits() -> None:
    old_relevant = item("episodic", "kyoto temple visit notes", relevance=0.9, age_days=365, id_="old")  # 0.45
    fresh = item("semantic", "likes green tea", relevance=0.6, id_="fresh")  # 0.6
    fresh_dup = item("episodic", "Likes green tea!", relevance=0.59, id_="dup")
    huge = item("semantic", "word " * 200, relevance=1.0, id_="huge")
    chosen, text, used = assemble([old_relevant, fresh_dup, huge, fresh], budget_tokens=20, now_ms=NOW_MS)
    assert [i.id for i in chosen] == ["fresh", "old"]
    assert used == count_tokens("likes green tea") + count_tokens("kyoto temple visit notes") + 6
    assert text.splitlines()[2:] == [
        "### Known facts and preferences",
        "- likes green tea",
        "### Relevant past sessions",
        "- (2022-11-14) kyoto temple visit notes",
    ]
    assert assemble([], 100, NOW_MS) == ([], "", 0)
