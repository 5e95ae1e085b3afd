"""Context assembly: candidates from every tier → dedup → rank → token budget → prompt section."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

from agtos.tasks.text import content_words, normalise
from agtos.tasks.tokens import count_tokens

SECTION_TITLES = {
    "working": "Earlier in this conversation",
    "profile": "About the user",
    "semantic": "Known facts and preferences",
    "episodic": "Relevant past sessions",
}
SECTION_ORDER = ("profile", "semantic", "episodic", "working")
RECENCY_HALF_LIFE_DAYS = 30.0
NEAR_DUPLICATE_JACCARD = 0.8


@dataclass(frozen=True)
class ContextItem:
    tier: str  # working | profile | semantic | episodic
    id: str
    text: str
    relevance: float  # 0-1
    timestamp: int  # ms

    def rank(self, now_ms: int) -> float:
        """Relevance × recency; recency decays from 1 to a floor of 0.5."""
        age_days = max(0.0, (now_ms - self.timestamp) / 86_400_000)
        recency = 0.5 + 0.5 * math.exp(-age_days * math.log(2) / RECENCY_HALF_LIFE_DAYS)
        return self.relevance * recency


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def dedupe(items: list[ContextItem], threshold: float = NEAR_DUPLICATE_JACCARD) -> list[ContextItem]:
    """Collapse near-duplicate texts across tiers, keeping the first (best-ranked) occurrence."""
    kept: list[tuple[ContextItem, set[str], str]] = []
    for item in items:
        terms, norm = set(content_words(item.text)), normalise(item.text)
        if any(norm == k_norm or _jaccard(terms, k_terms) >= threshold for _, k_terms, k_norm in kept):
            continue
        kept.append((item, terms, norm))
    return [item for item, _, _ in kept]


def fit_budget(items: list[ContextItem], budget_tokens: int) -> tuple[list[ContextItem], int]:
    """Greedy by rank: take each item whose bullet still fits in the budget."""
    chosen: list[ContextItem] = []
    used = 0
    for item in items:
        cost = count_tokens(item.text) + 3  # bullet, date and newline
        if used + cost <= budget_tokens:
            chosen.append(item)
            used += cost
    return chosen, used


def _bullet(item: ContextItem) -> str:
    if item.tier == "episodic":
        day = datetime.fromtimestamp(item.timestamp / 1000, tz=UTC).strftime("%Y-%m-%d")
        return f"- ({day}) {item.text}"
    return f"- {item.text}"


def format_section(items: list[ContextItem]) -> str:
    """A markdown system-prompt section grouped by tier; empty string when nothing was chosen."""
    if not items:
        return ""
    lines = ["## Memory", "Use these memories about the user when relevant; they may be outdated."]
    for tier in SECTION_ORDER:
        group = [i for i in items if i.tier == tier]
        if group:
            lines.append(f"### {SECTION_TITLES[tier]}")
            lines.extend(_bullet(i) for i in group)
    return "\n".join(lines)


def assemble(items: list[ContextItem], budget_tokens: int, now_ms: int) -> tuple[list[ContextItem], str, int]:
    """Rank, dedupe, fit and format; returns (chosen items, prompt text, tokens used)."""
    ranked = sorted(items, key=lambda i: i.rank(now_ms), reverse=True)
    chosen, used = fit_budget(dedupe(ranked), budget_tokens)
    return chosen, format_section(chosen), used
