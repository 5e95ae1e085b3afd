"""Issue 14 (c3e): in a hybrid search, hits of equal BM25 score rank among themselves by their similarity
to the query, not by their ids (a hash of user and text, or random), and the BM25 order stays first: RRF
k = 60 literals over a store on a real Redis (``tests/test_core_semantic_store.py``'s set-up)."""

from __future__ import annotations

import pytest

from agtos.storage.semantic_store import SemanticStore
from tests.test_core_semantic_store import QUERY, connector, hits, put, ranked_vector, store

__all__ = ["connector", "store"]  # the fixtures, used by name


def test_equal_bm25_scores_rank_by_similarity_and_the_bm25_order_stays_first(store: SemanticStore) -> None:
    """ "zyxtrel" twice in ``a`` (the best BM25 score, the farthest vector); ``t1`` and ``t2`` once in as long
    a text (equal BM25 scores), ``t2`` the closer vector. Keyword list a, t2, t1 (by id it was a, t1, t2);
    vector list t2, t1, a."""
    put(store, "a", "zyxtrel zyxtrel", ranked_vector(3))
    put(store, "t1", "zyxtrel hiking", ranked_vector(2))
    put(store, "t2", "zyxtrel invoices", ranked_vector(1))
    assert hits(store.search("alice", "zyxtrel", QUERY, limit=3)) == [
        ("t2", pytest.approx(1 / 61 + 1 / 62), "hybrid"),
        ("a", pytest.approx(1 / 63 + 1 / 61), "hybrid"),
        ("t1", pytest.approx(1 / 62 + 1 / 63), "hybrid"),
    ]
