"""The relation vocabulary (types, entity-type signatures), the extracted edge, and the helpers every
relation extractor shares (sentence spans, one edge per triple).

Output uses entity names: store ids are assigned later.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from agtos.schemas import EntityType
from agtos.tasks.mentions import Mention, normalise_entity_name

_P, _PL, _O, _E, _T, _A = (
    EntityType.person,
    EntityType.place,
    EntityType.organization,
    EntityType.event,
    EntityType.thing,
    EntityType.animal,
)

#: relation type -> (allowed source types, allowed target types)
RELATION_SIGNATURES: dict[str, tuple[frozenset[EntityType], frozenset[EntityType]]] = {
    "works-at": (frozenset({_P}), frozenset({_O})),
    "studies-at": (frozenset({_P}), frozenset({_O})),
    "lives-in": (frozenset({_P}), frozenset({_PL})),
    "located-in": (frozenset({_O, _PL, _E}), frozenset({_PL})),
    "belongs-to": (frozenset({_T, _E, _O}), frozenset({_P, _O})),
    "owns": (frozenset({_P, _O}), frozenset({_T, _O})),
    "knows": (frozenset({_P}), frozenset({_P})),
    "spouse": (frozenset({_P}), frozenset({_P})),
    "has-pet": (frozenset({_P}), frozenset({_A})),
    "due": (frozenset({_T, _E}), frozenset({_E})),
    "has-deadline": (frozenset({_T, _E}), frozenset({_E})),
}
RELATION_TYPES: frozenset[str] = frozenset(RELATION_SIGNATURES)
SYMMETRIC_TYPES: frozenset[str] = frozenset({"knows", "spouse"})
#: relation type -> what it means (the relations prompt lists them)
RELATION_DESCRIPTIONS = {
    "works-at": "person -> organization they work for",
    "studies-at": "person -> school or university they study (or studied) at",
    "lives-in": "person -> place they live in",
    "located-in": "organization/place/event -> place it is in",
    "belongs-to": "project/thing/event/startup -> person or organization it belongs to",
    "owns": "person/organization -> thing or organization it owns",
    "knows": "person -> person (friend, colleague, family other than a spouse, met)",
    "spouse": "person -> their wife, husband or life partner",
    "has-pet": "person -> their pet (animal)",
    "due": "project/thing/event -> the deadline (event) it is due on",
    "has-deadline": "project/thing/event -> its deadline or date (event)",
}


@dataclass(frozen=True, slots=True)
class ExtractedRelation:
    """A typed edge between two entity names, with the sentence it came from."""

    source: str
    target: str
    type: str
    confidence: float
    sentence: str


class RelationExtractor(Protocol):
    """Text and its mentions in, typed relations out."""

    name: str

    def extract(self, text: str, mentions: Sequence[Mention]) -> list[ExtractedRelation]: ...


_TITLES = frozenset({"mr", "mrs", "ms", "dr", "prof", "st", "sr", "jr", "vs", "etc", "e.g", "i.e"})
_BOUNDARY = re.compile(r"[.!?]+[\"')\]]*\s+|\n+")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence; no split after titles or before a lower-case word."""
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        if "\n" not in m.group(0):
            before = text[start : m.start()].split()
            last = before[-1].lower().rstrip(".") if before else ""
            nxt = text[m.end() : m.end() + 1]
            if last in _TITLES or (nxt and nxt.islower()):
                continue
        if text[start : m.start()].strip():
            spans.append((start, m.end()))
        start = m.end()
    if text[start:].strip():
        spans.append((start, len(text)))
    return spans


def dedupe_relations(relations: list[ExtractedRelation]) -> list[ExtractedRelation]:
    """One relation per (type, source, target) - either order for symmetric types - at its best."""
    best: dict[tuple[str, ...], ExtractedRelation] = {}
    for rel in relations:
        ends = (normalise_entity_name(rel.source), normalise_entity_name(rel.target))
        key = (rel.type, *(sorted(ends) if rel.type in SYMMETRIC_TYPES else ends))
        if key not in best or rel.confidence > best[key].confidence:
            best[key] = rel
    return list(best.values())
