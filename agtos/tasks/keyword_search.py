"""Keyword relevance of episodes to a query (the pre-index search path)."""

from __future__ import annotations

import math

from agtos.schemas import Episode
from agtos.tasks.text import content_words, words


def query_terms(query: str) -> list[str]:
    terms = content_words(query)
    return terms or words(query)


def keyword_score(terms: list[str], episode: Episode) -> float:
    """0-1: fraction of query terms found, keywords and topic weighted above body text."""
    if not terms:
        return 0.0
    keyword_terms = {w for k in episode.keywords for w in words(k)} | set(words(episode.topic))
    body_terms = set(words(episode.summary)) | {w for f in episode.facts for w in words(f)}
    hits = 0.0
    for term in set(terms):
        if term in keyword_terms:
            hits += 1.0
        elif term in body_terms:
            hits += 0.7
    coverage = hits / len(set(terms))
    return round(min(1.0, coverage * (0.9 + 0.1 * math.tanh(len(terms) / 3))), 4)


def rank_by_keywords(query: str, episodes: list[Episode], limit: int) -> list[tuple[Episode, float]]:
    """Episodes with any hit, best first, newer first on ties."""
    terms = query_terms(query)
    scored = [(ep, keyword_score(terms, ep)) for ep in episodes]
    scored = [pair for pair in scored if pair[1] > 0]
    scored.sort(key=lambda pair: (pair[1], pair[0].timestamp), reverse=True)
    return scored[:limit]
