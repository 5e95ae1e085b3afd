"""Dreamer consolidation: episodes → typed conclusions (explicit, deductive, inductive, abductive).

The rule-based consolidator is deterministic and offline; the LLM consolidator asks for JSON
and validates every item, so malformed or invented output is never stored.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import defaultdict
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agtos.providers.llm import LLMError, LLMProvider, parse_json_reply
from agtos.schemas import Conclusion, ConclusionType, Episode, StoredTurn
from agtos.schemas.records import now_ms
from agtos.tasks.dates import turn_datetime
from agtos.tasks.distil import memory_kind
from agtos.tasks.explicit import MAX_WORDS, Statement, between_people, turn_statements
from agtos.tasks.prompts import CONSOLIDATION_PROMPT
from agtos.tasks.text import content_words, id_text, normalise

log = logging.getLogger(__name__)

MORNING_HOURS = range(5, 12)  # local hours where the session's UTC offset is known, else UTC hours
DEDUCTIONS: dict[str, str] = {
    "vegetarian": "User does not eat meat, so recommendations should avoid meat dishes",
    "vegan": "User avoids all animal products, so recommendations should be plant-based",
    "metric units": "User expects distances and temperatures in metric units (km, °C)",
    "night owl": "User is most active late in the evening",
}
_ALLERGY = re.compile(r"\bis allergic to (.+)$")


def conclusion_id(user_id: str, kind: str, text: str) -> str:
    """Same user + type + normalised text (:func:`id_text`) → same id: re-running the Dreamer updates, never
    duplicates."""
    digest = hashlib.sha256(f"{user_id}\x00{kind}\x00{id_text(text)}".encode()).hexdigest()[:16]
    return f"con-{digest}"


def _conclusion(
    user_id: str,
    kind: ConclusionType,
    text: str,
    confidence: float,
    sources: list[str],
    turns: list[str] | None = None,
    category: str | None = None,
) -> Conclusion:
    stamp = now_ms()
    return Conclusion(
        id=conclusion_id(user_id, kind.value, text),
        user_id=user_id,
        text=text,
        type=kind,
        confidence=round(min(1.0, max(0.0, confidence)), 3),
        source_episode_ids=list(dict.fromkeys(sources)),
        source_turn_ids=list(dict.fromkeys(turns or [])),
        category=category,
        created_at=stamp,
        updated_at=stamp,
    )


def _explicit(user_id: str, episodes: list[Episode], turns: dict[str, list[StoredTurn]]) -> list[Conclusion]:
    """What people stated of weight (see :mod:`agtos.tasks.explicit`), one conclusion per statement
    citing every episode and turn that said it; an episode without stored turns gives its stated
    preferences. Said again in another turn: more confident."""
    found: dict[str, list[Statement]] = defaultdict(list)
    for episode in episodes:
        if episode.id in turns:
            statements = turn_statements(turns[episode.id])
        else:
            statements = [
                Statement(fact, "preference", 0.85, episode.id, "")
                for fact in episode.facts
                if memory_kind(fact).value == "preference" and len(fact.split()) <= MAX_WORDS
            ]
        for statement in statements:
            found[normalise(statement.text)].append(statement)
    out = []
    for said in found.values():
        first = said[0]
        confidence = max(s.confidence for s in said) + min(0.04, 0.02 * (len(said) - 1))
        sources = [s.episode_id for s in said]
        cited = [s.turn_id for s in said if s.turn_id]
        out.append(
            _conclusion(user_id, ConclusionType.explicit, first.text, confidence, sources, cited, first.category)
        )
    return out


def _inductive(user_id: str, episodes: list[Episode]) -> list[Conclusion]:
    """Patterns across at least two sessions: recurring topics, and topics checked in the morning."""
    by_topic: dict[str, list[Episode]] = defaultdict(list)
    for episode in episodes:
        if episode.topic and episode.topic != "general":
            by_topic[episode.topic].append(episode)
    out: list[Conclusion] = []
    for topic, eps in by_topic.items():
        sessions = {e.session_id or e.id for e in eps}
        if len(sessions) < 2:
            continue
        ids = [e.id for e in eps]
        hours = [turn_datetime(e.timestamp, e.utc_offset).hour for e in eps]
        confidence = 0.45 + 0.1 * min(4, len(sessions) - 1)
        if all(h in MORNING_HOURS for h in hours):
            text = f"User is a morning person who checks {topic} first thing in the day"
            out.append(_conclusion(user_id, ConclusionType.inductive, text, confidence, ids))
        out.append(
            _conclusion(user_id, ConclusionType.inductive, f"User regularly asks about {topic}", confidence, ids)
        )
    return out


def _deductive(user_id: str, explicit: list[Conclusion]) -> list[Conclusion]:
    """Consequences of explicit statements through a small rule table."""
    out = []
    for conclusion in explicit:
        lowered = conclusion.text.lower()
        consequences = [c for trigger, c in DEDUCTIONS.items() if trigger in lowered and "not" not in lowered.split()]
        allergy = _ALLERGY.search(conclusion.text) if conclusion.text.startswith("User ") else None
        if allergy:
            consequences.append(f"User must avoid {allergy[1]}, so food suggestions should leave it out")
        out += [
            _conclusion(
                user_id,
                ConclusionType.deductive,
                consequence,
                conclusion.confidence * 0.85,
                conclusion.source_episode_ids,
                conclusion.source_turn_ids,
                conclusion.category,
            )
            for consequence in consequences
        ]
    return out


def explicit_conclusions(
    user_id: str, episodes: list[Episode], turns: dict[str, list[StoredTurn]] | None = None
) -> list[Conclusion]:
    """The stated facts and preferences of weight, each citing its episodes and turns."""
    return _explicit(user_id, episodes, turns or {})


def rule_based_conclusions(
    user_id: str, episodes: list[Episode], turns: dict[str, list[StoredTurn]] | None = None
) -> list[Conclusion]:
    """Deterministic consolidation used when no LLM is configured: explicit statements (from the
    episodes' ``turns`` where stored), their consequences and the patterns across sessions."""
    explicit = explicit_conclusions(user_id, episodes, turns)
    # habits of "User" are an agent chat's: between two named people, whose would they be?
    agent_chats = [e for e in episodes if not between_people((turns or {}).get(e.id, []))]
    return merge_conclusions(explicit + _deductive(user_id, explicit) + _inductive(user_id, agent_chats))


def merge_conclusions(found: list[Conclusion]) -> list[Conclusion]:
    """One conclusion per id, its sources (episodes, turns) united."""
    unique: dict[str, Conclusion] = {}
    for conclusion in found:
        if conclusion.id in unique:
            old = unique[conclusion.id]
            conclusion = conclusion.model_copy(
                update={
                    "source_episode_ids": list(dict.fromkeys(old.source_episode_ids + conclusion.source_episode_ids)),
                    "source_turn_ids": list(dict.fromkeys(old.source_turn_ids + conclusion.source_turn_ids)),
                    "category": conclusion.category or old.category,
                }
            )
        unique[conclusion.id] = conclusion
    return list(unique.values())


class _LLMConclusion(BaseModel):
    model_config = ConfigDict(extra="ignore")
    text: str = Field(min_length=3, max_length=500)
    type: ConclusionType
    confidence: float = Field(ge=0.0, le=1.0)
    source_episode_ids: list[str] = Field(min_length=1)
    source_turn_ids: list[str] = Field(default_factory=list)


def _said(turns: dict[str, list[StoredTurn]], episode_id: str) -> str:
    statements = turn_statements(turns.get(episode_id, []))
    return "; ".join(f"[{s.turn_id}] {s.text}" for s in statements) or "none"


def cited_turns(text: str, episode_ids: list[str], turns: dict[str, list[StoredTurn]]) -> list[str]:
    """The turn of the cited episodes that shares most content words with ``text`` (two at least)."""
    terms = set(content_words(text)) - {"user"}
    best, best_shared = "", 1
    for episode_id in episode_ids:
        for turn in turns.get(episode_id, []):
            shared = len(terms & set(content_words(turn.content)))
            if turn.role == "user" and shared > best_shared:
                best, best_shared = f"{episode_id}.t{turn.position}", shared
    return [best] if best else []


def llm_conclusions(
    llm: LLMProvider, user_id: str, episodes: list[Episode], turns: dict[str, list[StoredTurn]] | None = None
) -> list[Conclusion]:
    """Ask the LLM; raises LLMError when the reply as a whole is unusable, drops invalid items.
    Each episode is listed with the statements of its turns (by turn id) for the LLM to cite;
    a conclusion that cites no known turn is given the turn of its episodes that says most of it."""
    turns = turns or {}
    known = {e.id for e in episodes}
    known_turns = {f"{t.episode_id}.t{t.position}" for ts in turns.values() for t in ts}
    listing = "\n".join(
        f"- {e.id} [{e.type}, topic {e.topic}, "
        f"{datetime.fromtimestamp(e.timestamp / 1000, tz=UTC):%Y-%m-%d %H:%M} UTC]: {e.summary} "
        f"Facts: {'; '.join(e.facts) or 'none'} Statements: {_said(turns, e.id)}"
        for e in episodes
    )
    reply = parse_json_reply(
        llm.chat(
            [{"role": "system", "content": CONSOLIDATION_PROMPT}, {"role": "user", "content": listing}],
            json_mode=True,
        )
    )
    items = reply.get("conclusions") if isinstance(reply, dict) else None
    if not isinstance(items, list):
        raise LLMError("consolidation reply has no 'conclusions' list")
    out = []
    for raw in items:
        try:
            item = _LLMConclusion.model_validate(raw)
        except ValidationError as exc:
            log.warning("dropping invalid conclusion from the LLM: %s", exc.errors()[:1])
            continue
        sources = [i for i in item.source_episode_ids if i in known]
        if not sources:
            log.warning("dropping conclusion citing unknown episodes: %r", item.text[:80])
            continue
        text = item.text.strip()
        cited = [t for t in item.source_turn_ids if t in known_turns and t.rsplit(".t", 1)[0] in sources]
        out.append(
            _conclusion(user_id, item.type, text, item.confidence, sources, cited or cited_turns(text, sources, turns))
        )
    return out
