"""Derive user-profile fields from conclusions and episodes."""

from __future__ import annotations

import re

from agtos.schemas import Conclusion, Episode, ProfileUpdate, UserProfile

_NAME_PATTERNS = [
    re.compile(r"\bUser's name is ([A-Z][\w'-]+(?: [A-Z][\w'-]+)?)"),
    re.compile(r"\bUser wants to be called ([A-Z][\w'-]+)"),
    re.compile(r"\bUser is called ([A-Z][\w'-]+)"),
]
MAX_LIST_ITEMS = 50


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


def profile_update(current: UserProfile, conclusions: list[Conclusion], episodes: list[Episode]) -> ProfileUpdate:
    """Fields to merge: derived values fill gaps and extend lists, never overwrite what the user set."""
    explicit = [c.text for c in conclusions if c.type == "explicit"]
    patterns = [c.text for c in conclusions if c.type in ("inductive", "abductive")]
    facts = [f for e in episodes for f in e.facts]
    changes: dict[str, object] = {}
    if not current.name:
        name = _name(explicit + facts)
        if name:
            changes["name"] = name
    if not current.communication_style:
        style = _style(episodes)
        if style:
            changes["communication_style"] = style
    for field, new in (("preferences", explicit), ("patterns", patterns)):
        merged = list(dict.fromkeys([*getattr(current, field), *new]))[:MAX_LIST_ITEMS]
        if merged != getattr(current, field):
            changes[field] = merged
    return ProfileUpdate.model_validate(changes)
