"""Forgetting an episode forgets what was learnt from it alone.

A session's facts (memories), the Dreamer's conclusions and the entities its NER found name the
episodes they come from. When the episode is forgotten, a record whose only source it is goes with
it (its text repeats what was said there); a record other episodes support too stays and no longer
names it. The profile's derived lines are then rebuilt from the conclusions left (lines the user
set stay). Memories the user wrote or imported name no episode and are not touched.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from agtos.memory.conclusion_lock import conclusions_held
from agtos.schemas import Conclusion

if TYPE_CHECKING:
    from agtos.memory.services import Services

ENTITY_PAGE = 500  # entities read per page while looking for the episode's


def forget_derived(rt: Services, user_id: str, episode_id: str) -> dict[str, int]:
    """Forget the memories, conclusions and entities only ``episode_id`` supports, and drop it from
    the sources of the others; returns how many of each kind were forgotten."""
    memories = _memories(rt, user_id, episode_id)
    forgotten, rewritten = _conclusions(rt, user_id, episode_id)
    counts = {"memories": memories, "conclusions": forgotten, "entities": forget_entities_of(rt, user_id, episode_id)}
    if forgotten:
        rt.nli_cache.clear(user_id)  # cached verdicts are keyed by digests of conclusion texts
    if forgotten or rewritten:  # the profile's lines cite their conclusions' episodes and turns
        from agtos.memory.dreamer_pipeline import load_recent_episodes, refresh_profile

        refresh_profile(rt, user_id, load_recent_episodes(rt, user_id))
    return counts


def _memories(rt: Services, user_id: str, episode_id: str) -> int:
    """Forget the memories only ``episode_id`` supports, drop it from the others' sources (under the
    memory writers' lock: a session end merging a source in between was lost, or wrote it back)."""
    return rt.semantic.versions.drop_episode(user_id, episode_id)


def _conclusions(rt: Services, user_id: str, episode_id: str) -> tuple[int, int]:
    """Forget the conclusions only ``episode_id`` supports, rewrite the others' sources: (forgotten, rewritten).
    Under the conclusions lock: a Dreamer merge between the read and the write had its new sources (and the
    conclusion it added them to) lost, or wrote the forgotten episode back."""
    with conclusions_held(rt, user_id):
        sourced = [c for c in rt.conclusions.all(user_id) if episode_id in c.source_episode_ids]
        kept: list[Conclusion] = []
        for conclusion in sourced:
            rest = [e for e in conclusion.source_episode_ids if e != episode_id]
            if rest:
                turns = [t for t in conclusion.source_turn_ids if not t.startswith(f"{episode_id}.")]
                kept.append(conclusion.model_copy(update={"source_episode_ids": rest, "source_turn_ids": turns}))
            else:
                rt.conclusions.delete(user_id, conclusion.id)
        rt.conclusions.save_records(kept)
    return len(sourced) - len(kept), len(kept)


def forget_entities_of(rt: Services, user_id: str, episode_id: str, still_said: str = "") -> int:
    """Forget the entities only ``episode_id`` names (an episode's, or a memory's posted through the API,
    which fed the graph under its own id) and drop it from the others'; returns how many were forgotten.
    ``still_said``: a memory's new text, whose entities (by name or alias) keep it, their ids and edits.
    Under the user's entity writers' lock: an ingestion adding an episode to an entity between the read
    and the write had the entity (or an edge) deleted with what it had just added."""
    with rt.entities.held(user_id):
        return _forget_entities_of(rt, user_id, episode_id, still_said)


def _forget_entities_of(rt: Services, user_id: str, episode_id: str, still_said: str) -> int:
    """:func:`forget_entities_of`, holding the lock."""
    store, ids, offset = rt.entities.store, [], 0
    while True:  # every id first: forgetting one shifts the pages
        page, total = store.page(user_id, None, offset, ENTITY_PAGE)
        ids += page
        offset += ENTITY_PAGE
        if offset >= total or not page:
            break
    forgotten = 0
    for at in range(0, len(ids), ENTITY_PAGE):
        for entity in store.get_many(user_id, ids[at : at + ENTITY_PAGE]).values():
            if any(_said(name, still_said) for name in [entity.name, *entity.aliases]):
                continue
            if entity.episode_ids == [episode_id]:
                forgotten += int(rt.entities.forget_holding(user_id, entity.id))
            elif episode_id in entity.episode_ids:
                rt.entities.drop_episode(user_id, entity.id, episode_id)
    return forgotten


def _said(name: str, text: str) -> bool:
    """Whether ``text`` names ``name`` as a whole word or phrase, in any case."""
    return bool(text) and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE) is not None
