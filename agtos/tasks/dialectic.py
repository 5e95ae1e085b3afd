"""Dialectic: answer a question about the user from retrieved evidence (LLM or extractive)."""

from __future__ import annotations

from dataclasses import dataclass

from agtos.providers.llm import LLMError, LLMProvider
from agtos.tasks.prompts import ANSWER_PROMPT
from agtos.tasks.text import content_words, normalise


@dataclass(frozen=True)
class Evidence:
    id: str
    kind: str  # profile | conclusion | memory | episode
    text: str
    score: float


def extractive_answer(question: str, evidence: list[Evidence], max_items: int = 3) -> str:
    """The evidence sentences that share the most words with the question, best first; a sentence
    held by several tiers (a conclusion and the memory it came from) is said once."""
    if not evidence:
        return "I don't know anything about that yet."
    terms = set(content_words(question))
    ranked = sorted(evidence, key=lambda e: (len(terms & set(content_words(e.text))), e.score), reverse=True)
    sentences = list(dict.fromkeys(normalise(e.text) for e in ranked))
    by_form = {normalise(e.text): e.text.rstrip(".") + "." for e in reversed(ranked)}  # first-ranked wording wins
    return "From what I remember: " + " ".join(by_form[form] for form in sentences[:max_items])


def llm_answer(llm: LLMProvider, question: str, evidence: list[Evidence]) -> str:
    """Ask the LLM to answer from the evidence only (raises LLMError on failure)."""
    listing = "\n".join(f"[{e.id}] ({e.kind}) {e.text}" for e in evidence) or "(no evidence)"
    messages = [
        {"role": "system", "content": ANSWER_PROMPT},
        {"role": "user", "content": f"Evidence:\n{listing}\n\nQuestion: {question}"},
    ]
    answer = llm.chat(messages).strip()
    if not answer:
        raise LLMError("empty answer")
    return answer
