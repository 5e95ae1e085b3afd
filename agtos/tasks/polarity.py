"""Lexical polarity features shared by contradiction stage 1 (candidate heuristic) and the
lexical-negation NLI fallback: negation cues, a small antonym lexicon and topic words.

This is a heuristic, not a model: it catches "X" vs "not X" and lexicon antonyms only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from agtos.tasks.text import content_words, normalise

NEGATION_WORDS = frozenset({"not", "never", "no", "none", "nobody", "nothing", "neither", "nor", "without", "cannot"})
NEGATION_PHRASES = ("no longer", "not anymore", "gave up", "quit", "stopped")


@dataclass(frozen=True)
class AntonymPair:
    """Two mutually exclusive term sets. ``needs_topic``: the texts must also share a content
    word ("loves jazz" vs "hates jazz"); without it the terms alone conflict ("vegetarian" vs
    "eats steak")."""

    left: frozenset[str]
    right: frozenset[str]
    needs_topic: bool


def _pair(left: str, right: str, needs_topic: bool) -> AntonymPair:
    return AntonymPair(frozenset(left.split("|")), frozenset(right.split("|")), needs_topic)


ANTONYMS: tuple[AntonymPair, ...] = (
    _pair(
        "vegetarian|vegan",
        "steak|steaks|meat|beef|pork|bacon|ham|lamb|burger|burgers|chicken|sausage|sausages",
        False,
    ),
    _pair("vegan", "cheese|milk|eggs|butter|dairy", False),
    _pair("teetotal|teetotaler|sober|alcohol-free", "beer|wine|whisky|vodka|cocktails|alcohol", False),
    _pair("morning person|early bird|early riser", "night owl|night person|evening person", False),
    _pair("introvert|introverted", "extrovert|extroverted|extravert", False),
    _pair("cat person", "dog person", False),
    _pair(
        "love|loves|loved|like|likes|liked|enjoy|enjoys|adore|adores|prefer|prefers|fan of",
        "hate|hates|hated|dislike|dislikes|disliked|detest|detests|can't stand|avoid|avoids",
        True,
    ),
    _pair("early", "late", True),
    _pair("remote|remotely|from home", "office|on-site|onsite", True),
    _pair("single", "married", True),
    _pair("allowed|permitted", "forbidden|banned|prohibited", True),
)
_LEXICON_WORDS = frozenset(w for p in ANTONYMS for side in (p.left, p.right) for t in side for w in t.split())


_LEXICON_TERMS = frozenset(t for p in ANTONYMS for side in (p.left, p.right) for t in side)
TOPIC_BOUND_TERMS = frozenset(t for p in ANTONYMS if p.needs_topic for side in (p.left, p.right) for t in side)


@lru_cache(maxsize=256)
def _phrase_re(phrase: str) -> re.Pattern[str]:
    return re.compile(r"(?<![a-z0-9'])" + re.escape(phrase) + r"(?![a-z0-9'])")


def _contains(norm: str, phrase: str) -> bool:
    """Whole-word/phrase match; the cheap substring test runs first."""
    return phrase in norm and _phrase_re(phrase).search(norm) is not None


def _stem(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


@dataclass(frozen=True)
class Polarity:
    """What the heuristics need from one text."""

    norm: str
    negated: bool
    topics: frozenset[str]
    terms: frozenset[str]  # antonym-lexicon terms present


@lru_cache(maxsize=65_536)
def polarity(text: str) -> Polarity:
    """Normalised text, negation flag, topic words (content words, stemmed, minus lexicon
    and negation words) and the lexicon terms it contains."""
    norm = normalise(text)
    tokens = set(norm.split())
    negated = any(t in NEGATION_WORDS or t.endswith("n't") for t in tokens) or any(
        _contains(norm, p) for p in NEGATION_PHRASES
    )
    topics = frozenset(_stem(w) for w in content_words(text) if w not in _LEXICON_WORDS and w not in NEGATION_WORDS)
    terms = frozenset(t for t in _LEXICON_TERMS if (t in tokens if " " not in t else _contains(norm, t)))
    return Polarity(norm, negated, topics, terms)


def antonym_hit(a: Polarity, b: Polarity) -> AntonymPair | None:
    """The first lexicon pair with one side in ``a`` and the other in ``b``, honouring ``needs_topic``."""
    if not a.terms or not b.terms:
        return None
    shared = bool(a.topics & b.topics)
    for pair in ANTONYMS:
        if pair.needs_topic and not shared:
            continue
        for x, y in ((pair.left, pair.right), (pair.right, pair.left)):
            # a term on both sides ("likes" in both texts) is no opposition
            if a.terms & x and b.terms & y and not b.terms & x and not a.terms & y:
                return pair
    return None


def conflict_reason(a_text: str, b_text: str) -> str | None:
    """``"negation"`` / ``"antonym"`` when the two texts look contradictory, else None.

    negation: they share a topic word and exactly one is negated (and no antonym flips it back).
    antonym: neither is negated and a lexicon pair opposes them.
    """
    a, b = polarity(a_text), polarity(b_text)
    hit = antonym_hit(a, b)
    if a.negated != b.negated:
        # the shared topic may be a self-contained lexicon term itself ("vegetarian" / "not vegetarian")
        shared = a.topics & b.topics or (a.terms & b.terms) - TOPIC_BOUND_TERMS
        return "negation" if shared and hit is None else None
    if not a.negated and hit is not None:
        return "antonym"
    return None
