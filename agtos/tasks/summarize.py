"""Summarise a list of turns: extractive by default, through an LLM when one is configured.

The extractive digest attributes every sentence to its speaker ("Gina: I lost my job at Door
Dash.") and picks content, not chit-chat: greetings, thanks, bare names and small talk are never
candidates; the rest are ranked by centrality (mean similarity to the session's other sentences:
cosine over sentence embeddings when an embedding function is given, TF-IDF cosine otherwise)
times how much they say, then chosen by maximal marginal relevance so the digest does not repeat
itself. Each person of the conversation gets their best sentence in; an unnamed agent's
sentences weigh less than a person's.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from agtos.providers.llm import LLMError, LLMProvider
from agtos.schemas import Role, Turn
from agtos.tasks.extract import informative_words
from agtos.tasks.prompts import SUMMARY_PROMPT
from agtos.tasks.speakers import Utterance, human_names, utterances
from agtos.tasks.text import content_words, sentences, words

log = logging.getLogger(__name__)

MAX_SUMMARY_CHARS = 600
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|i’m|i’ve|im|my|we|our)\b", re.I)
MAX_SENTENCE_CHARS = 240
MAX_CANDIDATES = 400
MMR_LAMBDA = 0.5
AGENT_WEIGHT = 0.6
QUESTION_WEIGHT = 0.6
STATEMENT_WEIGHT = 1.5
CENTRALITY_FLOOR = 0.5
EMBED_MIX = 0.5
DUPLICATE_SIMILARITY = 0.85  # a sentence this close to a chosen one is a repeat

#: Texts in, ``(n, dim)`` unit-norm rows out (the ingestion pipeline's embedder).
EmbedFn = Callable[[list[str]], np.ndarray]


class Summariser(Protocol):
    name: str

    def summarise(self, turns: list[Turn]) -> str: ...


@dataclass(frozen=True, slots=True)
class _Candidate:
    position: int
    label: str
    text: str
    weight: float
    forced: bool  # the first request of an agent chat


def _clip(sentence: str, limit: int = MAX_SENTENCE_CHARS) -> str:
    if len(sentence) <= limit:
        return sentence
    return sentence[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def _candidates(said: list[Utterance]) -> list[_Candidate]:
    names = frozenset(w for n in human_names(said) for w in words(n))
    agent_chat = not any(u.human and u.turn.role == Role.assistant.value for u in said)
    out: list[_Candidate] = []
    first_request = agent_chat
    for u in said:
        for sentence in sentences(u.text):
            personal = _FIRST_PERSON.search(sentence) is not None
            if len(informative_words(sentence, names)) < (1 if personal and u.human else 2):
                continue  # greetings, thanks, bare names, small talk ("I'm vegetarian" stays)
            weight = 1.0 if u.human or u.turn.is_summary else AGENT_WEIGHT
            weight *= QUESTION_WEIGHT if sentence.endswith("?") else 1.0
            weight *= STATEMENT_WEIGHT if personal else 1.0
            forced = first_request and u.human
            first_request &= not forced
            out.append(_Candidate(len(out), u.label, _clip(sentence), weight, forced))
    return out


def _lexical_vectors(texts: list[str]) -> np.ndarray:
    """Unit TF-IDF rows over the content words of ``texts``."""
    tokens = [content_words(t) for t in texts]
    vocab = {w: i for i, w in enumerate(dict.fromkeys(w for ts in tokens for w in ts))}
    matrix = np.zeros((len(texts), max(1, len(vocab))), dtype=np.float32)
    for row, ts in enumerate(tokens):
        for w in ts:
            matrix[row, vocab[w]] += 1.0
    df = (matrix > 0).sum(axis=0)
    matrix *= np.log((1 + len(texts)) / (1 + df)) + 1.0
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


def _similarities(texts: list[str], embed: EmbedFn | None) -> np.ndarray:
    """Pairwise sentence similarity: TF-IDF cosine, mixed with embedding cosine when given."""
    lexical = _lexical_vectors(texts)
    sims = lexical @ lexical.T
    if embed is None:
        return sims
    try:
        vectors = np.asarray(embed(texts), dtype=np.float32)
    except (RuntimeError, ValueError):
        log.warning("sentence embedding failed, ranking summary sentences lexically", exc_info=True)
        return sims
    if vectors.ndim != 2 or vectors.shape[0] != len(texts):
        return sims
    return EMBED_MIX * (vectors @ vectors.T) + (1 - EMBED_MIX) * sims


def _select(cands: list[_Candidate], sims: np.ndarray, max_chars: int) -> list[_Candidate]:
    """Forced and per-speaker best first, then MMR over centrality x informativeness."""
    n = len(cands)
    centrality = (sims.sum(axis=1) - np.diag(sims)) / max(1, n - 1)
    centrality = centrality / centrality.max() if centrality.max() > 0 else np.zeros(n)
    richness = np.array([math.log1p(len(informative_words(c.text))) for c in cands])
    scores = np.array([c.weight for c in cands]) * richness * (CENTRALITY_FLOOR + centrality)
    scores = scores / scores.max() if scores.max() > 0 else scores
    chosen: list[int] = []
    used = 0

    def take(i: int) -> None:
        nonlocal used
        cost = len(cands[i].text) + len(cands[i].label) + 3
        if i not in chosen and used + cost <= max_chars:
            chosen.append(i)
            used += cost

    for i, c in enumerate(cands):
        if c.forced:
            take(i)
    best_of: dict[str, int] = {}
    for i in np.argsort(-scores):
        best_of.setdefault(cands[int(i)].label, int(i))
    if len(best_of) > 1:
        for i in sorted(best_of.values(), key=lambda i: -scores[i]):
            take(i)
    remaining = set(range(n)) - set(chosen)
    while remaining:
        redundancy = sims[:, chosen].max(axis=1) if chosen else np.zeros(n)
        mmr = MMR_LAMBDA * scores - (1 - MMR_LAMBDA) * redundancy
        i = max(remaining, key=lambda j: mmr[j])
        remaining.discard(i)
        if redundancy[i] < DUPLICATE_SIMILARITY:
            take(i)
    return [cands[i] for i in sorted(chosen)]


def extractive_summary(turns: list[Turn], embed: EmbedFn | None = None, max_chars: int = MAX_SUMMARY_CHARS) -> str:
    """The session's most central, informative sentences, each attributed to its speaker, in order."""
    cands = _candidates(utterances(turns))
    if not cands:
        return ""
    cands = sorted(cands, key=lambda c: (not c.forced, -c.weight * len(c.text)))[:MAX_CANDIDATES]
    cands.sort(key=lambda c: c.position)
    picked = _select(cands, _similarities([c.text for c in cands], embed), max_chars)
    parts: list[str] = []
    label = None
    for c in picked:
        parts.append(c.text if c.label == label else f"{c.label}: {c.text}")
        label = c.label
    return " ".join(parts)


class ExtractiveSummariser:
    """Deterministic, offline summariser; ``embed`` (optional) ranks sentences by their vectors."""

    name = "extractive"

    def __init__(self, embed: EmbedFn | None = None, max_chars: int = MAX_SUMMARY_CHARS) -> None:
        self.embed = embed
        self.max_chars = max_chars

    def summarise(self, turns: list[Turn]) -> str:
        return extractive_summary(turns, self.embed, self.max_chars)


class LLMSummariser:
    """Asks the configured LLM; falls back to extractive on any provider failure."""

    def __init__(self, llm: LLMProvider, embed: EmbedFn | None = None) -> None:
        self.llm = llm
        self.embed = embed
        self.name = f"llm:{llm.name}"

    def summarise(self, turns: list[Turn]) -> str:
        transcript = "\n".join(f"{u.label}: {u.text}" for u in utterances(turns))
        messages = [
            {"role": "system", "content": SUMMARY_PROMPT},
            {"role": "user", "content": transcript},
        ]
        try:
            text = self.llm.chat(messages).strip()
        except LLMError:
            log.warning("LLM summary failed, using extractive summary", exc_info=True)
            return extractive_summary(turns, self.embed)
        return text or extractive_summary(turns, self.embed)


def build_summariser(llm: LLMProvider | None, embed: EmbedFn | None = None) -> Summariser:
    return LLMSummariser(llm, embed) if llm is not None else ExtractiveSummariser(embed)
