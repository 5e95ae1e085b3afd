"""Relations by sentence patterns: deterministic, offline.

Relations are pattern-matched on the text between two mentions of one sentence (plus, for a few,
the text just before or after them), with the entity-type signature of each relation enforced.
"her/his/their" and "she/he/they" resolve to the most recent person (they/their: or organisation)
mentioned earlier in the same or the previous sentence.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from agtos.schemas import EntityType
from agtos.tasks.mentions import Mention, normalise_entity_name
from agtos.tasks.relation_types import RELATION_SIGNATURES, ExtractedRelation, dedupe_relations, sentence_spans

_PRONOUN = re.compile(r"\b(she|he|they|her|his|their|him|them|hers|theirs)\b", re.I)
_POSSESSIVE = frozenset({"her", "his", "their"})
_PERSONAL = frozenset({"she", "he", "her", "his", "him", "hers"})


def _resolve_pronouns(text: str, spans: list[tuple[int, int]], mentions: Sequence[Mention]) -> list[Mention]:
    """A proxy mention (label ``PRONOUN:<word>``) for each pronoun with an antecedent."""
    proxies: list[Mention] = []
    for index, (start, end) in enumerate(spans):
        window_start = spans[index - 1][0] if index else start
        for m in _PRONOUN.finditer(text, start, end):
            word = m.group(1).lower()
            allowed = {EntityType.person} if word in _PERSONAL else {EntityType.person, EntityType.organization}
            candidates = [x for x in mentions if x.type in allowed and window_start <= x.start and x.end <= m.start()]
            if not candidates:
                continue
            antecedent = max(candidates, key=lambda x: x.end)
            proxies.append(
                Mention(
                    antecedent.text,
                    antecedent.type,
                    m.start(),
                    m.end(),
                    round(antecedent.confidence * 0.85, 3),
                    f"PRONOUN:{word}",
                )
            )
    return proxies


def is_pronoun(m: Mention) -> bool:
    """A proxy mention standing for a pronoun (label ``PRONOUN:<word>``)."""
    return m.label.startswith("PRONOUN:")


def _is_possessive(m: Mention) -> bool:
    return m.label.split(":", 1)[-1] in _POSSESSIVE if is_pronoun(m) else False


# --------------------------------------------------------------------------- patterns

_I = re.I
_ADJ = r"(?:(?:new|own|current|latest|side|pet|big|main|little|secret|next|first|favou?rite|dream)\s+)*"
_OBJ = r"(?:(?:project|startup|app|product|book|band|business|tool|idea)\s+)?"
_KIN = (
    r"(?:friends?|colleagues?|co-?workers?|classmates?|teammates?|neighbou?rs?|roommates?|flatmates?|"
    r"mentors?|mentees?|buddy|buddies|bosse?s?|managers?|cousins?|siblings?|sisters?|"
    r"brothers?|girlfriend|boyfriend|mother|father|mom|mum|dad|sons?|daughters?|grandm\w+|grandp\w+|"
    r"aunt|uncle|niece|nephew|physio|physiotherapist|therapist|doctor|dentist|tutor|teacher|coach|trainer|"
    r"landlord|landlady)"
)
_KIN_ADJ = r"(?:(?:best|good|old|close|new|little|big|older|younger|left|right)\s+)?"
_SPOUSE = r"(?:wife|husband|spouse|partner|fianc[eé]e?)"
_PETS = (
    r"(?:dogs?|puppy|cats?|kittens?|kitty|parrots?|rabbits?|bunny|hamsters?|horses?|pony|guinea\s+pigs?|"
    r"turtles?|tortoises?|budgie|ferrets?|goldfish|beagles?|labradors?|retrievers?|poodles?|terriers?|"
    r"husky|corgis?|dachshunds?|spaniels?|bulldogs?|collies?|shepherds?)"
)
_NAMED = r"\s*,?\s*(?:(?:is\s+)?(?:called|named)\s+)?(?:(?:Dr|Mr|Mrs|Ms|Prof)\.?\s+)?"
_AUX = (
    r"(?:(?:now|currently|still|also|just|recently|first|often|finally|eventually|already|really|has|have|had|is|"
    r"was|are|will|used\s+to|enjoys?|loves?|likes?)\s+)*"
)


@dataclass(frozen=True)
class _Rule:
    """One pattern: ``between`` must match all the text between the earlier mention ``a`` and the
    later ``b``. ``reverse``: b is the source. ``first``: what ``a`` must be ("any", "real",
    "possessive" pronoun). ``coordinated``: may also hang off the sentence subject ("X ... and is
    a friend of Y"). Optional ``before``/``after`` are matched next to a / after b."""

    type: str
    between: str
    confidence: float
    reverse: bool = False
    first: str = "any"
    coordinated: bool = False
    before: str | None = None
    after: str | None = None
    source_types: frozenset[EntityType] | None = None
    target_label: str | None = None

    def compiled(self) -> tuple[re.Pattern[str], re.Pattern[str] | None]:
        direct = re.compile(self.between, _I)
        coord = (
            re.compile(r"(?:\band|,|\bwho|\bbut|\bwhere)\s+(?:also\s+)?(?:" + self.between + r")$", _I)
            if self.coordinated
            else None
        )
        return direct, coord


RULES: tuple[_Rule, ...] = (
    # works-at
    _Rule(
        "works-at",
        rf"\s*,?\s*{_AUX}(?:works?|working|worked|interns?|interning|interned|started|starts|consults?|"
        r"teach(?:es|ing)?|taught|volunteer(?:s|ing|ed)?)(?:\s+[\w-]+){0,2}?\s+(?:at|for)\s+(?:the\s+)?",
        0.85,
        coordinated=True,
    ),
    _Rule("works-at", r"\s*(?:is|was|has\s+been|got)\s+(?:employed|hired)\s+(?:by|at)\s+(?:the\s+)?", 0.85),
    _Rule(
        "works-at",
        rf"\s*,?\s*{_AUX}(?:started|starting|starts|got|gets|took|accepted|landed|has|have|begins?|began)\s+"
        r"(?:a|an|the|her|his|their)\s+(?:new\s+|first\s+|dream\s+)?(?:job|position|role|internship)"
        r"(?:\s+as\s+[\w\s-]{1,30}?)?\s+(?:at|with)\s+(?:the\s+)?",
        0.85,
        coordinated=True,
    ),
    _Rule("works-at", r"(?:'s|’s)\s+(?:company|employer)\s*,?\s+", 0.75, first="real"),
    _Rule("works-at", r"\s+(?:company|employer)\s*,?\s+", 0.75, first="possessive"),
    # studies-at
    _Rule(
        "studies-at",
        rf"\s*,?\s*{_AUX}(?:(?:studies|studied|studying|study|enrolled)\s+(?:[\w-]+\s+){{0,3}}?(?:at|in)|"
        r"(?:finished|completed|did|doing|got|earned|started|is\s+doing)\s+(?:(?:a|an|the|her|his|their)\s+)?"
        r"(?:PhD|doctorate|degree|masters?|master's|bachelor's|MBA|studies)(?:\s+in\s+[\w\s]{1,30}?)?\s+(?:at|from))"
        r"\s+(?:the\s+)?",
        0.8,
        coordinated=True,
    ),
    _Rule("works-at", rf"\s*{_AUX}(?:joined|joins|join|is\s+joining)\s+(?:the\s+)?", 0.8, coordinated=True),
    _Rule(
        "works-at",
        r"\s*,?\s*(?:(?:is|was|'s|works\s+as)\s+)?(?:a|an|the|our|their)\s+[\w\s-]{1,40}?\s+(?:at|for|of|with)"
        r"\s+(?:the\s+)?",
        0.7,
        coordinated=True,
    ),
    _Rule(
        "works-at",
        r"\s*(?:(?:has|have|had|just|recently)\s+)*(?:hired|employs|employed|recruited)\s+",
        0.8,
        reverse=True,
    ),
    # lives-in
    _Rule(
        "lives-in",
        rf"\s*,?\s*{_AUX}(?:lives?|living|lived|resides?|residing|based|moved|moving|relocated|relocating)"
        r"\s+(?:in|to|near)\s+(?:the\s+)?",
        0.85,
        coordinated=True,
    ),
    _Rule("lives-in", r"(?:'s|’s)\s+(?:home|house|flat|apartment)\s+(?:is\s+)?in\s+(?:the\s+)?", 0.7),
    # located-in
    _Rule(
        "located-in",
        r"\s*,?\s*(?:(?:conference|festival|summit|meetup|hackathon|office|branch)\s+)?(?:(?:is|are|was|were)\s+)?"
        r"(?:(?:based|located|headquartered|situated)\s+)?(?:in|near|out\s+of)\s+(?:the\s+)?",
        0.75,
    ),
    _Rule(
        "located-in",
        r"\s*,\s*(?:a|an|the)\s+[\w\s-]{1,40}?\s+(?:(?:based|located|headquartered)\s+)?in\s+(?:the\s+)?",
        0.7,
        source_types=frozenset({EntityType.organization}),
    ),
    _Rule("located-in", r"\s*,\s*", 0.7, source_types=frozenset({EntityType.place})),
    # belongs-to / owns
    _Rule("belongs-to", rf"\s+{_ADJ}{_OBJ}", 0.8, reverse=True, first="possessive"),
    _Rule("belongs-to", rf"(?:'s|’s|')\s+{_ADJ}{_OBJ}", 0.8, reverse=True, first="real"),
    _Rule(
        "belongs-to",
        r"\s*(?:is|was)\s+",
        0.75,
        after=r"(?:'s|’s)\s+" + _ADJ + r"(?:project|startup|app|idea|baby)\b",
    ),
    _Rule("belongs-to", r"\s*(?:belongs|belonged|belonging)\s+to\s+", 0.8),
    _Rule(
        "belongs-to",
        rf"\s*{_AUX}(?:leads?|leading|led|runs?|running|ran|manages?|managing|managed|started|created|founded|"
        r"maintains?|maintaining|works?\s+on|working\s+on|worked\s+on|building|builds?|built)\s+"
        r"(?:the\s+|a\s+|an\s+)?(?:project\s+)?",
        0.7,
        reverse=True,
        coordinated=True,
        source_types=frozenset({EntityType.thing}),
    ),
    _Rule(
        "owns",
        r"\s*(?:(?:also|now|still|just)\s+)*(?:owns?|owned|bought|purchased|has\s+(?:a|an)|drives)\s+"
        r"(?:a\s+|an\s+|the\s+)?",
        0.7,
        coordinated=True,
    ),
    _Rule(
        "owns",
        rf"\s*,?\s*{_AUX}(?:starting|started|starts|opened|opening|founded|runs|running|owns)\s+"
        r"(?:(?:a|an|the|her|his|their)\s+|\w+(?:'s|’s)\s+)?(?:own\s+)?(?:new\s+)?"
        r"(?:bakery|company|business|startup|shop|restaurant|caf[eé]|store|studio|agency|firm)\s*,?\s+"
        r"(?:called|named)\s+",
        0.8,
        coordinated=True,
    ),
    # spouse
    _Rule("spouse", rf"(?:'s|’s)\s+(?:(?:new|late|future)\s+)?{_SPOUSE}{_NAMED}", 0.85, first="real"),
    _Rule("spouse", rf"\s+(?:(?:new|late|future)\s+)?{_SPOUSE}{_NAMED}", 0.8, first="possessive"),
    _Rule(
        "spouse",
        rf"\s*,?\s*{_AUX}(?:married|is\s+married\s+to|got\s+married\s+to|engaged\s+to|is\s+engaged\s+to)\s+",
        0.8,
        coordinated=True,
    ),
    _Rule(
        "spouse",
        r"\s*and\s+",
        0.75,
        after=r"\s+(?:are|were|have\s+been|'ve\s+been|got)\s+(?:\w+\s+)?(?:married|engaged)\b",
    ),
    # has-pet
    _Rule("has-pet", rf"(?:'s|’s)\s+{_ADJ}{_PETS}{_NAMED}", 0.85, first="real"),
    _Rule("has-pet", rf"\s+{_ADJ}{_PETS}{_NAMED}", 0.8, first="possessive"),
    _Rule(
        "has-pet",
        rf"\s*,?\s*{_AUX}(?:has|have|had|got|adopted|adopts|rescued|owns?|bought)\s+(?:a|an|the|two|three)?\s*"
        rf"(?:[\w-]+\s+)?{_PETS}{_NAMED}",
        0.8,
        coordinated=True,
    ),
    # knows
    _Rule(
        "knows",
        r"\s*,?\s*(?:(?:is|was|'s|are|has\s+been|became)\s+)?"
        r"(?:(?:a|an|my|our|the|her|his|their|good|old|best|close|long-?time|former)\s+)*"
        rf"{_KIN}\s+(?:of|with|to)\s+",
        0.8,
        coordinated=True,
    ),
    _Rule(
        "knows",
        rf"\s*{_AUX}(?:knows?|knew|met|meets|meeting|works?\s+with|working\s+with|worked\s+with|"
        r"talked\s+(?:to|with)|spoke\s+(?:to|with)|chatted\s+with|dating|dates|dated|"
        r"hangs?\s+out\s+with|hung\s+out\s+with|texted|called|emailed|(?:studies|study|studying|trains?|training|"
        r"lives?|living|travell?ing|travels?|went\s+\w+|goes\s+\w+|going\s+\w+)\s+with)\s+(?:with\s+)?"
        rf"(?:(?:a|an|the|her|his|their)\s+)?(?:{_KIN}\s*,?\s*)?",
        0.75,
        coordinated=True,
    ),
    _Rule("knows", rf"(?:'s|’s)\s+{_KIN_ADJ}{_KIN}{_NAMED}", 0.8, first="real"),
    _Rule("knows", rf"\s+{_KIN_ADJ}{_KIN}{_NAMED}", 0.75, first="possessive"),
    _Rule(
        "knows",
        r"\s*and\s+",
        0.75,
        after=r"\s+(?:are|were|have\s+been|became|'re)\s+(?:\w+\s+)?(?:friends|colleagues|co-?workers|"
        r"classmates|teammates|neighbou?rs|roommates|partners|married|siblings|cousins|dating)\b"
        r"|\s+(?:met|know\s+each\s+other|work\s+together)\b",
    ),
    # deadlines
    _Rule(
        "due",
        r"\s*,?\s*(?:(?:which|that|it)\s+)?(?:(?:is|are|was|were|'s|will\s+be|must\s+be|has\s+to\s+be|"
        r"needs\s+to\s+be|should\s+be)\s+)?(?:due|done|finished|shipped|delivered|completed|ready|submitted|"
        r"launched|released|live)\s+(?:on\s+|by\s+|before\s+)?(?:the\s+)?",
        0.85,
        target_label="DEADLINE",
    ),
    _Rule(
        "due",
        r"\s*,?\s*(?:(?:must|has\s+to|needs\s+to|should|will)\s+)?(?:ships?|launch(?:es)?|go(?:es)?\s+live|"
        r"lands?|releases?|be\s+\w+)\s+(?:on\s+|by\s+|before\s+)?(?:the\s+)?",
        0.75,
        target_label="DEADLINE",
    ),
    _Rule(
        "has-deadline",
        r"(?:'s|’s)?\s*(?:deadline|due\s+date)\s+(?:is\s+|was\s+|falls\s+on\s+)?(?:on\s+|by\s+|:\s*)?(?:the\s+)?",
        0.85,
        target_label="DEADLINE",
    ),
    _Rule(
        "has-deadline",
        r"\s*(?:project\s+)?(?:is|was|:|,)?\s*(?:on\s+|by\s+)?(?:the\s+)?",
        0.8,
        before=r"deadlines?\s+(?:for|of|on)\s+(?:the\s+)?(?:project\s+)?$",
        target_label="DEADLINE",
    ),
    _Rule(
        "has-deadline",
        r"\s*(?:(?:is|was|will\s+be)\s+)?(?:on|scheduled\s+for|set\s+for|planned\s+for|happening\s+on|"
        r"takes\s+place\s+on)\s+(?:the\s+)?",
        0.75,
        source_types=frozenset({EntityType.event}),
        target_label="DEADLINE",
    ),
)
_COMPILED = [(rule, *rule.compiled()) for rule in RULES]
_MAX_GAP = 120
_ABBREVIATED = re.compile(r"\b(?:Corp|Inc|Ltd|Co|Bros|Jr|Sr)$")


def _subject(sentence_mentions: Sequence[Mention], text: str, sent_start: int) -> Mention | None:
    """The sentence's first mention if it opens the sentence (at most three words before it)."""
    if not sentence_mentions:
        return None
    first = sentence_mentions[0]
    if text[first.end : first.end + 1] == ":":  # a speaker's label ("Maria: ..."), not the subject
        return None
    return first if len(text[sent_start : first.start].split()) <= 3 else None


def _confidence(rule_conf: float, a: Mention, b: Mention, factor: float = 1.0) -> float:
    return round(min(1.0, rule_conf * factor * math.sqrt(min(a.confidence, b.confidence))), 3)


def _match_pair(
    text: str, a: Mention, b: Mention, subject: Mention | None, clear: bool, sent: tuple[int, int]
) -> list[tuple[str, Mention, Mention, float]]:
    """Every rule that links the earlier mention ``a`` and the later ``b``."""
    between = text[a.end : b.start]
    if between.startswith(".") and _ABBREVIATED.search(a.text):
        between = between[1:]  # "Acme Corp. is based in..." (the span dropped the period)
    if len(between) > _MAX_GAP:
        return []
    found: list[tuple[str, Mention, Mention, float]] = []
    for rule, direct, coord in _COMPILED:
        if rule.first == "possessive" and not _is_possessive(a):
            continue
        if rule.first == "real" and is_pronoun(a):
            continue
        source, target = (b, a) if rule.reverse else (a, b)
        sources, targets = RELATION_SIGNATURES[rule.type]
        if source.type not in (rule.source_types or sources) or target.type not in targets:
            continue
        if rule.target_label and target.label != rule.target_label:
            continue
        if rule.before and not re.search(rule.before, text[sent[0] : a.start], _I):
            continue
        if rule.after and not re.match(rule.after, text[b.end : sent[1]], _I):
            continue
        factor = 0.0
        if clear and direct.fullmatch(between):
            factor = 1.0
        elif coord is not None and a is subject and not rule.reverse and coord.search(between):
            factor = 0.85
        if factor:
            found.append((rule.type, source, target, _confidence(rule.confidence, a, b, factor)))
    return found


def _canonical_names(mentions: Sequence[Mention]) -> dict[str, str]:
    """Normalised key -> the longest surface form seen for it."""
    names: dict[str, str] = {}
    for m in mentions:
        if m.key and len(m.text) > len(names.get(m.key, "")):
            names[m.key] = m.text
    return names


class PatternRelationExtractor:
    """Deterministic, offline relation extraction from sentence patterns over mention spans."""

    name = "patterns"

    def extract(self, text: str, mentions: Sequence[Mention]) -> list[ExtractedRelation]:
        """Typed relations between mentions of the same sentence, in text order."""
        real = sorted((m for m in mentions if m.key), key=lambda m: (m.start, m.end))
        if not real or not text.strip():
            return []
        spans = sentence_spans(text)
        everything = sorted([*real, *_resolve_pronouns(text, spans, real)], key=lambda m: (m.start, m.end))
        names = _canonical_names(real)
        out: list[ExtractedRelation] = []
        for sent in spans:
            inside = [m for m in everything if sent[0] <= m.start and m.end <= sent[1]]
            subject = _subject(inside, text, sent[0])
            sentence = text[sent[0] : sent[1]].strip()
            for i, a in enumerate(inside):
                for j in range(i + 1, len(inside)):
                    b = inside[j]
                    if b.start < a.end:
                        continue
                    clear = all(
                        not (a.end <= m.start and m.end <= b.start) or (is_pronoun(m) and m.key == a.key)
                        for m in inside[i + 1 : j]
                    )
                    for rtype, source, target, conf in _match_pair(text, a, b, subject, clear, sent):
                        src, tgt = names.get(source.key, source.text), names.get(target.key, target.text)
                        if normalise_entity_name(src) != normalise_entity_name(tgt):
                            out.append(ExtractedRelation(src, tgt, rtype, conf, sentence))
        return dedupe_relations(out)
