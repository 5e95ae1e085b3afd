"""Relation extraction: an LLM (validated) when one is configured, else the sentence patterns.

``LLMRelationExtractor`` asks a chat model for JSON, keeps only items naming known entities with an
allowed, type-compatible relation (:mod:`agtos.tasks.relation_types`) and a confidence in [0, 1],
and falls back to the patterns (:mod:`agtos.tasks.relation_patterns`) when the model fails or
answers something unusable.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Sequence
from typing import Any

from agtos.providers.llm import LLMError, LLMProvider, parse_json_reply
from agtos.tasks.mentions import Mention, normalise_entity_name
from agtos.tasks.prompts import relations_prompt
from agtos.tasks.relation_patterns import PatternRelationExtractor, is_pronoun
from agtos.tasks.relation_types import (
    RELATION_DESCRIPTIONS,
    RELATION_SIGNATURES,
    ExtractedRelation,
    RelationExtractor,
    dedupe_relations,
    sentence_spans,
)

log = logging.getLogger(__name__)


def _find_sentence(spans: Sequence[tuple[int, int]], text: str, source: str, target: str) -> str:
    """The first sentence naming both ends (by normalised name), else one naming the source."""
    sentences = [text[s:e].strip() for s, e in spans]
    keys = [f" {normalise_entity_name(s)} " for s in sentences]
    src, tgt = f" {normalise_entity_name(source)} ", f" {normalise_entity_name(target)} "
    for sentence, key in zip(sentences, keys, strict=True):
        if src in key and tgt in key:
            return sentence
    return next((s for s, k in zip(sentences, keys, strict=True) if src in k or tgt in k), "")


def parse_llm_relations(
    reply: str, text: str, mentions: Sequence[Mention], *, default_confidence: float = 0.5
) -> list[ExtractedRelation]:
    """Validated relations from a model reply; invalid items are dropped (and logged at debug).

    Raises :class:`LLMError` when the reply is not JSON or has no ``relationships`` list.
    """
    payload: Any = parse_json_reply(reply)
    items = payload.get("relationships") if isinstance(payload, dict) else payload
    if not isinstance(items, list):
        raise LLMError(f"model reply has no relationships list: {reply[:200]!r}")
    known: dict[str, Mention] = {}
    for m in sorted(mentions, key=lambda m: -len(m.text)):
        if m.key and m.key not in known:
            known[m.key] = m
    spans = sentence_spans(text)
    out: list[ExtractedRelation] = []
    for item in items:
        relation = _validate_item(item, known, default_confidence)
        if relation is None:
            log.debug("dropped invalid relation item from LLM: %r", item)
            continue
        source, target, rtype, conf = relation
        out.append(ExtractedRelation(source, target, rtype, conf, _find_sentence(spans, text, source, target)))
    return dedupe_relations(out)


def _validate_item(
    item: Any, known: dict[str, Mention], default_confidence: float
) -> tuple[str, str, str, float] | None:
    if not isinstance(item, dict):
        return None
    source, target, rtype = item.get("source"), item.get("target"), item.get("type")
    if not (isinstance(source, str) and isinstance(target, str) and isinstance(rtype, str)):
        return None
    rtype = re.sub(r"[\s_]+", "-", rtype.strip().lower())
    src, tgt = known.get(normalise_entity_name(source)), known.get(normalise_entity_name(target))
    if rtype not in RELATION_SIGNATURES or src is None or tgt is None or src.key == tgt.key:
        return None
    sources, targets = RELATION_SIGNATURES[rtype]
    if src.type not in sources or tgt.type not in targets:
        return None
    conf = item.get("confidence", default_confidence)
    if isinstance(conf, bool) or not isinstance(conf, int | float):
        return None
    if not math.isfinite(conf) or not 0.0 <= conf <= 1.0:
        return None
    return src.text, tgt.text, rtype, round(float(conf), 3)


class LLMRelationExtractor:
    """Relations from a chat model (JSON mode), validated; patterns when the model fails."""

    def __init__(
        self,
        llm: LLMProvider,
        *,
        fallback: RelationExtractor | None = None,
        max_chars: int = 8_000,
    ) -> None:
        self.llm = llm
        self.fallback: RelationExtractor = fallback or PatternRelationExtractor()
        self.max_chars = max_chars
        self.name = f"llm:{getattr(llm, 'name', 'llm')}/{getattr(llm, 'model', '')}"

    def messages(self, text: str, mentions: Sequence[Mention]) -> list[dict[str, str]]:
        """The chat request: the allowed types, the entity list and the text."""
        entities: dict[str, Mention] = {}
        for m in sorted(mentions, key=lambda m: -len(m.text)):
            entities.setdefault(m.key, m)
        listing = "\n".join(f"- {m.text} ({m.type})" for m in entities.values() if m.key)
        user = f"Entities:\n{listing}\n\nText:\n{text[: self.max_chars]}"
        return [
            {"role": "system", "content": relations_prompt(RELATION_DESCRIPTIONS)},
            {"role": "user", "content": user},
        ]

    def extract(self, text: str, mentions: Sequence[Mention]) -> list[ExtractedRelation]:
        """Validated LLM relations; the fallback's answer on any LLM or parsing failure."""
        real = [m for m in mentions if m.key and not is_pronoun(m)]
        if len({m.key for m in real}) < 2:
            return []
        try:
            reply = self.llm.chat(self.messages(text, real), json_mode=True)
            return parse_llm_relations(reply, text, real)
        except (LLMError, json.JSONDecodeError, ValueError, TypeError, RuntimeError) as exc:
            log.warning("LLM relation extraction failed (%s); using %s", exc, self.fallback.name)
            return self.fallback.extract(text, mentions)


def build_relation_extractor(llm: LLMProvider | None = None) -> RelationExtractor:
    """The LLM extractor when a provider is configured, else the pattern extractor."""
    return LLMRelationExtractor(llm) if llm is not None else PatternRelationExtractor()
