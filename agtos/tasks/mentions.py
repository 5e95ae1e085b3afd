"""Entity mentions: what a recognizer returns, the name key that merges them, and their grouping.

A mention's ``label`` is the NER model's (the keys of :data:`MODEL_LABELS`, see :mod:`agtos.tasks.ner`)
or a rule's (:mod:`agtos.tasks.ner_rules`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from agtos.schemas import EntityType
from agtos.tasks.text import name_words

#: the NER model's labels that are kept, and the entity type each becomes
MODEL_LABELS: dict[str, EntityType] = {
    "PERSON": EntityType.person,
    "GPE": EntityType.place,
    "LOC": EntityType.place,
    "FAC": EntityType.place,
    "ORG": EntityType.organization,
    "EVENT": EntityType.event,
    "PRODUCT": EntityType.thing,
    "WORK_OF_ART": EntityType.thing,
    "LAW": EntityType.thing,
    "LANGUAGE": EntityType.thing,
}


@dataclass(frozen=True, slots=True)
class Mention:
    """One entity mention: surface text, type, character span, confidence and source label."""

    text: str
    type: EntityType
    start: int
    end: int
    confidence: float
    label: str

    @property
    def key(self) -> str:
        """The alias-dedup key (see :func:`normalise_entity_name`)."""
        return normalise_entity_name(self.text)


class EntityRecognizer(Protocol):
    """Text in, entity mentions out."""

    @property
    def name(self) -> str: ...

    def recognize(self, text: str) -> list[Mention]: ...

    def recognize_many(self, texts: Iterable[str]) -> list[list[Mention]]: ...


# --------------------------------------------------------------------------- normalisation

CORPORATE_SUFFIXES = frozenset(
    "corp corporation inc incorporated ltd limited llc llp plc gmbh ag co company sa sas sarl bv nv "
    "pty oy ab srl spa kg se".split()
)
_LEGACY_TOKEN = re.compile(r"[a-z0-9]+[+#]*")


def _key(tokens: list[str]) -> str:
    while len(tokens) > 1 and tokens[0] == "the":
        tokens.pop(0)
    while len(tokens) > 1 and tokens[-1] in CORPORATE_SUFFIXES:
        tokens.pop()
    return " ".join(tokens)


def normalise_entity_name(name: str) -> str:
    """Case-, accent- and punctuation-free key (:func:`~agtos.tasks.text.name_words`); drops a leading
    "the", a possessive "'s" and corporate suffixes, so "Acme Corp.", "ACME" and "the Acme" all give
    "acme", "José" and "Jose" "jose"; the marks of scripts other than Latin, Greek and Cyrillic are kept
    ("दाल" is not "दल")."""
    return _key(name_words(name))


def legacy_entity_key(name: str) -> str:
    """The key the entity index stored before names kept their marks (BM25 tokenizer version 3): every
    mark dropped, then ASCII letters and digits only ("Łukasz" -> "ukasz", "दाल" -> ""). Still looked up
    and indexed, so an entity stored by that version keeps its names."""
    folded = "".join(c for c in unicodedata.normalize("NFKD", name) if not unicodedata.combining(c)).casefold()
    folded = re.sub(r"['’]s\b", "", folded)
    return _key(_LEGACY_TOKEN.findall(folded))


def _first_names_to_full(groups: dict[str, list[Mention]]) -> None:
    """A one-word person name ("Omar") joins the one full name it starts ("Omar Haddad"), in place."""
    people = [k for k, g in groups.items() if any(m.type == EntityType.person for m in g)]
    for key in [k for k in people if " " not in k]:
        full = [k for k in people if k.startswith(key + " ")]
        if len(full) == 1:
            groups[full[0]].extend(groups.pop(key))


@dataclass
class EntityCandidate:
    """Mentions of one entity merged by normalised name: the longest surface is the name."""

    name: str
    type: EntityType
    key: str
    aliases: list[str] = field(default_factory=list)
    confidence: float = 0.0
    labels: list[str] = field(default_factory=list)


def collect_entities(mentions: Iterable[Mention]) -> list[EntityCandidate]:
    """Group mentions by :func:`normalise_entity_name`; type = most confident type overall."""
    groups: dict[str, list[Mention]] = {}
    for mention in mentions:
        if mention.key:
            groups.setdefault(mention.key, []).append(mention)
    _first_names_to_full(groups)
    out: list[EntityCandidate] = []
    for key, group in groups.items():
        surfaces = sorted({m.text for m in group}, key=lambda s: (-len(s), s))
        weight: dict[EntityType, float] = {}
        for m in group:
            weight[m.type] = weight.get(m.type, 0.0) + m.confidence
        best_type = max(weight, key=lambda t: weight[t])
        out.append(
            EntityCandidate(
                name=surfaces[0],
                type=best_type,
                key=key,
                aliases=surfaces[1:],
                confidence=max(m.confidence for m in group if m.type == best_type),
                labels=sorted({m.label for m in group}),
            )
        )
    return out
