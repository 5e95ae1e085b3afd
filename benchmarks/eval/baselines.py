"""Plain RAG over the raw turns, the baselines the memory service is compared with.

Each turn becomes one line prefixed with its date and speaker, ``(8 May 2023) Gina: …``, and is
ranked for a question by BM25 (``bm25s``, its default Lucene variant, English stop words, no
stemming) or by cosine similarity with the service's own embedder. A baseline's context is its
top lines in rank order, each kept while it still fits the token budget (counted with the
service's tokenizer, one token for the line break).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import bm25s
import numpy as np

from agtos.providers.embeddings import Embedder
from agtos.tasks.tokens import count_tokens


@dataclass(frozen=True)
class RawTurn:
    """One turn of the log, where it sits (dataset session id, ``D<session>:<position>``) and when."""

    session_id: str
    dia_id: str
    speaker: str
    timestamp_ms: int
    text: str

    @property
    def line(self) -> str:
        day = datetime.fromtimestamp(self.timestamp_ms / 1000, tz=UTC)
        return f"({day.day} {day:%B %Y}) {self.speaker}: {self.text}"


def sessions_in_order(turn_sessions: Sequence[str]) -> list[str]:
    """Session ids by the rank of their first turn (each once)."""
    return list(dict.fromkeys(turn_sessions))


def fill_budget(lines: Sequence[str], budget_tokens: int) -> str:
    """Lines in the given order, each kept while it still fits ``budget_tokens``."""
    chosen, used = [], 0
    for line in lines:
        cost = count_tokens(line) + 1
        if used + cost <= budget_tokens:
            chosen.append(line)
            used += cost
    return "\n".join(chosen)


class RawTurnRetriever:
    """BM25 and dense rankings over one conversation's raw turns."""

    def __init__(self, turns: Sequence[RawTurn], embedder: Embedder | None) -> None:
        self.turns = list(turns)
        self.lines = [t.line for t in self.turns]
        self._bm25 = bm25s.BM25()
        if self.lines:
            self._bm25.index(bm25s.tokenize(self.lines, stopwords="en", show_progress=False), show_progress=False)
        self._embedder = embedder
        self._vectors = embedder.embed(self.lines) if embedder is not None and self.lines else None

    @property
    def has_dense(self) -> bool:
        return self._vectors is not None

    def bm25(self, query: str) -> list[int]:
        """Turn indexes, best first (every turn with a score above zero)."""
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)
        if not self.lines or not tokens[0]:
            return []
        docs, scores = self._bm25.retrieve(tokens, k=len(self.lines), show_progress=False)
        return [int(d) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]

    def dense(self, query: str) -> list[int]:
        """Turn indexes by cosine similarity to the query, best first (all of them)."""
        if self._embedder is None or self._vectors is None:
            return []
        sims = self._vectors @ np.asarray(self._embedder.embed_one(query), dtype=np.float32)
        return [int(i) for i in np.argsort(-sims, kind="stable")]
