"""The ``/api/memory/context`` section: the token budget spent on the question.

The working memory's summaries, then the evidence :func:`agtos.memory.recall.recall` ranks best for
the query: matched turns with a neighbour, memories, conclusions, episode summaries, and the
profile lines that share a word with it; deduplicated, each line dated and attributed, fitted to
the budget by :func:`agtos.tasks.context.assemble`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from agtos.memory.recall import Found, people_and_profile, profile_items, recall
from agtos.memory.working import WorkingMemory
from agtos.schemas import Episode
from agtos.storage.redis_conn import StorageUnavailable
from agtos.tasks import line_ranker
from agtos.tasks.context import NEIGHBOUR_TOKENS, TURN_TOKENS, ContextItem, assemble, turn_items

if TYPE_CHECKING:
    from agtos.memory.services import Services

CONTEXT_TURN_TOKENS = 25  # a context searches budget / this many turns (enough candidates to fill it)
#: when the question names people who speak, the turns the others said count 1 / this (realtalk-dev, api_eval)
SPEAKER_BONUS = 1.5
_CHUNK = re.compile(r"\.t\d+\.c(\d+)$")


def _sessions(
    rt: Services, user_id: str, episode_ids: list[str], known: dict[str, Episode] | None = None
) -> dict[str, Episode]:
    """The episodes of these ids that exist; those in ``known`` (found by the same search) are not read again."""
    known = known or {}
    wanted = [e for e in dict.fromkeys(episode_ids) if e not in known]
    raws = rt.semantic.records("episode", user_id, wanted) if wanted else {}
    return {e: known[e] for e in episode_ids if e in known} | {
        e: Episode.model_validate_json(raw) for e, raw in raws.items()
    }


def _chunk(doc_id: str) -> int:
    """The window number of a turn unit's doc id (``….t3.c2`` → 2; 0 for a whole turn)."""
    found = _CHUNK.search(doc_id)
    return int(found[1]) if found else 0


def turn_relevance(found: Found, query: str, asked: set[str]) -> list[float]:
    """The found turns' relevance in the context: the learned :mod:`~agtos.tasks.line_ranker` when it
    has weights, else the search's score, the turns of people the question does not name / SPEAKER_BONUS."""
    if line_ranker.enabled():
        ranks = {h.episode.id: r for r, h in enumerate(found.episodes)}
        rows = line_ranker.features([m.turn for m in found.turns], [m.score for m in found.turns], query, asked, ranks)
        return line_ranker.rerank(rows)
    return [
        m.score if not asked or (m.turn.name or "").lower() in asked else m.score / SPEAKER_BONUS for m in found.turns
    ]


def evidence_items(
    rt: Services, user_id: str, query: str, budget_tokens: int, limit: int, who: Found | None = None
) -> tuple[list[ContextItem], str | None]:
    """The evidence :func:`recall` finds for ``query``: turns with a neighbour, memories, conclusions,
    episode summaries. When the query names people who speak: their own turns first (the others'
    matched turns cut to ``NEIGHBOUR_TOKENS``), and only the memories and conclusions that name one
    of them. ``who``: :func:`people` already read. With them, why the search was degraded (``None``
    when it ran as asked)."""
    items: list[ContextItem] = []
    turns = min(200, max(limit, budget_tokens // CONTEXT_TURN_TOKENS))
    found = recall(rt, user_id, query, limit, None, turns, memories=limit, conclusions=limit, neighbours=1, who=who)
    derived = [
        (
            m.id,
            m.text,
            m.valid_from,
            m.source_episode_ids,
            s,
            "semantic",
            m.valid_until,
            m.utc_offset,
            m.until_utc_offset,
        )
        for m, s in found.memories
    ]
    derived += [
        (c.id, c.text, c.updated_at, c.source_episode_ids, s, "conclusion", None, None, None)
        for c, s in found.conclusions
    ]
    found_episodes = {h.episode.id: h.episode for h in found.episodes}
    sources = _sessions(rt, user_id, [d[3][0] for d in derived if d[3]], found_episodes)
    asked = found.asked(query)
    for m, relevance in zip(found.turns, turn_relevance(found, query, asked), strict=True):
        # the question names who speaks: another's matched turn is their context, cut as a neighbour is
        other = bool(asked) and (m.turn.name or "").lower() not in asked
        cut = NEIGHBOUR_TOKENS if other else TURN_TOKENS
        items += turn_items(m.window, m.turn, relevance, query, _chunk(m.doc_ids[0]), cut)
    for record_id, text, when, source_ids, score, tier, until, offset, until_offset in derived:
        if asked and not found.asked(text) & asked:
            continue  # the question names whom it asks about; this line is about someone else or no one
        source = sources.get(source_ids[0]) if source_ids else None
        if tier == "conclusion" and source is not None:
            # when it was said, not when the Dreamer read it (a 2021 chat's is not today's), on its local day
            when, offset = source.timestamp, source.utc_offset
        items.append(
            ContextItem(
                tier,
                record_id,
                text,
                score,
                when,
                source.id if source else None,
                source.session_id if source else None,
                until=until,
                utc_offset=offset,
                until_offset=until_offset,
            )
        )
    for hit in found.episodes[:limit]:
        ep = hit.episode
        items.append(
            ContextItem(
                "episodic", ep.id, ep.summary, hit.score, ep.timestamp, ep.id, ep.session_id, utc_offset=ep.utc_offset
            )
        )
    return items, found.degraded


def build_context(
    rt: Services, user_id: str, query: str, wm: WorkingMemory | None, budget_tokens: int, limit: int
) -> dict[str, Any]:
    """The budget spent on the question: the working memory's summaries, then the evidence best
    ranked for ``query`` (turns with a neighbour, memories, conclusions, episode summaries, the
    profile lines that share a word with it), deduplicated, each line dated and attributed."""
    items: list[ContextItem] = []
    if wm is not None:
        items += [
            ContextItem("working", f"summary-{i}", t.content, 0.9, t.timestamp)
            for i, t in enumerate(wm.messages)
            if t.is_summary
        ]
    available = True
    degraded = None
    try:
        who, profile = people_and_profile(rt, user_id)  # one round trip, for both
        items += profile_items(rt, user_id, query, who=who, profile=profile)
        evidence, degraded = evidence_items(rt, user_id, query, budget_tokens, limit, who)
        items += evidence
    except StorageUnavailable:
        available = False
    chosen, text, used = assemble(items, budget_tokens)
    return {
        "context": text,
        "tokens": used,
        "items": [
            {
                "tier": i.tier,
                "id": i.id,
                "text": i.text,
                "relevance": round(i.relevance, 4),
                "timestamp": i.timestamp,
                "episodeId": i.episode_id,
                "sessionId": i.session_id,
            }
            for i in chosen
        ],
        "available": available,
        "degraded": degraded,
    }
