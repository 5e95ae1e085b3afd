"""Dreamer: consolidate a user's recent episodes into conclusions and refresh the profile.

Like ingestion, ``run_dreamer`` is the single composition; the Prefect flow (agtos.flows.dreamer_flow)
runs it with the steps as tasks, the session-end path with the plain functions below.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agtos.providers.llm import LLMError
from agtos.schemas import Conclusion, Episode, StoredTurn
from agtos.tasks.consolidate import explicit_conclusions, llm_conclusions, merge_conclusions, rule_based_conclusions
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


def episode_turns(rt: Services, user_id: str, episodes: list[Episode]) -> dict[str, list[StoredTurn]]:
    """The stored turns of ``episodes`` (one round trip), by episode id; episodes without turns are absent."""
    by_episode: dict[str, list[StoredTurn]] = {}
    for turn in rt.semantic.turns.of_episodes(user_id, [e.id for e in episodes]):
        by_episode.setdefault(turn.episode_id, []).append(turn)
    return by_episode


def consolidate(rt: Services, user_id: str, episodes: list[Episode]) -> tuple[list[Conclusion], str, str | None]:
    """The explicit statements of the episodes' turns (rules, always), with the LLM's conclusions when
    the ``consolidation`` slot has one, else (or on failure) the rule-based deductions and patterns."""
    turns = episode_turns(rt, user_id, episodes)
    llm = rt.consolidation_llm
    if llm is not None:
        try:
            found = llm_conclusions(llm, user_id, episodes, turns)
            return merge_conclusions(explicit_conclusions(user_id, episodes, turns) + found), f"llm:{llm.name}", None
        except LLMError as exc:
            log.warning("LLM consolidation rejected (%s); using the rule-based consolidator", exc)
            return rule_based_conclusions(user_id, episodes, turns), "rules", f"llm output rejected: {exc}"
    return rule_based_conclusions(user_id, episodes, turns), "rules", None


def store_conclusions(rt: Services, user_id: str, found: list[Conclusion]) -> list[Conclusion]:
    """Merge with stored versions (keep created_at, union sources), write, and embed and index the
    new ones. A conclusion's id is made of its text, so one already stored with its vector keeps its
    indexes and only its record is rewritten: a run embeds only what it found new (it re-embedded
    every conclusion of the window before, each session end), and one stored while the embedder was
    down is embedded now."""
    existing = rt.conclusions.get_many(user_id, [c.id for c in found])
    merged = []
    for conclusion in found:
        old = existing.get(conclusion.id)
        if old is not None:
            conclusion = conclusion.model_copy(
                update={
                    "created_at": old.created_at,
                    "source_episode_ids": list(dict.fromkeys(old.source_episode_ids + conclusion.source_episode_ids)),
                    "source_turn_ids": list(dict.fromkeys(old.source_turn_ids + conclusion.source_turn_ids)),
                    "category": conclusion.category or old.category,
                }
            )
        merged.append(conclusion)
    indexed = rt.conclusions.index.vectors.vectors(user_id, [c.id for c in merged if c.id in existing])
    fresh = [c for c in merged if c.id not in indexed]
    rt.conclusions.save_records([c for c in merged if c.id in indexed])
    rt.semantic.embed_then_write(
        "conclusion",
        [(c.user_id, c.id) for c in fresh],
        [c.text for c in fresh],
        functools.partial(rt.conclusions.upsert_many, fresh),
    )
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
