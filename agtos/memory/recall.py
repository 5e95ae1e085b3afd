"""Recall: episode and memory search, context assembly and the Dialectic ``ask``, over the services.

Scores come from :mod:`agtos.tasks.ranking` (0-1 scaling, recency re-rank); the facade validates
ids and privacy before calling these.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agtos.memory.working import WorkingMemory
from agtos.providers.llm import LLMError
from agtos.schemas import Episode, Memory
from agtos.schemas.records import now_ms
from agtos.storage.redis_conn import StorageUnavailable
from agtos.tasks.context import ContextItem, assemble
from agtos.tasks.dialectic import Evidence, extractive_answer, llm_answer
from agtos.tasks.ranking import display_score, rerank_by_recency
from agtos.tasks.text import content_words

if TYPE_CHECKING:
    from agtos.memory.services import Services

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SearchHit:
    episode: Episode
    score: float
    match_type: str

    @property
    def timestamp(self) -> int:
        return self.episode.timestamp


def search_episodes(
    rt: Services, user_id: str, query: str, limit: int = 10, mode: str | None = None
) -> list[SearchHit]:
    """Episodes by hybrid (default), vector or BM25 search, best first.

    A wider candidate pool is re-ranked by relevance × recency (see ``rerank_by_recency``),
    so when a later session restates or updates a fact it outranks the superseded one
    without burying strong older matches.
    """
    found = rt.semantic.search("episode", user_id, query, min(100, limit * 2), mode)
    hits = [
        SearchHit(
            Episode.model_validate_json(r.payload),
            display_score(r.score, found.mode, found.max_score),
            r.match_type,
        )
        for r in found.results
        if r.payload is not None
    ]
    return rerank_by_recency(hits)[:limit]


def search_memories(rt: Services, user_id: str, query: str, limit: int = 10, mode: str | None = None) -> list[Memory]:
    """Semantic memories (facts, preferences) relevant to ``query``, best first."""
    found = rt.semantic.search("memory", user_id, query, limit, mode)
    return [Memory.model_validate_json(r.payload) for r in found.results if r.payload is not None]


def profile_items(rt: Services, user_id: str, query: str) -> list[ContextItem]:
    """The profile's lines, more relevant (0.9 against 0.5) when they share a content word with ``query``."""
    profile = rt.profiles.get(user_id)
    query_terms = set(content_words(query))
    lines = [f"User's name is {profile.name}"] if profile.name else []
    if profile.communication_style:
        lines.append(f"Communication style: {profile.communication_style}")
    lines += profile.preferences + profile.patterns + profile.facts
    return [
        ContextItem(
            "profile",
            f"profile-{i}",
            line,
            0.9 if query_terms & set(content_words(line)) else 0.5,
            profile.updated_at,
        )
        for i, line in enumerate(lines)
    ]


def build_context(
    rt: Services, user_id: str, query: str, wm: WorkingMemory | None, budget_tokens: int, limit: int
) -> dict[str, Any]:
    """Working + episodic + semantic recall → dedup → rank → budget → a system-prompt section."""
    items: list[ContextItem] = []
    if wm is not None:
        items += [
            ContextItem("working", f"summary-{i}", t.content, 0.9, t.timestamp)
            for i, t in enumerate(wm.messages)
            if t.is_summary
        ]
    available = True
    try:
        items += profile_items(rt, user_id, query)
        memories = rt.semantic.search("memory", user_id, query, limit)
        for hit in memories.results:
            if hit.payload is not None:
                memory = Memory.model_validate_json(hit.payload)
                relevance = (
                    hit.similarity
                    if hit.similarity is not None
                    else display_score(hit.score, memories.mode, memories.max_score)
                )
                items.append(ContextItem("semantic", memory.id, memory.text, relevance, memory.created_at))
        for ep_hit in search_episodes(rt, user_id, query, limit):
            ep = ep_hit.episode
            items.append(ContextItem("episodic", ep.id, ep.summary, ep_hit.score, ep.timestamp))
    except StorageUnavailable:
        available = False
    chosen, text, used = assemble(items, budget_tokens, now_ms())
    return {
        "context": text,
        "tokens": used,
        "items": [{"tier": i.tier, "id": i.id, "text": i.text, "relevance": round(i.relevance, 4)} for i in chosen],
        "available": available,
    }


def ask(rt: Services, user_id: str, question: str, limit: int = 5) -> dict[str, Any]:
    """Dialectic: answer a question about the user from profile, conclusions, memories, episodes."""
    evidence = [Evidence(i.id, "profile", i.text, i.relevance) for i in profile_items(rt, user_id, question)]
    for namespace, kind in (("conclusion", "conclusion"), ("memory", "memory")):
        found = rt.semantic.search(namespace, user_id, question, limit)
        for hit in found.results:
            if hit.payload is not None:
                text = json.loads(hit.payload)["text"]
                evidence.append(Evidence(hit.id, kind, text, display_score(hit.score, found.mode, found.max_score)))
    evidence += [
        Evidence(h.episode.id, "episode", h.episode.summary, h.score)
        for h in search_episodes(rt, user_id, question, limit)
    ]
    source = "extractive"
    answer = extractive_answer(question, evidence)
    if rt.dialectic_llm is not None:
        try:
            answer, source = llm_answer(rt.dialectic_llm, question, evidence), f"llm:{rt.dialectic_llm.name}"
        except LLMError:
            log.warning("dialectic LLM failed; answering extractively", exc_info=True)
    return {
        "question": question,
        "answer": answer,
        "source": source,
        "evidence": evidence,
        "evidenceIds": list(dict.fromkeys(e.id for e in evidence)),
    }
