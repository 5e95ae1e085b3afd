"""The pure lint steps on crafted data: stale by age, decay, prune, orphans (0–10 mapping), merge."""

from __future__ import annotations

import pytest

from agtos.schemas.records import Conclusion, ConclusionType, Episode
from agtos.tasks import lint_steps

NOW = 1_800_000_000_000


def con(cid: str, *, confidence: float = 0.8, age_days: float = 0.0, sources: list[str] | None = None) -> Conclusion:
    ts = int(NOW - age_days * 86_400_000)
    return Conclusion(
        id=cid,
        user_id="alice",
        text=f"text of {cid}",
        type=ConclusionType.deductive,
        confidence=confidence,
        source_episode_ids=sources or [],
        created_at=ts,
        updated_at=ts,
    )


def ep(eid: str, importance: float) -> Episode:
    return Episode(id=eid, user_id="alice", summary=f"summary {eid}", importance=importance)


def test_find_stale_by_age_marks_copies_only() -> None:
    items = [con("fresh", age_days=1), con("edge", age_days=30), con("old", age_days=31)]
    stale = lint_steps.find_stale(items, NOW, stale_threshold_days=30)
    assert [c.id for c in stale] == ["old"]
    assert stale[0].stale is True
    assert items[2].stale is False  # input untouched
    assert lint_steps.find_stale(items, NOW, 0.5)[0].id == "fresh"
    with pytest.raises(ValueError):
        lint_steps.find_stale(items, NOW, -1)


def test_decay_multiplies_by_factor_and_keeps_timestamps() -> None:
    items = [con("a", confidence=1.0), con("b", confidence=0.5, age_days=40)]
    decayed = lint_steps.decay_confidence(items)
    assert [c.confidence for c in decayed] == pytest.approx([0.9, 0.45])
    assert decayed[1].updated_at == items[1].updated_at
    assert items[0].confidence == 1.0
    assert lint_steps.decay_confidence(items, factor=0.5)[0].confidence == pytest.approx(0.5)
    with pytest.raises(ValueError):
        lint_steps.decay_confidence(items, factor=1.5)


def test_prune_strictly_below_threshold() -> None:
    items = [con("low", confidence=0.29), con("edge", confidence=0.3), con("high", confidence=0.9)]
    result = lint_steps.prune(items)
    assert [c.id for c in result.pruned] == ["low"]
    assert [c.id for c in result.kept] == ["edge", "high"]
    # a decayed 0.33 conclusion (0.33 * 0.9 = 0.297) falls under the default threshold
    decayed = lint_steps.decay_confidence([con("d", confidence=0.33)])
    assert [c.id for c in lint_steps.prune(decayed).pruned] == ["d"]


def test_orphans_use_the_0_to_10_mapping_and_citations() -> None:
    episodes = [
        ep("e-low", 0.2),  # 2 on the 0-10 scale: < 3
        ep("e-edge", 0.3),  # exactly 3: not an orphan
        ep("e-high", 0.9),
        ep("e-cited-low", 0.1),  # low but cited by a conclusion
    ]
    conclusions = [con("c1", sources=["e-cited-low"])]
    orphans = lint_steps.find_orphan_episodes(episodes, conclusions, orphan_importance_threshold=3)
    assert [e.id for e in orphans] == ["e-low"]
    wider = lint_steps.find_orphan_episodes(episodes, conclusions, orphan_importance_threshold=10)
    assert [e.id for e in wider] == ["e-low", "e-edge", "e-high"]
    assert lint_steps.find_orphan_episodes(episodes, [], orphan_importance_threshold=0) == []


def test_merge_pair_higher_confidence_wins_and_sources_combine() -> None:
    a = con("a", confidence=0.6, age_days=10, sources=["e1", "e2"])
    b = con("b", confidence=0.9, age_days=2, sources=["e2", "e3"])
    merged = lint_steps.merge_pair(a, b, at_ms=NOW)
    assert merged.id == "b" and merged.text == b.text and merged.confidence == 0.9
    assert merged.source_episode_ids == ["e2", "e3", "e1"]
    assert merged.updated_at == NOW
    assert merged.created_at == a.created_at  # the earlier of the two
    assert merged.stale is False
    # symmetric in argument order
    assert lint_steps.merge_pair(b, a, at_ms=NOW) == merged


def test_merge_pair_tie_prefers_recent_and_rejects_other_users() -> None:
    older = con("older", confidence=0.7, age_days=5)
    newer = con("newer", confidence=0.7, age_days=1)
    assert lint_steps.merge_pair(older, newer, at_ms=NOW).id == "newer"
    other = con("x").model_copy(update={"user_id": "bob"})
    with pytest.raises(ValueError):
        lint_steps.merge_pair(older, other)
    assert lint_steps.merge_pair(older, newer).updated_at > NOW - 10**12  # default clock: now
