"""Rule mentions: the rules that run on top of the model, and the pure-regex fallback.

Rules on top of the model: deadlines and dated events (label DEADLINE / EVENT), named events,
holidays and exams (EVENT), projects (PROJECT, type thing), tools and software (TOOL, type thing),
products (PRODUCT: brand + name, camel-case and model-number shapes), languages someone learns or
speaks (LANGUAGE_RULE, thing), employers after a job title, meal venues and sports teams (ORG_RULE),
places someone goes (PLACE_RULE) and person cues ("my friend Carol"). How they are merged with the
model's mentions is in :mod:`agtos.tasks.ner_merge`. Without a model, :class:`RuleRecognizer` adds
capitalisation and context heuristics for people, organisations and places.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

from agtos.schemas import EntityType
from agtos.tasks.mentions import CORPORATE_SUFFIXES, Mention
from agtos.tasks.ner_merge import RuleCandidate, greedy_disjoint, harmonise_types
from agtos.tasks.ner_patterns import (
    BRAND_PRODUCT_RE,
    BY_RE,
    DEADLINE_RE,
    DUE_RE,
    EVENT_HEAD_RE,
    EVENT_RE,
    EXAM_RE,
    HOLIDAY_RE,
    KIN_WORD,
    LANGUAGE_RE,
    LEADING_NOISE,
    NAME_CAMEL,
    NAMED_EVENT_RE,
    NOT_NAMES,
    NOT_PRODUCT_HEADS,
    NOT_PROJECT_NAMES,
    ORG_CONTEXT_RE,
    ORG_STRONG_RE,
    ORG_SUFFIX_RE,
    PERSON_CUE_RES,
    PERSON_START_RE,
    PET_RE,
    PLACE_ACTIVITY_RE,
    PLACE_CONTEXT_RE,
    PLACE_FROM_RE,
    PLACE_IN_RE,
    PRODUCT_CONTEXT,
    PRODUCT_RE,
    PRODUCT_SHAPE_RE,
    PROJECT_RES,
    ROLE_AT_RE,
    SHIP_RE,
    SOFT_PERSON_RES,
    SPEAKER_PREFIX_RE,
    TEAM_RE,
    TECH_CONTEXT_RE,
    TECH_SHAPE,
    TOOL_CONTEXT_RE,
    TOOL_LEXICON_RE,
    USER_RE,
    VENUE_RE,
)
from agtos.tasks.speakers import SPEAKER_LABELS


def _clean_span(text: str, start: int, end: int) -> tuple[int, int]:
    """Trim whitespace, trailing punctuation, a possessive and leading determiners."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and (text[end - 1].isspace() or text[end - 1] in ".,;:!?\"')"):
        end -= 1
    if text[start:end].endswith(("'s", "’s")):
        end -= 2
    while True:
        head = re.match(r"(\w+)\s+", text[start:end])
        if head and head.group(1).lower() in LEADING_NOISE and end - start > len(head.group(0)):
            start += len(head.group(0))
            continue
        return start, end


def clean_mention(text: str, start: int, end: int, etype: EntityType, confidence: float, label: str) -> Mention | None:
    """The mention of ``text[start:end]`` trimmed by :func:`_clean_span`; None when nothing alphanumeric is left."""
    start, end = _clean_span(text, start, end)
    surface = text[start:end]
    if not surface or not any(ch.isalnum() for ch in surface):
        return None
    return Mention(surface, etype, start, end, round(confidence, 3), label)


def _name_ok(surface: str) -> bool:
    first = surface.split()[0].lower() if surface.split() else ""
    return bool(first) and first not in NOT_NAMES and surface.lower() not in NOT_NAMES


def _add(
    out: list[RuleCandidate],
    text: str,
    match: re.Match[str],
    group: str | int,
    etype: EntityType,
    conf: float,
    label: str,
    *,
    overrides: bool = True,
    replaces: frozenset[str] | None = None,
) -> None:
    if match.group(group) is None:
        return
    mention = clean_mention(text, match.start(group), match.end(group), etype, conf, label)
    if mention is not None:
        out.append(RuleCandidate(mention, overrides, replaces))


_NOT_ORG = frozenset({"PERSON", "GPE", "LOC", "FAC", "NORP", "PRODUCT", "WORK_OF_ART", "EVENT", "LANGUAGE", "LAW"})
_NOT_PLACE_OR_PERSON = frozenset({"ORG", "NORP", "PRODUCT", "WORK_OF_ART", "EVENT", "LANGUAGE", "LAW"})


def _trim_names(text: str, match: re.Match[str], group: str) -> tuple[int, int] | None:
    """The span of ``group`` without trailing words that name no product (weekdays, months...)."""
    words = list(re.finditer(r"\S+", match.group(group)))
    while words and words[-1].group(0).lower().strip(".,;:!?") in NOT_NAMES:
        words.pop()
    if not words:
        return None
    return match.start(group), match.start(group) + words[-1].end()


def _event_and_product_candidates(text: str, out: list[RuleCandidate]) -> None:
    """Named events, holidays, exams, languages, products, employers, venues, teams and places."""
    for m in NAMED_EVENT_RE.finditer(text):
        if _name_ok(m.group("name")):
            _add(out, text, m, "name", EntityType.event, 0.8, "EVENT")
    for m in EVENT_HEAD_RE.finditer(text):
        if _name_ok(m.group("name")):
            _add(out, text, m, "name", EntityType.event, 0.7, "EVENT")
    for m in EXAM_RE.finditer(text):
        _add(out, text, m, "name", EntityType.event, 0.75, "EVENT")
    for m in HOLIDAY_RE.finditer(text):
        if m.group("name").split()[0].lower() not in NOT_NAMES:
            _add(out, text, m, "name", EntityType.event, 0.75, "EVENT")
    for m in LANGUAGE_RE.finditer(text):
        _add(out, text, m, "name", EntityType.thing, 0.75, "LANGUAGE_RULE")
    for m in BRAND_PRODUCT_RE.finditer(text):
        if (span := _trim_names(text, m, "name")) is not None and " " in text[span[0] : span[1]]:
            mention = clean_mention(text, *span, EntityType.thing, 0.8, "PRODUCT")
            if mention is not None:
                out.append(RuleCandidate(mention))
    for m in PRODUCT_SHAPE_RE.finditer(text):
        head = m.group("name").split()[0]
        if head.lower() in NOT_PRODUCT_HEADS or head.lower() in NOT_NAMES:
            continue
        in_context = PRODUCT_CONTEXT.search(text, max(0, m.start() - 30), m.start()) is not None
        if NAME_CAMEL.match(head) and not in_context:
            continue  # McDonald, DeShawn: a name unless a product context comes first
        if (span := _trim_names(text, m, "name")) is not None:
            mention = clean_mention(text, *span, EntityType.thing, 0.7, "PRODUCT")
            if mention is not None:  # "on my iPhone" overrides the model's ORG; "at LinkedIn" does not
                out.append(RuleCandidate(mention, True, None if in_context else _NOT_ORG))
    for m in ROLE_AT_RE.finditer(text):
        if _name_ok(m.group("name")):
            _add(out, text, m, "name", EntityType.organization, 0.8, "ORG_RULE")
    for m in VENUE_RE.finditer(text):
        if _name_ok(m.group("name")):
            _add(out, text, m, "name", EntityType.organization, 0.7, "ORG_RULE", replaces=_NOT_ORG)
    for m in TEAM_RE.finditer(text):
        group = "name" if m.group("name") else "name2"
        if _name_ok(m.group(group)):
            _add(out, text, m, group, EntityType.organization, 0.75, "ORG_RULE")
    for m in PLACE_ACTIVITY_RE.finditer(text):
        if _name_ok(m.group("name")):
            _add(out, text, m, "name", EntityType.place, 0.65, "PLACE_RULE", overrides=False)


def strong_rule_candidates(text: str) -> list[RuleCandidate]:
    """Deadlines, dated events, projects, tools and person cues (used with and without a model)."""
    out: list[RuleCandidate] = []
    for regex, conf in ((DUE_RE, 0.8), (DEADLINE_RE, 0.8), (SHIP_RE, 0.7), (BY_RE, 0.6)):
        for m in regex.finditer(text):
            _add(out, text, m, "date", EntityType.event, conf, "DEADLINE")
    for m in EVENT_RE.finditer(text):
        _add(out, text, m, "event", EntityType.event, 0.7, "EVENT")
        _add(out, text, m, "date", EntityType.event, 0.75, "DEADLINE")
    for regex in PROJECT_RES:
        for m in regex.finditer(text):
            name = clean_mention(text, m.start("name"), m.end("name"), EntityType.thing, 0.8, "PROJECT")
            if name and _name_ok(name.text) and name.text.split()[0].lower() not in NOT_PROJECT_NAMES:
                out.append(RuleCandidate(name))
    for m in TOOL_LEXICON_RE.finditer(text):
        _add(out, text, m, 0, EntityType.thing, 0.8, "TOOL")
    for m in TOOL_CONTEXT_RE.finditer(text):
        if _name_ok(m.group("name")):
            _add(out, text, m, "name", EntityType.thing, 0.65, "TOOL")
    for m in TECH_CONTEXT_RE.finditer(text):
        if TECH_SHAPE.search(m.group("name")):
            _add(out, text, m, "name", EntityType.thing, 0.6, "TOOL")
    for regex in PERSON_CUE_RES:
        for m in regex.finditer(text):
            last = m.group("name").split()[-1].lower()
            if _name_ok(m.group("name")) and last not in CORPORATE_SUFFIXES:
                _add(out, text, m, "name", EntityType.person, 0.75, "PERSON_CUE")
    for m in USER_RE.finditer(text):
        out.append(RuleCandidate(Mention("User", EntityType.person, m.start(), m.end(), 0.9, "SPEAKER")))
    for m in SPEAKER_PREFIX_RE.finditer(text):
        if _name_ok(m.group("name")) and m.group("name").lower() not in SPEAKER_LABELS:
            _add(out, text, m, "name", EntityType.person, 0.9, "SPEAKER")
    for m in PET_RE.finditer(text):
        if _name_ok(m.group("name")):
            _add(out, text, m, "name", EntityType.animal, 0.85, "PET")
    for m in ORG_STRONG_RE.finditer(text):
        if _name_ok(m.group("name")):
            _add(out, text, m, "name", EntityType.organization, 0.8, "ORG_RULE")
    for m in PRODUCT_RE.finditer(text):
        if _name_ok(m.group("name")) and not KIN_WORD.fullmatch(m.group("name")):
            _add(out, text, m, "name", EntityType.thing, 0.7, "PRODUCT")
    for regex in SOFT_PERSON_RES:
        for m in regex.finditer(text):
            if _name_ok(m.group("name")):
                _add(out, text, m, "name", EntityType.person, 0.6, "PERSON_CUE", overrides=False)
    _event_and_product_candidates(text, out)
    return out


def _sentence_starts(text: str) -> list[int]:
    starts = [0]
    for m in re.finditer(r"[.;!?]+[\"')\]]*\s+|\n+", text):
        starts.append(m.end())
    return starts


def weak_rule_candidates(text: str) -> list[RuleCandidate]:
    """Capitalisation-and-context heuristics for person, organisation and place (fallback only)."""
    out: list[RuleCandidate] = []
    for m in ORG_SUFFIX_RE.finditer(text):
        _add(out, text, m, "name", EntityType.organization, 0.7, "ORG_RULE", overrides=False)
        _add(out, text, m, "name2", EntityType.organization, 0.7, "ORG_RULE", overrides=False)
    for m in ORG_CONTEXT_RE.finditer(text):
        if _name_ok(m.group("name")):
            _add(out, text, m, "name", EntityType.organization, 0.6, "ORG_RULE", overrides=False)
    for regex, conf in ((PLACE_CONTEXT_RE, 0.65), (PLACE_FROM_RE, 0.55), (PLACE_IN_RE, 0.45)):
        for m in regex.finditer(text):
            if _name_ok(m.group("name")):
                _add(out, text, m, "name", EntityType.place, conf, "PLACE_RULE", overrides=False)
    for start in _sentence_starts(text):
        opener = PERSON_START_RE.match(text, start)
        if opener and _name_ok(opener.group("name")):
            _add(out, text, opener, "name", EntityType.person, 0.5, "PERSON_RULE", overrides=False)
    return out


def speaker_mentions(text: str, found: Sequence[Mention]) -> list[Mention]:
    """``found`` with every occurrence of a speaker's name ("Maria: ..." somewhere in ``text``) a
    person: facts open with the speaker's name, which the model often misses or mistypes."""
    names = {
        m.group("name")
        for m in SPEAKER_PREFIX_RE.finditer(text)
        if _name_ok(m.group("name")) and m.group("name").lower() not in SPEAKER_LABELS
    }
    if not names:
        return list(found)
    pattern = re.compile(r"\b(?:" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + r")\b")
    spans = [(m.start(), m.end()) for m in pattern.finditer(text)]
    kept = [m for m in found if not any(m.start < e and s < m.end for s, e in spans)]
    speakers = [Mention(text[s:e], EntityType.person, s, e, 0.9, "SPEAKER") for s, e in spans]
    return sorted([*kept, *speakers], key=lambda m: (m.start, m.end))


def line_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each non-blank line: recognition runs per line, so no mention joins two
    turns, facts or summary lines ("Rui\nUser")."""
    return [(m.start(), m.end()) for m in re.finditer(r"[^\n]*\S[^\n]*", text)]


def shift(mentions: Iterable[Mention], offset: int) -> list[Mention]:
    """``mentions`` of a line moved to their place in the whole text."""
    return [replace(m, start=m.start + offset, end=m.end + offset) for m in mentions] if offset else list(mentions)


class RuleRecognizer:
    """Pure-regex fallback: rules plus capitalisation heuristics, no model. Lower confidence."""

    name = "rules-fallback"

    def recognize(self, text: str) -> list[Mention]:
        """Mentions found by rules alone, line by line."""
        found: list[Mention] = []
        for start, end in line_spans(text):
            line = text[start:end]
            kept = greedy_disjoint([*strong_rule_candidates(line), *weak_rule_candidates(line)])
            found += shift((c.mention for c in kept), start)
        return harmonise_types(speaker_mentions(text, sorted(found, key=lambda m: (m.start, m.end))))

    def recognize_many(self, texts: Iterable[str]) -> list[list[Mention]]:
        """:meth:`recognize` for each text."""
        return [self.recognize(t) for t in texts]
