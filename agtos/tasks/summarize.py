"""Summarise a list of turns: extractive by default, through an LLM when one is configured."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Protocol

from agtos.providers.llm import LLMError, LLMProvider
from agtos.schemas import Turn
from agtos.tasks.text import content_words, sentences

log = logging.getLogger(__name__)

MAX_SUMMARY_CHARS = 600


class Summariser(Protocol):
    name: str

    def summarise(self, turns: list[Turn]) -> str: ...


def _label(turn: Turn) -> str:
    return "Summary" if turn.is_summary else str(turn.role).capitalize()


def extractive_summary(turns: list[Turn], max_sentences: int = 4) -> str:
    """The highest-scoring sentences (term frequency over the whole conversation), in order.

    The first user request is always kept, since it is usually what the session was about.
    """
    candidates: list[tuple[int, str, str]] = []  # (position, label, sentence)
    for turn in turns:
        for sentence in sentences(turn.content):
            candidates.append((len(candidates), _label(turn), sentence))
    if not candidates:
        return ""
    freq = Counter(w for _, _, s in candidates for w in content_words(s))

    def score(sentence: str) -> float:
        terms = content_words(sentence)
        return sum(freq[t] for t in terms) / (len(terms) ** 0.5) if terms else 0.0

    first_user = next((c for c in candidates if c[1] == "User"), candidates[0])
    ranked = sorted(candidates, key=lambda c: score(c[2]), reverse=True)
    chosen = {first_user[0]}
    for cand in ranked:
        if len(chosen) >= max_sentences:
            break
        chosen.add(cand[0])
    parts = [f"{label}: {sentence}" for pos, label, sentence in candidates if pos in chosen]
    text = " ".join(parts)
    return text if len(text) <= MAX_SUMMARY_CHARS else text[: MAX_SUMMARY_CHARS - 1].rstrip() + "…"


class ExtractiveSummariser:
    """Deterministic, offline summariser."""

    name = "extractive"

    def summarise(self, turns: list[Turn]) -> str:
        return extractive_summary(turns)


class LLMSummariser:
    """Asks the configured LLM; falls back to extractive on any provider failure."""

    def __init__(self, llm: LLMProvider) -> None:
        self.llm = llm
        self.name = f"llm:{llm.name}"

    def summarise(self, turns: list[Turn]) -> str:
        transcript = "\n".join(f"{_label(t)}: {t.content}" for t in turns)
        messages = [
            {
                "role": "system",
                "content": "Summarise this conversation in at most 3 sentences, third person "
                "('User ...'). Keep names, numbers, preferences and decisions.",
            },
            {"role": "user", "content": transcript},
        ]
        try:
            text = self.llm.chat(messages).strip()
        except LLMError:
            log.warning("LLM summary failed, using extractive summary", exc_info=True)
            return extractive_summary(turns)
        return text or extractive_summary(turns)


def build_summariser(llm: LLMProvider | None) -> Summariser:
    return LLMSummariser(llm) if llm is not None else ExtractiveSummariser()
