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
from agtos.tasks.rrf import reciprocal_rank_fusion

CORPUS = {
    "d1": "We deployed the billing service with Kubernetes on Friday.",
    "d2": "The billing service failed because of the Kubernetes upgrade.",
    "d3": "Alice prefers Python and uses the zyxtrel library for billing reports.",
    "d4": "Dinner plans: pasta with Alice and Bob on Friday evening.",
    "d5": "Error 4521 appeared in the billing service logs twice.",
}


@pytest.fixture(params=[True, False], ids=["mirror", "redis-postings"])
def index(settings: Settings, request: pytest.FixtureRequest) -> Iterator[BM25Index]:
    connector = RedisConnector(settings.redis_url, settings.data_dir)
    yield BM25Index(connector, GlobalKeys(settings.key_prefix), "memory", mirror=request.param)
    connector.close()


# -- RRF ------------------------------------------------------------------------------
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


# -- Redis BM25 index -----------------------------------------------------------------
def test_index_ranks_rare_token_first_and_matches_pure_scores(index: BM25Index) -> None:
    for doc_id, text in CORPUS.items():
        index.add("alice", doc_id, text)
    assert index.count("alice") == len(CORPUS)
    for query in ("billing zyxtrel", "friday kubernetes", "error 4521", "alice"):
        got = index.search("alice", query, limit=10)
        want = bm25.rank_texts(query, CORPUS, limit=10)
        assert [d for d, _ in got] == [d for d, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want])
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
    corpus = {**CORPUS, "d3": "Alice switched to Rust for her billing reports."}
    got, want = index.search("alice", "billing", 10), bm25.rank_texts("billing", corpus, 10)
    assert [d for d, _ in got] == [d for d, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want])

    assert index.remove("alice", "d3") is True
    assert index.remove("alice", "d3") is False
    assert index.search("alice", "rust", limit=5) == []
    assert index.count("alice") == len(CORPUS) - 1
    assert sorted(index.ids("alice")) == ["d1", "d2", "d4", "d5"]
    total = int(raw_redis.hget(index._key("alice", "stats"), "total") or 0)
    assert total == sum(len(bm25.tokenize(CORPUS[d])) for d in ("d1", "d2", "d4", "d5"))
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
