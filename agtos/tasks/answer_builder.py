"""The Dialectic's answer step: one or two sentences from the best evidence, or an abstention.

Every evidence text is cut into sentences; a person's first-person sentence is said in the third
person ("User: I am allergic to peanuts" -> "User is allergic to peanuts"). Each sentence is scored
against the question: the cosine of their embeddings (when given) blended with the share of the
question's words it holds (word stems, so "allergies" meets "allergic"). Below
:data:`RELEVANCE_FLOOR` nothing answers and the answer says so (calibrated on
``benchmarks/eval/ask_set.json``, see ``benchmarks/eval/ask_eval.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from agtos.tasks.dialectic import Evidence
from agtos.tasks.extract import statement_of, third_person
from agtos.tasks.text import content_words, normalise, sentences

RELEVANCE_FLOOR = 0.38  # calibrated on benchmarks/eval/ask_set.json (README: "Dialectic /ask")
SECOND_WITHIN = 0.9  # a second sentence is said when it scores at least this share of the best one
COSINE_WEIGHT = 0.7  # the rest is the word overlap
KIND_WEIGHT = {"conclusion": 1.0, "memory": 1.0, "profile": 1.0, "turn": 1.0, "episode": 0.9}
AGENT_WEIGHT = 0.8  # what the assistant said is rarely what a question about the user asks for
NOT_KNOWN = "I don't know: nothing I remember about the user answers that."
_SPEAKER = re.compile(r"^(?P<who>[A-Z][\w .'-]{0,40}): (?P<said>.+)$", re.S)
_QUESTION_WORDS = frozenset(
    "user user's users what which who whom whose when where why how does do did is are was were has have the".split()
)
MAX_SENTENCE_WORDS = 40


@dataclass(frozen=True)
class Candidate:
    """One sentence of one piece of evidence, as it would be said in the answer."""

    evidence: Evidence
    text: str
    by_agent: bool = False  # said by the assistant, not about the user


@dataclass(frozen=True)
class Answer:
    text: str
    answered: bool
    cited: list[str]  # the evidence ids the answer rests on
    relevance: float  # the best sentence's score, 0-1


_SUFFIXES = ("ingly", "ing", "ies", "ied", "ed", "es", "s", "ic", "y")


def stem(word: str) -> str:
    """A crude stem: one common suffix off, then the first five letters ("allergies", "allergic" -> "aller")."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:5]


def _stems(text: str) -> set[str]:
    return {stem(w) for w in content_words(text) if w not in _QUESTION_WORDS}


def _said(evidence: Evidence) -> list[tuple[str, bool]]:
    """The statements of one piece of evidence, what a person said ("Name: ...") in the third person,
    each with whether the assistant said it."""
    out = []
    who = None
    for sentence in sentences(evidence.text):
        if m := _SPEAKER.match(sentence):
            who, sentence = m["who"], m["said"]
        statement = statement_of(sentence)
        if statement is None or len(statement.split()) > MAX_SENTENCE_WORDS:
            continue
        if who is not None and who != "Assistant":
            statement = third_person(statement, None if who == "User" else who)
        out.append((statement.rstrip(".!;, ") + ".", who == "Assistant"))
    return out


def candidates(evidence: Sequence[Evidence]) -> list[Candidate]:
    """Every distinct sentence of the evidence (its first holder kept, best evidence first)."""
    seen: set[str] = set()
    out = []
    for item in sorted(evidence, key=lambda e: -e.score):
        for text, by_agent in _said(item):
            key = normalise(text)
            if key and key not in seen:
                seen.add(key)
                out.append(Candidate(item, text, by_agent))
    return out


def relevance(question: str, found: Sequence[Candidate], cosines: Sequence[float] | None) -> list[float]:
    """Each candidate's 0-1 relevance to the question."""
    asked = _stems(question)
    scores = []
    for i, candidate in enumerate(found):
        overlap = len(asked & _stems(candidate.text)) / len(asked) if asked else 0.0
        score = overlap if cosines is None else COSINE_WEIGHT * max(0.0, cosines[i]) + (1 - COSINE_WEIGHT) * overlap
        weight = KIND_WEIGHT.get(candidate.evidence.kind, 1.0) * (AGENT_WEIGHT if candidate.by_agent else 1.0)
        scores.append(score * weight)
    return scores


def cosine_scores(
    question: str, found: Sequence[Candidate], embed: Callable[[list[str]], np.ndarray | None]
) -> list[float] | None:
    """Cosines of the question and each candidate (None when the embedder is unavailable)."""
    if not found:
        return None
    vectors = embed([question, *(c.text for c in found)])
    if vectors is None:
        return None
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
    return [float(x) for x in unit[1:] @ unit[0]]


def build_answer(
    question: str,
    evidence: Sequence[Evidence],
    embed: Callable[[list[str]], np.ndarray | None] | None = None,
    floor: float = RELEVANCE_FLOOR,
) -> Answer:
    """The best sentence (and a second close one from other evidence), or :data:`NOT_KNOWN`."""
    found = candidates(evidence)
    scores = relevance(question, found, cosine_scores(question, found, embed) if embed else None)
    ranked = sorted(range(len(found)), key=lambda i: -scores[i])
    if not ranked or scores[ranked[0]] < floor:
        return Answer(NOT_KNOWN, False, [], round(scores[ranked[0]], 4) if ranked else 0.0)
    best = found[ranked[0]]
    chosen = [best]
    for i in ranked[1:]:
        if scores[i] < max(floor, SECOND_WITHIN * scores[ranked[0]]):
            break
        if found[i].evidence.id == best.evidence.id:
            continue
        if _stems(best.text) <= _stems(found[i].text):  # says all the best one says, and more
            chosen = [found[i]]
        elif not _repeats(found[i].text, best.text):
            chosen.append(found[i])
        break
    text = " ".join(c.text for c in chosen)
    return Answer(text, True, list(dict.fromkeys(c.evidence.id for c in chosen)), round(scores[ranked[0]], 4))


def _repeats(text: str, other: str) -> bool:
    """Most of the shorter one's words are in the other already."""
    mine, theirs = _stems(text), _stems(other)
    return not mine or not theirs or len(mine & theirs) / min(len(mine), len(theirs)) >= 0.6
