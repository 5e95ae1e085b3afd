"""What kills the survivors of the whole-core sample at c6767c4 (seed 1208, 30 a module; issue 20, docs/testing.md).

- ``context.fit_budget`` is greedy in the given order (its docstring: "each item that is new and still fits"): a
  line too long for what is left is skipped, and a later shorter one still goes in.
- :class:`agtos.storage.semantic_store.Ranked` is a sequence: an index past either end raises ``IndexError``, as a
  list's does (``ranked[-9]`` of 8 candidates is not the first one).
- ``ranking.content_order`` (aba0c44, after the sample; its docstring): hits of equal score, the later said first
  (a record's ``timestamp``, else ``valid_from``), then its words (``content``, ``text``, ...), then a turn's
  integer ``position``; a payload that is missing, not JSON or not an object orders as nothing said.
"""

from __future__ import annotations

import pytest

from agtos.storage.semantic_store import SemanticStore
from agtos.tasks.context import ContextItem, fit_budget
from agtos.tasks.ranking import content_order
from tests.test_core_semantic_store import QUERY, connector, put_ranked, store

__all__ = ["connector", "store"]  # the fixtures, used by name


def test_a_line_too_long_for_the_budget_is_skipped_and_a_later_short_one_still_taken() -> None:
    """1,200 words cannot fit in 1,000 tokens; the three-word fact after it does."""
    long_fact = ContextItem("semantic", "m1", " ".join(["zebra"] * 1_200), 0.9, 0)
    short_fact = ContextItem("semantic", "m2", "Gina likes jazz.", 0.5, 0)
    chosen, used = fit_budget([long_fact, short_fact], 1_000)
    assert [i.id for i in chosen] == ["m2"]
    assert 0 < used <= 1_000


def test_an_index_past_either_end_of_the_ranked_candidates_raises_index_error(store: SemanticStore) -> None:
    """limit 2: 8 fused candidates (d3 the keyword hit first); the keyword ranking holds d3 alone."""
    put_ranked(store, 12, keyword_ids=("d3",))
    fused = store.rank("alice", "zyxtrel", QUERY, "hybrid", 2)
    assert len(fused) == 8 and fused[-8].id == "d3" and fused[-1].id == "d8"
    for index in (8, -9, -20):
        with pytest.raises(IndexError):
            fused[index]
    keyword = store.rank("alice", "zyxtrel", QUERY, "bm25", 2)
    assert len(keyword) == 1 and keyword[-1].id == "d3"
    for index in (1, -2):
        with pytest.raises(IndexError):
            keyword[index]


def test_the_order_of_hits_of_equal_score_is_read_from_what_the_record_says() -> None:
    assert content_order('{"timestamp": 5, "content": "b", "position": 3}') == (-5.0, "b", 3)
    assert content_order('{"valid_from": 7, "text": "a"}') == (-7.0, "a", 0)
    assert content_order('{"timestamp": 5, "content": "b", "position": "3"}') == (-5.0, "b", 0)
    for nothing in (None, "", "not json", "[1, 2]", "{}"):
        assert content_order(nothing) == (0.0, "", 0)
