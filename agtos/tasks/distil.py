"""Distil semantic memories (facts, preferences) from episodes."""

from __future__ import annotations

import hashlib

from agtos.schemas import Episode, Memory, MemoryKind
from agtos.tasks.extract import PREFERENCE_RE
from agtos.tasks.text import id_text

_PREFERENCE_MARKERS = (
    "prefers",
    "likes",
    "loves",
    "enjoys",
    "hates",
    "dislikes",
    "does not like",
    "can't stand",
    "would rather",
    "favourite",
    "favorite",
    "wants to be called",
    "asks:",
)


def memory_id(user_id: str, text: str) -> str:
    """Same user + same normalised text (:func:`id_text`) → same id, so a fact learned twice is stored once."""
    digest = hashlib.sha256(f"{user_id}\x00{id_text(text)}".encode()).hexdigest()[:16]
    return f"mem-{digest}"


def memory_kind(text: str) -> MemoryKind:
    lowered = text.lower()
    if PREFERENCE_RE.search(text) or any(marker in lowered for marker in _PREFERENCE_MARKERS):
        return MemoryKind.preference
    return MemoryKind.fact


def distil_memories(episodes: list[Episode]) -> list[Memory]:
    """One memory per distinct fact of each episode, in the episodes' order, valid from when the
    episode first said it (its turn's time and UTC offset; the episode's time when the turn's is not
    known). A fact said in several episodes comes once per episode, each naming its own episode: the
    writer (``MemoryVersions.write``) merges them in that order, as when the episodes come in
    separate batches (restated, reopened, superseding; the embedding step embeds its text once)."""
    by_key: dict[tuple[str, str], Memory] = {}
    for episode in episodes:
        for fact in episode.facts:
            mid = memory_id(episode.user_id, fact)
            said = episode.said_at(fact)
            memory = by_key.get((episode.id, mid))
            if memory is not None:
                if said < memory.valid_from:
                    memory.valid_from, memory.utc_offset = said, episode.offset_at(fact)
                continue
            by_key[episode.id, mid] = Memory(
                id=mid,
                user_id=episode.user_id,
                text=fact,
                kind=memory_kind(fact),
                source_episode_ids=[episode.id],
                created_at=episode.timestamp,
                importance=episode.importance,
                valid_from=said,
                utc_offset=episode.offset_at(fact),
            )
    return list(by_key.values())
