"""Pure steps of the memory lint: stale detection, confidence decay, pruning, orphan episodes
and merging of a redundant pair. No I/O; the clock is always passed in."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from agtos.schemas import records
from agtos.schemas.records import Conclusion, Episode

DAY_MS = 86_400_000


def _age_ms(conclusion: Conclusion, at_ms: int) -> int:
    return at_ms - conclusion.updated_at


def find_stale(conclusions: Iterable[Conclusion], now_ms: int, stale_threshold_days: float) -> list[Conclusion]:
    """Copies, marked ``stale=True``, of the conclusions not updated for more than the threshold."""
    if stale_threshold_days < 0:
        raise ValueError("stale_threshold_days must be >= 0")
    limit_ms = stale_threshold_days * DAY_MS
    return [c.model_copy(update={"stale": True}) for c in conclusions if _age_ms(c, now_ms) > limit_ms]


def decay_confidence(conclusions: Iterable[Conclusion], factor: float = 0.9) -> list[Conclusion]:
    """Copies with ``confidence * factor``; ``updated_at`` is left alone (decay is not new evidence)."""
    if not 0.0 <= factor <= 1.0:
        raise ValueError("decay factor must be within [0, 1]")
    return [c.model_copy(update={"confidence": c.confidence * factor}) for c in conclusions]


class PruneResult(NamedTuple):
    kept: list[Conclusion]
    pruned: list[Conclusion]


def prune(conclusions: Iterable[Conclusion], threshold: float = 0.3) -> PruneResult:
    """Split into conclusions kept and those whose confidence is strictly below ``threshold``."""
    kept: list[Conclusion] = []
    pruned: list[Conclusion] = []
    for c in conclusions:
        (pruned if c.confidence < threshold else kept).append(c)
    return PruneResult(kept, pruned)


def find_orphan_episodes(
    episodes: Iterable[Episode],
    conclusions: Iterable[Conclusion],
    orphan_importance_threshold: float = 3,
) -> list[Episode]:
    """Episodes no conclusion cites (``source_episode_ids``) and of low importance.

    The threshold is on the 0–10 scale of the lint configuration while ``Episode.importance``
    is 0–1, so an episode is an orphan when ``importance * 10 < threshold``; it is compared as
    ``importance < threshold / 10`` (the default 3 means ``importance < 0.3``), which keeps
    values such as 0.3 exact in floating point.
    """
    cited = {eid for c in conclusions for eid in c.source_episode_ids}
    limit = orphan_importance_threshold / 10
    return [e for e in episodes if e.id not in cited and e.importance < limit]


def _union_ordered(*lists: Sequence[str]) -> list[str]:
    seen: dict[str, None] = {}
    for items in lists:
        for item in items:
            seen.setdefault(item, None)
    return list(seen)


def merge_pair(a: Conclusion, b: Conclusion, *, at_ms: int | None = None) -> Conclusion:
    """Merge two redundant conclusions of one user into one.

    The higher-confidence one wins (text, type, id, confidence); on a tie the more recently
    updated one, then ``a``. Source episodes are combined (winner's first, no duplicates),
    ``created_at`` is the earlier of the two, ``updated_at`` is ``at_ms`` (default: now)
    and the result is not stale.
    """
    if a.user_id != b.user_id:
        raise ValueError("cannot merge conclusions of different users")
    winner, loser = (a, b) if (a.confidence, a.updated_at) >= (b.confidence, b.updated_at) else (b, a)
    return winner.model_copy(
        update={
            "source_episode_ids": _union_ordered(winner.source_episode_ids, loser.source_episode_ids),
            "created_at": min(a.created_at, b.created_at),
            "updated_at": records.now_ms() if at_ms is None else at_ms,
            "stale": False,
        }
    )
