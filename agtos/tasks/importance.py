"""Importance scoring and the episodic save heuristics."""

from __future__ import annotations

from dataclasses import dataclass

from agtos.schemas import EpisodeType, Role, Turn
from agtos.tasks.extract import Extraction, is_trivial


@dataclass(frozen=True)
class SaveDecision:
    save: bool
    type: EpisodeType
    importance: float
    reason: str


def _user_turns(turns: list[Turn]) -> list[Turn]:
    return [t for t in turns if t.role == Role.user.value and not t.is_summary]


def score_importance(turns: list[Turn], found: Extraction) -> float:
    """0-1: corrections and preferences weigh most, then outcomes, facts and length."""
    score = 0.3
    score += 0.35 if found.corrections else 0.0
    score += 0.3 if found.preferences else 0.0
    score += 0.2 if found.task_outcomes else 0.0
    score += min(0.2, 0.05 * len(found.facts))
    substantive = [t for t in _user_turns(turns) if not is_trivial(t.content)]
    score += min(0.15, 0.03 * max(0, len(substantive) - 1))
    return round(min(1.0, score), 3)


def decide_save(turns: list[Turn], found: Extraction) -> SaveDecision:
    """Corrections and preferences always saved; task completions saved; trivia skipped."""
    importance = score_importance(turns, found)
    users = _user_turns(turns)
    if found.corrections:
        return SaveDecision(True, EpisodeType.correction, max(importance, 0.8), "user correction")
    if found.preferences:
        return SaveDecision(True, EpisodeType.preference, max(importance, 0.7), "stated preference")
    if found.task_outcomes:
        return SaveDecision(True, EpisodeType.task_outcome, max(importance, 0.6), "task outcome")
    if not users:
        return SaveDecision(False, EpisodeType.conversation, importance, "no user turns")
    if all(is_trivial(t.content) for t in users):
        return SaveDecision(False, EpisodeType.conversation, importance, "greeting or small talk only")
    if len(users) == 1 and not found.facts:
        return SaveDecision(False, EpisodeType.conversation, importance, "single-turn trivial lookup")
    return SaveDecision(True, EpisodeType.conversation, importance, "conversation")
