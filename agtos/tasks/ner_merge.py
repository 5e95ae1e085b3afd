"""How rule candidates and the model's mentions become one list of mentions.

The rules (:mod:`agtos.tasks.ner_rules`) propose :class:`RuleCandidate` spans; :func:`greedy_disjoint`
keeps a non-overlapping set of them; :func:`merge_with_model` lays them over the model's mentions (a
rule span that covers a model span replaces it, a larger model span wins, a model PERSON after "in",
"moved to"... becomes a place); :func:`harmonise_types` gives every mention of one name one type.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from agtos.schemas import EntityType
from agtos.tasks.mentions import MODEL_LABELS, Mention
from agtos.tasks.ner_patterns import KIN_WORD, PLACE_BEFORE


@dataclass(frozen=True, slots=True)
class RuleCandidate:
    """A rule candidate: ``overrides`` lets it replace a model span it covers (only spans with one of
    the ``replaces`` labels, when given)."""

    mention: Mention
    overrides: bool = True
    replaces: frozenset[str] | None = None


def _covers(outer: Mention, inner: Mention) -> bool:
    return outer.start <= inner.start and inner.end <= outer.end


def greedy_disjoint(cands: Sequence[RuleCandidate]) -> list[RuleCandidate]:
    """Non-overlapping candidates: overriding (strong) first, then confidence, then length."""
    ranked = sorted(
        cands,
        key=lambda c: (
            not c.overrides,
            -c.mention.confidence,
            -(c.mention.end - c.mention.start),
            c.mention.start,
        ),
    )
    spans: list[tuple[int, int]] = []  # kept spans, sorted and disjoint
    kept: list[RuleCandidate] = []
    for cand in ranked:
        start, end = cand.mention.start, cand.mention.end
        at = bisect.bisect_left(spans, (start, end))
        if (at and spans[at - 1][1] > start) or (at < len(spans) and spans[at][0] < end):
            continue
        spans.insert(at, (start, end))
        kept.append(cand)
    return sorted(kept, key=lambda c: c.mention.start)


#: rules that only type what the model also finds: when the model agrees, its label stays
TYPING_LABELS = frozenset({"ORG_RULE", "SPEAKER", "PET", "PRODUCT", "EVENT", "PLACE_RULE", "LANGUAGE_RULE"})
_GENDERED_PRONOUN = re.compile(r"\b(?:she|he|her|his|him|hers|herself|himself)\b", re.I)


def _pronoun_follows(text: str, mention: Mention, window: int = 200) -> bool:
    return bool(_GENDERED_PRONOUN.search(text, mention.end, mention.end + window))


def harmonise_types(mentions: Sequence[Mention]) -> list[Mention]:
    """Give every mention of one normalised name the same type (rule evidence counts 1.2x)."""
    weight: dict[tuple[str, EntityType], float] = {}
    for m in mentions:
        factor = 1.0 if m.label in MODEL_LABELS else 1.2
        weight[(m.key, m.type)] = weight.get((m.key, m.type), 0.0) + m.confidence * factor
    best: dict[str, tuple[float, EntityType]] = {}
    for (key, etype), w in weight.items():
        if key not in best or w > best[key][0]:
            best[key] = (w, etype)
    return [m if m.type == best[m.key][1] else replace(m, type=best[m.key][1]) for m in mentions]


def retype_by_context(text: str, model: Sequence[Mention]) -> list[Mention]:
    """A model PERSON right after "in", "near", "moved to", "visited", "is from"... (and not "in
    Maria's") is a place: the small model calls many unfamiliar towns people."""
    out: list[Mention] = []
    for m in model:
        if (
            m.label == "PERSON"
            and text[m.end : m.end + 2] not in ("'s", "’s")
            and not KIN_WORD.fullmatch(m.text)
            and PLACE_BEFORE.search(text, max(0, m.start - 40), m.start)
        ):
            m = replace(m, type=EntityType.place, label="PLACE_CONTEXT")
        out.append(m)
    return out


def merge_with_model(text: str, model: Sequence[Mention], rules: Sequence[RuleCandidate]) -> list[Mention]:
    """Model mentions plus rule mentions.

    A strong rule replaces a model span it covers; a soft person cue replaces a one-word model
    ORG/PRODUCT span only when a he/she pronoun follows ("Alice's project ... she"). Otherwise the
    model wins and the clashing rule spans are dropped.
    """
    model = retype_by_context(text, model)
    chosen = greedy_disjoint(rules)  # disjoint and sorted, so their ends are sorted too
    ends = [c.mention.end for c in chosen]
    result: list[Mention] = []
    dropped: set[int] = set()
    for m in model:
        clashing: list[tuple[int, RuleCandidate]] = []
        i = bisect.bisect_right(ends, m.start)
        while i < len(chosen) and chosen[i].mention.start < m.end:
            if i not in dropped:
                clashing.append((i, chosen[i]))
            i += 1
        if not clashing:
            result.append(m)
            continue
        winners = [
            (i, c)
            for i, c in clashing
            if (_covers(c.mention, m) or (c.overrides and " and " in m.text))
            and (c.replaces is None or m.label in c.replaces)
            and (
                c.overrides
                or (
                    c.mention.type == EntityType.person
                    and m.type in (EntityType.organization, EntityType.thing)
                    and " " not in m.text
                    and _pronoun_follows(text, m)
                )
            )
        ]
        if winners:
            i, c = winners[0]
            if (c.mention.start, c.mention.end, c.mention.type) == (m.start, m.end, m.type):
                boosted = min(0.95, max(c.mention.confidence, m.confidence) + 0.1)
                label = m.label if c.mention.label in TYPING_LABELS else c.mention.label  # the model agreed
                chosen[i] = RuleCandidate(
                    replace(c.mention, confidence=round(boosted, 3), label=label), c.overrides, c.replaces
                )
            continue
        dropped.update(i for i, _ in clashing)
        result.append(m)
    result.extend(c.mention for i, c in enumerate(chosen) if i not in dropped)
    return harmonise_types(sorted(result, key=lambda m: (m.start, m.end)))
