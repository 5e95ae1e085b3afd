"""Dialectic: the evidence record and the LLM answer (the extractive one: agtos.tasks.answer_builder)."""

from __future__ import annotations

from dataclasses import dataclass

from agtos.providers.llm import LLMError, LLMProvider
from agtos.tasks.prompts import ANSWER_PROMPT


@dataclass(frozen=True)
class Evidence:
    id: str
    kind: str  # profile | conclusion | memory | episode
    text: str
    score: float


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
