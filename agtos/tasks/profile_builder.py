"""Derive user-profile fields from conclusions and episodes."""

from __future__ import annotations

import re

from agtos.schemas import Conclusion, Episode, ProfileUpdate, UserProfile
from agtos.tasks.explicit import MAX_WORDS

_NAME_PATTERNS = [
    re.compile(r"\bUser's name is ([A-Z][\w'-]+(?: [A-Z][\w'-]+)?)"),
    re.compile(r"\bUser wants to be called ([A-Z][\w'-]+)"),
    re.compile(r"\bUser is called ([A-Z][\w'-]+)"),
]
MAX_LIST_ITEMS = 50
KEY_FACTS = frozenset({"allergy", "diet", "job", "home", "origin", "family", "pet", "name"})
SINGLE_VALUED = frozenset({"job", "home"})


def _name(texts: list[str]) -> str | None:
    for text in texts:
        for pattern in _NAME_PATTERNS:
            match = pattern.search(text)
            if match:
                return match.group(1)
    return None


def _style(episodes: list[Episode]) -> str | None:
    """A coarse communication style from how the user's sessions went (corrections, length)."""
    if not episodes:
        return None
    corrections = sum(1 for e in episodes if e.type == "correction")
    if corrections >= 2:
        return "precise; corrects mistakes, so double-check details"
    avg_facts = sum(len(e.facts) for e in episodes) / len(episodes)
    return "shares personal context freely" if avg_facts >= 2 else "brief and task-focused"


def _cited(conclusion: Conclusion) -> list[str]:
    return [conclusion.id, *conclusion.source_episode_ids, *conclusion.source_turn_ids]


def _single_valued(conclusions: list[Conclusion]) -> list[Conclusion]:
    """Of the home and job statements about one person, the latest learned only (learned by the same run:
    the first in ``conclusions``' order)."""
    latest: dict[tuple[str, str], Conclusion] = {}
    rest = []
    for c in conclusions:
        if c.category in SINGLE_VALUED:
            key = (c.category, c.text.split(" ", 1)[0])
            if key not in latest or c.created_at > latest[key].created_at:
                latest[key] = c
        else:
            rest.append(c)
    return rest + list(latest.values())


def profile_update(current: UserProfile, conclusions: list[Conclusion], episodes: list[Episode]) -> ProfileUpdate:
    """Fields to merge: the name, a style, the real likes/dislikes/preferences (``preferences``) and
    key facts (``facts``) of the explicit conclusions and the patterns (inductive, abductive), each
    with its sources. Derived lines are rebuilt from the stored conclusions each time, so a line whose
    conclusion was forgotten goes; what the user set stays."""
    explicit = [c for c in conclusions if c.type == "explicit" and not c.stale]
    patterns = [c for c in conclusions if c.type in ("inductive", "abductive")]
    facts = [f for e in episodes for f in e.facts]
    changes: dict[str, object] = {}
    if not current.name:
        name = _name([c.text for c in explicit] + facts)
        if name:
            changes["name"] = name
    if not current.communication_style:
        style = _style(episodes)
        if style:
            changes["communication_style"] = style
    derived = {c.text for c in conclusions} | set(current.sources)
    liked = [c for c in explicit if c.category == "preference" and len(c.text.split()) <= MAX_WORDS]
    known = _single_valued([c for c in explicit if c.category in KEY_FACTS])
    sources = {c.text: _cited(c) for c in liked + known + patterns}
    for field, new in (
        ("preferences", [c.text for c in liked]),
        ("facts", [c.text for c in known]),
        ("patterns", [c.text for c in patterns]),
    ):
        kept = [line for line in getattr(current, field) if line not in derived]
        merged = list(dict.fromkeys([*kept, *new]))[:MAX_LIST_ITEMS]
        if merged != getattr(current, field):
            changes[field] = merged
    if sources != current.sources:
        changes["sources"] = sources
    return ProfileUpdate.model_validate(changes)
