"""LLM query expansion: a few alternative phrasings that widen recall (off by default)."""

from __future__ import annotations

import logging

from agtos.providers.llm import LLMError, LLMProvider, parse_json_reply
from agtos.tasks.prompts import expansion_prompt

log = logging.getLogger(__name__)

MAX_EXPANSIONS = 3
MAX_EXPANSION_CHARS = 300


def expand_query(llm: LLMProvider, query: str, n: int = MAX_EXPANSIONS) -> list[str]:
    """Up to ``n`` distinct rephrasings; any provider or format failure yields none."""
    messages = [
        {"role": "system", "content": expansion_prompt(n)},
        {"role": "user", "content": query},
    ]
    try:
        reply = parse_json_reply(llm.chat(messages, json_mode=True))
    except LLMError:
        log.warning("query expansion failed; searching the original query only", exc_info=True)
        return []
    items = reply.get("queries") if isinstance(reply, dict) else None
    if not isinstance(items, list):
        return []
    seen = {query.strip().lower()}
    out: list[str] = []
    for item in items:
        if isinstance(item, str) and item.strip() and len(item) <= MAX_EXPANSION_CHARS:
            key = item.strip().lower()
            if key not in seen:
                seen.add(key)
                out.append(item.strip())
    return out[:n]
