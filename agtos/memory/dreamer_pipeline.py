"""Dreamer: consolidate a user's recent episodes into conclusions and refresh the profile.

Like ingestion, ``run_dreamer`` is the single composition; the Prefect flow (agtos.flows.dreamer_flow)
runs it with the steps as tasks, the session-end path with the plain functions below.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agtos.providers.llm import LLMError
from agtos.schemas import Conclusion, Episode
from agtos.tasks.consolidate import llm_conclusions, rule_based_conclusions
from agtos.tasks.profile_builder import profile_update

if TYPE_CHECKING:
    from agtos.memory.services import Services

log = logging.getLogger(__name__)
EPISODE_WINDOW = 50


@dataclass
class DreamReport:
    user_id: str
    episodes: int = 0
    conclusions: list[Conclusion] = field(default_factory=list)
    source: str = "rules"
    note: str | None = None


@dataclass(frozen=True)
class DreamerSteps:
    load: Callable[..., list[Episode]]
    consolidate: Callable[..., tuple[list[Conclusion], str, str | None]]
    store: Callable[..., list[Conclusion]]
    profile: Callable[..., None]


def load_recent_episodes(rt: Services, user_id: str) -> list[Episode]:
    return rt.episodes.recent(user_id, EPISODE_WINDOW)


def consolidate(rt: Services, user_id: str, episodes: list[Episode]) -> tuple[list[Conclusion], str, str | None]:
    """LLM consolidation when the ``consolidation`` slot has one, else (or on failure) the rules."""
    llm = rt.consolidation_llm
    if llm is not None:
        try:
            return llm_conclusions(llm, user_id, episodes), f"llm:{llm.name}", None
        except LLMError as exc:
            log.warning("LLM consolidation rejected (%s); using the rule-based consolidator", exc)
            return rule_based_conclusions(user_id, episodes), "rules", f"llm output rejected: {exc}"
    return rule_based_conclusions(user_id, episodes), "rules", None


def store_conclusions(rt: Services, user_id: str, found: list[Conclusion]) -> list[Conclusion]:
    """Merge with stored versions (keep created_at, union sources), embed, write and index."""
    existing = rt.conclusions.get_many(user_id, [c.id for c in found])
    merged = []
    for conclusion in found:
        old = existing.get(conclusion.id)
        if old is not None:
            conclusion = conclusion.model_copy(
                update={
                    "created_at": old.created_at,
                    "source_episode_ids": list(dict.fromkeys(old.source_episode_ids + conclusion.source_episode_ids)),
                }
            )
        merged.append(conclusion)
    rt.conclusions.upsert_many(merged, rt.semantic.embed_or_none([c.text for c in merged]))
    return merged


def refresh_profile(rt: Services, user_id: str, episodes: list[Episode]) -> None:
    current = rt.profiles.get(user_id)
    update = profile_update(current, rt.conclusions.all(user_id), episodes)
    if update.model_dump(exclude_unset=True):
        rt.profiles.merge(user_id, update)


INLINE_STEPS = DreamerSteps(load_recent_episodes, consolidate, store_conclusions, refresh_profile)


def run_dreamer(rt: Services, user_id: str, steps: DreamerSteps = INLINE_STEPS) -> DreamReport:
    report = DreamReport(user_id)
    episodes = steps.load(rt, user_id)
    report.episodes = len(episodes)
    if not episodes:
        return report
    found, report.source, report.note = steps.consolidate(rt, user_id, episodes)
    report.conclusions = steps.store(rt, user_id, found)
    steps.profile(rt, user_id, episodes)
    return report
