"""Dreamer consolidation: episodes → typed conclusions (explicit, deductive, inductive, abductive).

The rule-based consolidator is deterministic and offline; the LLM consolidator asks for JSON
and validates every item, so malformed or invented output is never stored.
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agtos.providers.llm import LLMError, LLMProvider, parse_json_reply
from agtos.schemas import Conclusion, ConclusionType, Episode
from agtos.schemas.records import now_ms
from agtos.tasks.distil import memory_kind
from agtos.tasks.prompts import CONSOLIDATION_PROMPT
from agtos.tasks.text import normalise

log = logging.getLogger(__name__)

MORNING_HOURS = range(5, 12)  # UTC hours; episodes carry UTC millisecond timestamps
DEDUCTIONS: dict[str, str] = {
    "vegetarian": "User does not eat meat, so recommendations should avoid meat dishes",
    "vegan": "User avoids all animal products, so recommendations should be plant-based",
    "metric units": "User expects distances and temperatures in metric units (km, °C)",
    "night owl": "User is most active late in the evening",
}


def conclusion_id(user_id: str, kind: str, text: str) -> str:
    """Same user + type + normalised text → same id: re-running the Dreamer updates, never duplicates."""
    digest = hashlib.sha256(f"{user_id}\x00{kind}\x00{normalise(text)}".encode()).hexdigest()[:16]
    return f"con-{digest}"


def _conclusion(user_id: str, kind: ConclusionType, text: str, confidence: float, sources: list[str]) -> Conclusion:
    stamp = now_ms()
    return Conclusion(
        id=conclusion_id(user_id, kind.value, text),
        user_id=user_id,
        text=text,
        type=kind,
        confidence=round(min(1.0, max(0.0, confidence)), 3),
        source_episode_ids=list(dict.fromkeys(sources)),
        created_at=stamp,
        updated_at=stamp,
    )


def _explicit(user_id: str, episodes: list[Episode]) -> list[Conclusion]:
    """Stated preferences and corrections, verbatim (third person) as explicit conclusions."""
    sources: dict[str, list[str]] = defaultdict(list)
    texts: dict[str, str] = {}
    for episode in episodes:
        for fact in episode.facts:
            if memory_kind(fact).value == "preference" or episode.type in ("preference", "correction"):
                key = normalise(fact)
                texts.setdefault(key, fact)
                sources[key].append(episode.id)
    return [
        _conclusion(user_id, ConclusionType.explicit, texts[key], 0.85 + min(0.1, 0.05 * (len(ids) - 1)), ids)
        for key, ids in sources.items()
    ]


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
        hours = [datetime.fromtimestamp(e.timestamp / 1000, tz=UTC).hour for e in eps]
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
        for trigger, consequence in DEDUCTIONS.items():
            if trigger in lowered and "not" not in lowered.split():
                out.append(
                    _conclusion(
                        user_id,
                        ConclusionType.deductive,
                        consequence,
                        conclusion.confidence * 0.85,
                        conclusion.source_episode_ids,
                    )
                )
    return out


def rule_based_conclusions(user_id: str, episodes: list[Episode]) -> list[Conclusion]:
    """Deterministic consolidation used when no LLM is configured."""
    explicit = _explicit(user_id, episodes)
    found = explicit + _deductive(user_id, explicit) + _inductive(user_id, episodes)
    unique: dict[str, Conclusion] = {}
    for conclusion in found:
        if conclusion.id in unique:
            merged = list(dict.fromkeys(unique[conclusion.id].source_episode_ids + conclusion.source_episode_ids))
            conclusion = conclusion.model_copy(update={"source_episode_ids": merged})
        unique[conclusion.id] = conclusion
    return list(unique.values())


class _LLMConclusion(BaseModel):
    model_config = ConfigDict(extra="ignore")
    text: str = Field(min_length=3, max_length=500)
    type: ConclusionType
    confidence: float = Field(ge=0.0, le=1.0)
    source_episode_ids: list[str] = Field(min_length=1)


def llm_conclusions(llm: LLMProvider, user_id: str, episodes: list[Episode]) -> list[Conclusion]:
    """Ask the LLM; raises LLMError when the reply as a whole is unusable, drops invalid items."""
    known = {e.id for e in episodes}
    listing = "\n".join(
        f"- {e.id} [{e.type}, topic {e.topic}, "
        f"{datetime.fromtimestamp(e.timestamp / 1000, tz=UTC):%Y-%m-%d %H:%M} UTC]: {e.summary} "
        f"Facts: {'; '.join(e.facts) or 'none'}"
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
        out.append(_conclusion(user_id, item.type, item.text.strip(), item.confidence, sources))
    return out
