"""Importance scoring and the episodic save heuristics."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from agtos.schemas import EpisodeType, Turn
from agtos.tasks.extract import Extraction, informative_words, is_chit_chat, is_trivial
from agtos.tasks.speakers import Utterance, human_names, utterances
from agtos.tasks.text import STOPWORDS, words

#: a one-turn session is judged (a trivial lookup, skipped) only in English: the save rules' patterns are
#: English, so "Ich wohne in Berlin und bin Vegetarier" found no fact and was dropped as a lookup
ENGLISH_STOPWORD_SHARE = 0.15  # English sentences of 4+ words have more ("What time is it in Tokyo?": 4 of 6)
KEPT_UNJUDGED = "another language: kept unjudged"
#: a one-question session whose answer tells something is kept (issue 14: keep the words): users ask back
#: what they were told; a lookup answered "OK." or "I don't know" is still skipped (:func:`trivial_lookup`)
KEPT_ANSWER = "question answered"
_DIGIT = re.compile(r"\d")


@dataclass(frozen=True)
class SaveDecision:
    save: bool
    type: EpisodeType
    importance: float
    reason: str


def _people_said(turns: list[Turn]) -> tuple[list[Utterance], frozenset[str]]:
    """What the people of the conversation said (the user; both sides of a named chat), and their
    names' words."""
    said = utterances(turns)
    return [u for u in said if u.human], frozenset(w for n in human_names(said) for w in words(n))


def _letters(text: str) -> tuple[int, int]:
    """How many letters ``text`` has, and how many of them are Latin."""
    letters = [c for c in text if c.isalpha()]
    return len(letters), sum(1 for c in letters if c.isascii() or unicodedata.name(c, "").startswith("LATIN"))


def other_script(text: str) -> bool:
    """Mostly letters of a script other than Latin, 6 or more (Japanese and Chinese are written without
    spaces: "私は猫が好き" is one of :func:`words`, so word counts say nothing of it)."""
    letters, latin = _letters(text)
    return letters >= 6 and latin < letters / 2


def judged_in_english(text: str) -> bool:
    """Whether the English save rules can judge ``text``: mostly Latin letters with English function words
    (or too short to tell: under 4 words, under 6 letters of another script)."""
    letters, latin = _letters(text)
    if letters and latin < letters / 2:
        return letters < 6
    said = words(text)
    return len(said) < 4 or sum(w in STOPWORDS for w in said) >= ENGLISH_STOPWORD_SHARE * len(said)


def says_something(answer: str, question: str, names: frozenset[str] = frozenset()) -> bool:
    """Whether an answer tells what its question did not: a number ("About 237 ml.", "In 1889.") or an
    informative word of its own ("Canberra.", a list of hotels) — not "OK.", "Sure!" or "I don't know, sorry"."""
    return bool(_DIGIT.search(answer)) or bool(informative_words(answer, names | frozenset(words(question))))


def trivial_lookup(turns: list[Turn], asked: Utterance, names: frozenset[str]) -> bool:
    """A session of one utterance with nothing in it to recall: every answer to it says nothing of its own
    (:func:`says_something`), or, unanswered, it is a question. Users come back to what they were told
    ("what did you tell me the normal potassium range is?"), and a statement is their own words."""
    answers = [t.content for t in turns if t.role == "assistant"]
    if not answers:
        return asked.text.rstrip().endswith("?")
    return not any(says_something(a, asked.text, names) for a in answers)


def score_importance(turns: list[Turn], found: Extraction) -> float:
    """0-1: corrections and preferences weigh most, then outcomes, facts and length."""
    people, names = _people_said(turns)
    score = 0.3
    score += 0.35 if found.corrections else 0.0
    score += 0.3 if found.preferences else 0.0
    score += 0.2 if found.task_outcomes else 0.0
    score += min(0.2, 0.05 * len(found.facts))
    substantive = [u for u in people if not is_chit_chat(u.text, names)]
    score += min(0.15, 0.03 * max(0, len(substantive) - 1))
    return round(min(1.0, score), 3)


def decide_save(turns: list[Turn], found: Extraction, scored: bool = True) -> SaveDecision:
    """Corrections and preferences always saved; task completions saved; facts from any speaker
    saved; greetings, thanks and small talk skipped. ``scored`` False: the verdict only (save,
    type, reason), importance 0 plus its floors — for a decision whose importance is not kept."""
    importance = score_importance(turns, found) if scored else 0.0
    people, names = _people_said(turns)
    if found.corrections:
        return SaveDecision(True, EpisodeType.correction, max(importance, 0.8), "user correction")
    if found.preferences:
        return SaveDecision(True, EpisodeType.preference, max(importance, 0.7), "stated preference")
    if found.task_outcomes:
        return SaveDecision(True, EpisodeType.task_outcome, max(importance, 0.6), "task outcome")
    if not people:
        return SaveDecision(False, EpisodeType.conversation, importance, "no user turns")
    if found.facts:
        return SaveDecision(True, EpisodeType.conversation, importance, "facts stated")
    if len(people) == 1 and other_script(people[0].text):  # before small talk, which counts words
        return SaveDecision(True, EpisodeType.conversation, importance, KEPT_UNJUDGED)
    if all(is_trivial(u.text) or is_chit_chat(u.text, names) for u in people):
        return SaveDecision(False, EpisodeType.conversation, importance, "greeting or small talk only")
    if len(people) == 1 and not judged_in_english(people[0].text):
        return SaveDecision(True, EpisodeType.conversation, importance, KEPT_UNJUDGED)
    if len(people) == 1 and trivial_lookup(turns, people[0], names):
        return SaveDecision(False, EpisodeType.conversation, importance, "single-turn trivial lookup")
    if len(people) == 1 and any(t.role == "assistant" for t in turns):
        return SaveDecision(True, EpisodeType.conversation, importance, KEPT_ANSWER)
    return SaveDecision(True, EpisodeType.conversation, importance, "conversation")
