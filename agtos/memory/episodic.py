"""Turning a finished session into an episode: summarise, extract, score, decide."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from agtos.schemas import Episode, Turn
from agtos.schemas.records import now_ms
from agtos.tasks.extract import extract
from agtos.tasks.importance import SaveDecision, decide_save
from agtos.tasks.summarize import Summariser


def session_episode_id(user_id: str, session_id: str, segment: str = "") -> str:
    """Deterministic id, so ending (or importing) the same session, or segment of it, twice stores
    one episode. ``segment`` (see :func:`segment_key`) tells apart the stretches of a live session
    id that is continued after it was ended; imports leave it empty (one episode per session)."""
    key = f"{user_id}\x00{session_id}" + (f"\x00{segment}" if segment else "")  # imports: ids as before
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return f"ep-{digest}"


def segment_key(turns: list[Turn]) -> str:
    """Identity of one stretch of a session: a digest of what was said (role, speaker, content).

    Timestamps are left out on purpose: a client that re-sends the same turns (a retry, with
    server-assigned times) ends the same segment again, so the episode is stored once."""
    digest = hashlib.sha256()
    for turn in turns:
        digest.update(turn.model_dump_json(include={"role", "content", "name"}).encode() + b"\n")
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class EpisodeDraft:
    episode: Episode
    decision: SaveDecision


def build_episode(
    user_id: str, session_id: str, turns: list[Turn], summariser: Summariser, segment: str = ""
) -> EpisodeDraft:
    """Everything the episodic tier needs from a session's turns (no I/O but the summariser)."""
    found = extract(turns)
    decision = decide_save(turns, found)
    summary = summariser.summarise(turns) if decision.save else "(not saved)"
    facts = list(dict.fromkeys(found.corrections + found.preferences + found.facts))[:256]
    last = max(turns, key=lambda t: t.timestamp, default=None)
    episode = Episode(
        id=session_episode_id(user_id, session_id, segment),
        user_id=user_id,
        session_id=session_id,
        summary=summary or "(empty session)",
        keywords=found.keywords,
        topic=found.topic,
        timestamp=(last.timestamp if last else 0) or now_ms(),
        utc_offset=last.utc_offset if last and last.timestamp else None,
        importance=decision.importance,
        type=decision.type,
        facts=facts,
    ).with_fact_times(
        {f: found.stated_at[f] for f in facts if found.stated_at.get(f)},
        {f: found.stated_offset[f] for f in facts if f in found.stated_offset},
    )
    return EpisodeDraft(episode, decision)
