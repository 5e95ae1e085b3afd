"""Reciprocal rank fusion: merge ranked id lists into one (pure)."""

from __future__ import annotations

from collections.abc import Sequence

DEFAULT_K = 60


def reciprocal_rank_fusion(
    ranked_lists: list[list[str]],
    k: int = DEFAULT_K,
    weights: Sequence[float] | None = None,
) -> list[tuple[str, float]]:
    """Fuse ranked lists: ``score(id) = Σ w_i / (k + rank_i)``, ranks starting at 1.

    An id repeated inside one list counts at its best rank only. The result is
    sorted by score, best first; ties keep the order in which ids first appear
    (list 0 top to bottom, then list 1, ...).
    """
    if k < 0:
        raise ValueError("k must be >= 0")
    if weights is None:
        weights = [1.0] * len(ranked_lists)
    elif len(weights) != len(ranked_lists):
        raise ValueError(f"got {len(weights)} weights for {len(ranked_lists)} lists")
    scores: dict[str, float] = {}
    for ranked, weight in zip(ranked_lists, weights, strict=True):
        seen: set[str] = set()
        for rank, doc_id in enumerate(ranked, start=1):
            if doc_id in seen:
                continue
            seen.add(doc_id)
            scores[doc_id] = scores.get(doc_id, 0.0) + weight / (k + rank)
    # sorted() is stable, so equal scores keep first-appearance (insertion) order
    return sorted(scores.items(), key=lambda item: -item[1])
