"""What kills the survivors of a complete mutation run of ``agtos/storage/semantic_store.py`` (issue 20,
docs/testing.md): the record store with its BM25 + vector indexes on a real Redis. Literals from the
docstrings and the ``Sequence`` contract (an index out of range is an ``IndexError``), never from the code
under test."""

from __future__ import annotations

import pytest

from agtos.storage.semantic_store import Ranked, SemanticStore
from tests.test_core_semantic_store import QUERY, connector, put_ranked, store  # noqa: F401 - fixtures


def test_a_ranked_list_indexed_out_of_range_raises_index_error(store: SemanticStore) -> None:  # noqa: F811
    """A ranked list is a Sequence: ``ranked[i]`` for i past either end raises IndexError (as a list
    does), it never answers another candidate; ``ranked[-8]`` of 8 is the first."""
    put_ranked(store, 12, keyword_ids=("d3",))
    for ranked in (store.rank("alice", "zyxtrel", QUERY, "hybrid", 2), store.rank("alice", "", QUERY, "vector", 2)):
        assert len(ranked) == 8
        assert ranked[-8].id == ranked[0].id and ranked[-1].id == "d8"
        for out in (8, 9, -9, -100):
            with pytest.raises(IndexError):
                ranked[out]
    assert list(Ranked([])) == []
