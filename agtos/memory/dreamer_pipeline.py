"""Dreamer: consolidate a user's recent episodes into conclusions and refresh the profile.

Like ingestion, ``run_dreamer`` is the single composition; the Prefect flow (agtos.flows.dreamer_flow)
runs it with the steps as tasks, the session-end path with the plain functions below.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from agtos.memory.conclusion_lock import conclusions_held
from agtos.providers.llm import LLMError
from agtos.schemas import Conclusion, Episode, StoredTurn
from agtos.tasks.consolidate import explicit_conclusions, llm_conclusions, merge_conclusions, rule_based_conclusions
from agtos.tasks.profile_builder import profile_update

if TYPE_CHECKING:
    from agtos.memory.services import Services

log = logging.getLogger(__name__)
EPISODE_WINDOW = 50
_Written = TypeVar("_Written")


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
    down is embedded now.

    Two runs of one user may overlap (each session end starts one; a queue worker and an API process):
    the read, merge and write hold the user's conclusions lock (:mod:`agtos.memory.conclusion_lock`, across
    processes, as every other writer of them does), else a run that read before the other wrote overwrote the
    sources the other added. The embedder is
    called before, outside it, for what was not indexed then (the LLM call is done by then too). Sources
    are ordered by their episode's time, oldest first (expired episodes first, by id), whichever run stored first.
    A source the run found that is gone by the merge was forgotten meanwhile (the run loaded it moments before):
    it is left out, and a conclusion resting on such sources alone is not stored (its forget had deleted it), nor
    written onto one already stored (its confidence, ``updated_at`` or ``stale`` would carry the forgotten
    evidence into what is kept): that one stays as it was. One citing no episode at all is stored as before."""
    ids = [c.id for c in found]
    indexed_before = rt.conclusions.index.vectors.vectors(user_id, ids)
    unindexed = [c for c in found if c.id not in indexed_before]
    rows = {c.id: row for row, c in enumerate(unindexed)}

    def merge_and_write(vectors: np.ndarray | None) -> list[Conclusion]:
        with conclusions_held(rt, user_id):
            merged = _merged_with_stored(rt, user_id, found)
            indexed = rt.conclusions.index.vectors.vectors(user_id, ids)
            rt.conclusions.save_records([c for c in merged if c.id in indexed])
            fresh = [c for c in merged if c.id not in indexed and c.id in rows]
            rt.conclusions.upsert_many(fresh, None if vectors is None else vectors[[rows[c.id] for c in fresh]])
            late = [c for c in merged if c.id not in indexed and c.id not in rows]
            if late:  # its vector went (a forget) since it was looked at: embedded here, rarely
                _embed_then_upsert(rt, late, functools.partial(rt.conclusions.upsert_many, late))
        return merged

    return _embed_then_upsert(rt, unindexed, merge_and_write)


def _embed_then_upsert(
    rt: Services, conclusions: list[Conclusion], write: Callable[[np.ndarray | None], _Written]
) -> _Written:
    """``write`` with the conclusions' vectors (None when the embedder is unavailable: they wait for vectors)."""
    return rt.semantic.embed_then_write(
        "conclusion", [(c.user_id, c.id) for c in conclusions], [c.text for c in conclusions], write
    )


def _merged_with_stored(rt: Services, user_id: str, found: list[Conclusion]) -> list[Conclusion]:
    """``found`` merged with the stored versions (read now), sources in their episodes' time order. All of them
    are updated (and the new ones created) at one time, the run's (the latest of its own stamps): the order
    of what one run found must not follow the millisecond each was made in (:func:`profile_order`)."""
    stamp = max((c.updated_at for c in found), default=0)
    existing = rt.conclusions.get_many(user_id, [c.id for c in found])
    cited = {e for c in [*found, *existing.values()] for e in c.source_episode_ids}
    times = rt.episodes.times(user_id, sorted(cited))

    def episode_order(episode_id: str) -> tuple[int, str]:
        return times.get(episode_id, -1), episode_id

    def turn_order(turn_id: str) -> tuple[int, str, int]:
        episode_id, _, index = turn_id.rpartition(".t")
        return (*episode_order(episode_id), int(index)) if index.isdigit() else (-1, turn_id, -1)

    merged = []
    for conclusion in found:
        old = existing.get(conclusion.id)
        episodes, turns = _still_there(conclusion, times)
        if conclusion.source_episode_ids and not episodes:
            continue  # all it rests on was forgotten since the run loaded it: nothing of it lands, a stored one stays
        update: dict[str, object] = {"created_at": stamp, "updated_at": stamp}
        if old is not None:
            episodes, turns = old.source_episode_ids + episodes, old.source_turn_ids + turns
            update["created_at"], update["category"] = old.created_at, conclusion.category or old.category
        update["source_episode_ids"] = sorted(set(episodes), key=episode_order)
        update["source_turn_ids"] = sorted(set(turns), key=turn_order)
        merged.append(conclusion.model_copy(update=update))
    return merged


def _still_there(conclusion: Conclusion, times: dict[str, int]) -> tuple[list[str], list[str]]:
    """The episodes and turns ``conclusion`` (found by this run) cites that are still stored (in ``times``)."""
    gone = {e for e in conclusion.source_episode_ids if e not in times}
    episodes = [e for e in conclusion.source_episode_ids if e not in gone]
    return episodes, [t for t in conclusion.source_turn_ids if t.rpartition(".t")[0] not in gone]


def refresh_profile(rt: Services, user_id: str, episodes: list[Episode]) -> None:
    """Rebuild the profile's derived lines from the stored conclusions, under the conclusions lock: a forget,
    lint or PUT writing between its reads and its write was undone by it."""
    with conclusions_held(rt, user_id):
        current = rt.profiles.get(user_id)
        conclusions = rt.conclusions.all(user_id)
        said = rt.episodes.times(
            user_id, sorted({c.source_episode_ids[-1] for c in conclusions if c.source_episode_ids})
        )
        update = profile_update(current, profile_order(conclusions, said), episodes)
        if update.model_dump(exclude_unset=True):
            rt.profiles.merge(user_id, update)


def profile_order(conclusions: list[Conclusion], said: dict[str, int]) -> list[Conclusion]:
    """The profile's order: the latest run's first (``updated_at``), then the more confident, then the more
    recently said (the time of its latest episode, ``said``, then its latest turn's position there); equal
    in all of these, as listed (:meth:`ConclusionStore.all`). Never the millisecond a run made each one in."""

    def key(c: Conclusion) -> tuple[int, float, int, int]:
        last = c.source_episode_ids[-1] if c.source_episode_ids else ""
        turns = [t.rpartition(".t") for t in c.source_turn_ids]
        position = max((int(n) for episode, _, n in turns if episode == last and n.isdigit()), default=-1)
        return -c.updated_at, -c.confidence, -said.get(last, -1), -position

    return sorted(conclusions, key=key)


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
