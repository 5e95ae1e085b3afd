"""Batch Jaccard pair selection (prefix-filtered DuckDB/Polars) equals the naive double loop."""

from __future__ import annotations

import random

import polars as pl
import pytest

from agtos.tasks.pair_selection import (
    jaccard,
    naive_pairs,
    pairs_as_tuples,
    redundant_pairs,
    token_set,
    token_table,
)

FILLERS = "the user likes prefers works at in on with and to of a for is not".split()


def planted_corpus(n: int, seed: int, vocab_size: int) -> list[str]:
    """Random sentences; ~15% are edited copies (reordered, one word added or replaced)."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(vocab_size)]
    texts: list[str] = []
    for _ in range(n):
        if texts and rng.random() < 0.15:
            tokens = rng.choice(texts).split()
            edit = rng.random()
            if edit < 0.35:
                tokens.append(rng.choice(vocab))
            elif edit < 0.7:
                rng.shuffle(tokens)
            else:
                tokens[rng.randrange(len(tokens))] = rng.choice(vocab)
            texts.append(" ".join(tokens))
        else:
            size = rng.randint(1, 18)
            texts.append(" ".join(rng.choices(FILLERS, k=rng.randint(0, 4)) + rng.choices(vocab, k=size)))
    return texts


def test_helpers() -> None:
    assert token_set("User likes Node.js, and likes C++!") == {"user", "likes", "node.js", "and", "c++"}
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)
    assert jaccard(set(), set()) == 0.0
    table = token_table(["a b a", "", "B"])
    assert sorted(table.iter_rows()) == [(0, "a"), (0, "b"), (2, "b")]


@pytest.mark.parametrize(("seed", "vocab_size", "threshold"), [(1, 3000, 0.85), (2, 300, 0.85), (3, 800, 0.6)])
def test_batch_pairs_equal_naive_pairs(seed: int, vocab_size: int, threshold: float) -> None:
    texts = planted_corpus(2000, seed, vocab_size)
    ids = [f"con-{i:05d}" for i in random.Random(seed).sample(range(10_000), len(texts))]
    fast = redundant_pairs(ids, texts, threshold)
    slow = naive_pairs(ids, texts, threshold)
    assert len(slow) > 50  # the planted duplicates are there
    assert pairs_as_tuples(fast) == slow
    assert fast.columns == ["a_id", "b_id", "jaccard"]
    assert fast.filter(pl.col("a_id") >= pl.col("b_id")).height == 0
    assert fast["jaccard"].min() >= threshold  # type: ignore[operator]


def test_edge_cases() -> None:
    assert redundant_pairs([], []).height == 0
    assert redundant_pairs(["a"], ["x y"]).height == 0
    same = redundant_pairs(["b", "a", "c"], ["coffee every morning", "every morning coffee", ""])
    assert pairs_as_tuples(same) == [("a", "b", 1.0)]
    # negation keeps two otherwise identical short statements apart
    assert redundant_pairs(["x", "y"], ["user likes coffee", "user does not like coffee"]).height == 0
    with pytest.raises(ValueError):
        redundant_pairs(["a", "a"], ["x", "x"])
    with pytest.raises(ValueError):
        redundant_pairs(["a"], ["x", "y"])
    with pytest.raises(ValueError):
        redundant_pairs(["a", "b"], ["x", "y"], threshold=0)


def test_threshold_boundary_is_inclusive() -> None:
    base = " ".join(f"t{i}" for i in range(17))
    longer = base + " extra1 extra2 extra3"  # 17 / 20 = 0.85 exactly
    found = pairs_as_tuples(redundant_pairs(["p", "q"], [base, longer], 0.85))
    assert found == naive_pairs(["p", "q"], [base, longer], 0.85)
    assert [(a, b) for a, b, _ in found] == [("p", "q")]
