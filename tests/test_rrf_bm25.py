"""RRF fusion and BM25: the pure helpers and the Redis-backed index."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
import redis

from agtos.config import Settings
from agtos.storage.bm25_index import BM25Index
from agtos.storage.keys import GlobalKeys, InvalidIdentifier
from agtos.storage.redis_conn import RedisConnector
from agtos.tasks import bm25
from agtos.tasks.ranking import reciprocal_rank_fusion
from tests.helpers import bm25_oracle

CORPUS = {
    "d1": "We deployed the billing service with Kubernetes on Friday.",
    "d2": "The billing service failed because of the Kubernetes upgrade.",
    "d3": "Alice prefers Python and uses the zyxtrel library for billing reports.",
    "d4": "Dinner plans: pasta with Alice and Bob on Friday evening.",
    "d5": "Error 4521 appeared in the billing service logs twice.",
}
# The index terms of CORPUS written out by hand (stopwords dropped, words as the Snowball English
# algorithm stems them, numbers kept), so the bm25s oracle (tests.helpers.bm25_oracle) does not
# reuse agtos' tokenizer.
CORPUS_TERMS = {
    "d1": ["deploy", "bill", "servic", "kubernet", "friday"],
    "d2": ["bill", "servic", "fail", "kubernet", "upgrad"],
    "d3": ["alic", "prefer", "python", "use", "zyxtrel", "librari", "bill", "report"],
    "d4": ["dinner", "plan", "pasta", "alic", "bob", "friday", "evening"],
    "d5": ["error", "4521", "appear", "bill", "servic", "log", "twice"],
}
# Repeated terms and unequal lengths, so tf saturation (k1) and length normalisation (b) matter.
VARIED = {
    "o1": "Billing, billing: the billing dashboard shows billing totals for every billing account.",
    "o2": "The invoice for the hosting account was paid late.",
    "o3": "Kubernetes upgrade broke the billing service on Friday.",
    "o4": "Dinner on Friday with Alice, then a long walk along the river with Alice and Bob.",
    "o5": "Error 4521 appeared twice in the billing logs after the invoice run.",
    "o6": "Alice prefers Python.",
}
VARIED_TERMS = {
    "o1": ["bill", "bill", "bill", "dashboard", "show", "bill", "total", "everi", "bill", "account"],
    "o2": ["invoic", "host", "account", "pay", "late"],
    "o3": ["kubernet", "upgrad", "break", "bill", "servic", "friday"],
    "o4": ["dinner", "friday", "alic", "long", "walk", "along", "river", "alic", "bob"],
    "o5": ["error", "4521", "appear", "twice", "bill", "log", "invoic", "run"],
    "o6": ["alic", "prefer", "python"],
}
# Queries of VARIED and their terms, by hand as above
VARIED_QUERIES = {
    "billing": ["bill"],
    "alice friday": ["alic", "friday"],
    "invoice account": ["invoic", "account"],
    "error 4521 billing": ["error", "4521", "bill"],
    "billing billing dashboard": ["bill", "bill", "dashboard"],
}


def assert_scores(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> None:
    assert [d for d, _ in got] == [d for d, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9)


@pytest.fixture(params=[True, False], ids=["mirror", "redis-postings"])
def index(settings: Settings, request: pytest.FixtureRequest) -> Iterator[BM25Index]:
    connector = RedisConnector(settings.redis_url, settings.data_dir)
    yield BM25Index(connector, GlobalKeys(settings.key_prefix), "memory", mirror=request.param)
    connector.close()


# -- RRF ------------------------------------------------------------------------------
def test_rrf_default_k_is_60() -> None:
    """The README's k = 60: rank 1 scores 1/61, rank 2 1/62 (no k passed: the default)."""
    fused = reciprocal_rank_fusion([["a", "b"], ["b", "c"]])
    assert fused == [
        ("b", pytest.approx(1 / 62 + 1 / 61)),
        ("a", pytest.approx(1 / 61)),
        ("c", pytest.approx(1 / 62)),
    ]


def test_rrf_exact_scores_and_order() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "c", "d"]], k=60)
    assert [doc for doc, _ in fused] == ["b", "c", "a", "d"]
    expected = {"a": 1 / 61, "b": 1 / 62 + 1 / 61, "c": 1 / 63 + 1 / 62, "d": 1 / 63}
    assert dict(fused) == pytest.approx(expected)


def test_rrf_ties_keep_first_appearance_and_weights_apply() -> None:
    assert [d for d, _ in reciprocal_rank_fusion([["x", "y"], ["y", "x"]])] == ["x", "y"]
    assert [d for d, _ in reciprocal_rank_fusion([["p"], ["q"]])] == ["p", "q"]
    weighted = reciprocal_rank_fusion([["p"], ["q"]], k=10, weights=[1.0, 2.0])
    assert weighted == [("q", pytest.approx(2 / 11)), ("p", pytest.approx(1 / 11))]


def test_rrf_counts_an_id_once_per_list_and_validates() -> None:
    assert reciprocal_rank_fusion([["a", "a", "b"]], k=0) == [("a", 1.0), ("b", pytest.approx(1 / 3))]
    assert reciprocal_rank_fusion([]) == []
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([["a"]], weights=[1.0, 2.0])
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([["a"]], k=-1)


# -- pure BM25 ------------------------------------------------------------------------
def test_tokenize_and_idf() -> None:
    assert bm25.tokenize("The GPT-4 model and error 4521, I think") == ["gpt-4", "model", "error", "4521"]
    assert {d: bm25.tokenize(t) for d, t in CORPUS.items()} == CORPUS_TERMS
    assert {d: bm25.tokenize(t) for d, t in VARIED.items()} == VARIED_TERMS
    assert bm25.idf(10, 1) == pytest.approx(math.log(1 + 9.5 / 1.5))
    assert bm25.idf(10, 10) > 0
    assert bm25.term_score(0, 5, 5, 1.0) == 0.0
    # tf saturates: doubling tf gains less than double
    assert bm25.term_score(2, 10, 10, 1.0) < 2 * bm25.term_score(1, 10, 10, 1.0)


def test_rank_texts_rare_exact_token_first() -> None:
    ranked = bm25.rank_texts("billing zyxtrel", CORPUS, limit=5)
    assert ranked[0][0] == "d3"
    assert {d for d, _ in ranked} == {"d1", "d2", "d3", "d5"}
    assert bm25.rank_texts("the and of", CORPUS, limit=5) == []


@pytest.mark.parametrize("query", list(VARIED_QUERIES))
def test_rank_texts_scores_equal_an_independent_bm25(query: str) -> None:
    assert_scores(bm25.rank_texts(query, VARIED, limit=10), bm25_oracle(VARIED_TERMS, VARIED_QUERIES[query]))


# -- Redis BM25 index -----------------------------------------------------------------
def test_index_ranks_rare_token_first_and_matches_an_independent_bm25(index: BM25Index) -> None:
    for doc_id, text in CORPUS.items():
        index.add("alice", doc_id, text)
    for doc_id, text in VARIED.items():
        index.add("olga", doc_id, text)
    assert index.count("alice") == len(CORPUS)
    queries = {"billing zyxtrel": ["bill", "zyxtrel"], "friday kubernetes": ["friday", "kubernet"]}
    queries |= {"error 4521": ["error", "4521"], "alice": ["alic"]}
    for query, terms in queries.items():
        assert_scores(index.search("alice", query, limit=10), bm25_oracle(CORPUS_TERMS, terms))
    for query in ("billing", "alice friday", "invoice account", "error 4521 billing"):
        assert_scores(index.search("olga", query, limit=10), bm25_oracle(VARIED_TERMS, VARIED_QUERIES[query]))
    assert_scores(index.search("olga", "billing", limit=2), bm25_oracle(VARIED_TERMS, ["bill"], limit=2))
    assert index.search("alice", "zyxtrel", limit=3)[0][0] == "d3"
    assert index.search("alice", "nothing-matches-this", limit=3) == []
    assert index.search("alice", "billing", limit=0) == []


def test_readd_replaces_and_remove_clears(index: BM25Index, raw_redis: redis.Redis) -> None:
    for doc_id, text in CORPUS.items():
        index.add("alice", doc_id, text)
    index.add("alice", "d3", "Alice switched to Rust for her billing reports.")
    assert index.count("alice") == len(CORPUS)
    assert index.search("alice", "zyxtrel", limit=5) == []
    assert index.search("alice", "rust", limit=5)[0][0] == "d3"
    terms = {**CORPUS_TERMS, "d3": ["alic", "switch", "rust", "bill", "report"]}
    assert_scores(index.search("alice", "billing", 10), bm25_oracle(terms, ["bill"]))

    assert index.remove("alice", "d3") is True
    assert index.remove("alice", "d3") is False
    assert index.search("alice", "rust", limit=5) == []
    assert index.count("alice") == len(CORPUS) - 1
    assert sorted(index.ids("alice")) == ["d1", "d2", "d4", "d5"]
    left = {d: CORPUS_TERMS[d] for d in ("d1", "d2", "d4", "d5")}
    assert_scores(index.search("alice", "billing friday", 10), bm25_oracle(left, ["bill", "friday"]))
    total = int(raw_redis.hget(index._key("alice", "stats"), "total") or 0)
    assert total == 5 + 5 + 7 + 7  # the terms of d1, d2, d4, d5
    # a document without any term is not indexed (and un-indexes an older version)
    index.add("alice", "d4", "the and of")
    assert index.count("alice") == len(CORPUS) - 2
    assert not raw_redis.exists(index._key("alice", "t:pasta"))


def test_users_are_isolated_and_ids_checked(index: BM25Index) -> None:
    index.add("alice", "a1", "zyxtrel appears here")
    index.add("bob", "b1", "nothing rare in this text")
    assert index.search("bob", "zyxtrel", limit=5) == []
    assert [d for d, _ in index.search("alice", "zyxtrel", limit=5)] == ["a1"]
    with pytest.raises(InvalidIdentifier):
        index.add("alice", "bad:id", "text")
    with pytest.raises(InvalidIdentifier):
        index.add("bad user", "a2", "text")
