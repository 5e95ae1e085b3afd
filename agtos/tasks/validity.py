"""Facts that change over time (pure): what a fact claims about whom, and which later fact ends it.

A memory's text is third person ("User lives in London", "Maria works at Feedzai as a data
engineer"). :func:`claims_of` reads the *claims* it makes: a subject, an attribute (``lives-in``,
``works-at``, ``job``, ``relationship``, ``diet``, ``car``) and its value, or a change that ends an
old value ("User left Feedzai", "User migrated the blog from WordPress to Ghost"). A later fact
*supersedes* an earlier one of the same subject when it gives the same attribute another value,
or ends a value the earlier one states (:func:`supersedes`). Nothing is deleted: the older fact
gets ``valid_until`` and ``superseded_by`` and is shown as "until March 2024".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agtos.tasks.dates import turn_datetime
from agtos.tasks.text import content_words, normalise

_ADVERBS = r"(?:(?:now|currently|still|also|just|recently|finally|actually|officially|already|since|then)\s+)*"
_NAME = r"[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)?"
_SUBJECT = re.compile(
    rf"^\s*(?i:the\s+)?((?i:user|we|i)|{_NAME})"
    r"(?i:'s\s+(?:household|family)|\s+and\s+(?:the\s+)?(?:user's\s+)?\w+)?\s+"
)
_OWNER = re.compile(rf"^\s*(?i:the\s+)?((?i:user|we|i|our|my)|{_NAME})(?:'s|\s)")
_VALUE = r"(?:the\s+|a\s+|an\s+)?([^,.;:!?()]{1,80})"
#: where a value ends: "London with the user's partner" → "London"
_VALUE_END = re.compile(
    r"\s+(?:with|as|since|for|last|this|next|because|and|but|about|after|before|until|when|where|which|who|"
    r"so|to|from|on|at|in)\b.*$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class _Pattern:
    attribute: str | None  # None: a change of anything ("from A to B")
    regex: re.Pattern[str]
    ends: bool = False  # the value it captures is ended ("left X"), not stated


def _p(attribute: str | None, pattern: str, ends: bool = False) -> _Pattern:
    return _Pattern(attribute, re.compile(_ADVERBS + pattern, re.IGNORECASE), ends)


_IS = r"(?:is|are)\s+(?:(?:now|currently|still|also)\s+)?"
_HAS = rf"(?:(?:has|have|had)\s+(?:been\s+)?|{_IS})?"
_PATTERNS: tuple[_Pattern, ...] = (
    _p("lives-in", _HAS + r"(?:moved|moving|relocated|relocating)\s+(?:back\s+)?from\s+" + _VALUE, ends=True),
    _p(
        "lives-in",
        _HAS + r"(?:lives?|living|resides?|residing|based|moved|moving|relocated|relocating|settled)"
        r"(?:\s+back)?(?:\s+from\s+[^,.;]+?)?\s+(?:in|to|into)\s+" + _VALUE,
    ),
    _p(
        "works-at",
        r"(?:left|quit|quits|resigned\s+from|was\s+(?:laid\s+off|fired|let\s+go)\s+(?:from|by))\s+" + _VALUE,
        ends=True,
    ),
    _p("works-at", r"(?:(?:has|have)\s+)?(?:stopped|stops)\s+working\s+(?:at|for)\s+" + _VALUE, ends=True),
    _p(
        "works-at",
        rf"(?:works?|{_IS}working|has\s+been\s+working|started\s+working|started\s+a\s+(?:new\s+)?job|"
        r"got\s+a\s+(?:new\s+)?job|is\s+employed|was\s+hired|has\s+joined|joined|is\s+interning|interns)"
        r"(?:[^,.;]*?)\s+(?:at|for|by|with)\s+(?!home\b)" + _VALUE,
    ),
    _p(
        "job",
        rf"(?:works?\s+(?:part-time\s+|full-time\s+)?as|{_IS}working\s+as|is\s+employed\s+as|got\s+a\s+(?:new\s+)?"
        r"job\s+as|started\s+(?:a\s+new\s+job\s+)?as|became|is\s+now)\s+(?:a|an)\s+" + _VALUE,
    ),
    _p("relationship", rf"(?:{_IS}|got\s+)(married|engaged|divorced|separated|single|widowed)\b()"),
    _p(
        "relationship",
        r"(?:is\s+)?(?:dating|seeing|married\s+to|engaged\s+to|in\s+a\s+relationship\s+with)\s+" + _VALUE,
    ),
    _p("relationship", r"(?:broke|has\s+broken)\s+up\s+with\s+" + _VALUE, ends=True),
    _p(
        "diet",
        rf"(?:{_IS}|went\s+|became\s+|has\s+become\s+|has\s+gone\s+)(?:a\s+)?(vegan|vegetarian|pescatarian|carnivore)\b()",
    ),
    _p("car", r"(?:drives|has\s+leased|leases|bought)\s+(?:a|an|the)\s+(?:new\s+|leased\s+|used\s+)?" + _VALUE),
    _p(
        None,
        r"(?:\w+\s+)?(?:moved|switched|migrated|changed|went|upgraded|converted|transferred|swapped|pushed|"
        r"moved\s+over)\b[^.;]*?\bfrom\s+" + _VALUE,
        ends=True,
    ),
    _p(None, r"(?:replaced|swapped|sold|gave\s+up|ditched|dropped|cancelled|canceled)\s+" + _VALUE, ends=True),
)

ATTRIBUTES = tuple(dict.fromkeys(p.attribute for p in _PATTERNS if p.attribute))  # the slots a fact can state


@dataclass(frozen=True)
class Claim:
    """What a fact says: ``subject``'s ``attribute`` is ``value`` (``ends``: the value is over)."""

    subject: str
    attribute: str | None
    value: str
    ends: bool = False


def _subject(text: str) -> tuple[str, str] | None:
    """The fact's subject (``user`` for the user, we, I) and the rest of the sentence."""
    found = _SUBJECT.match(text)
    if found is None:
        return None
    with_user = re.search(r"\band\s+(?:i|(?:the\s+)?user)\s*$", found.group(0), re.IGNORECASE)
    return ("user" if with_user else _person(found.group(1))), text[found.end() :]


def _person(name: str) -> str:
    return "user" if name.lower() in ("user", "we", "i", "our", "my") else name.lower()


def _owner(text: str) -> str | None:
    """Whose fact it is, possessives included ("The user's blog ..." → ``user``)."""
    found = _OWNER.match(text)
    return None if found is None else _person(found.group(1))


def _value(raw: str) -> str:
    value = _VALUE_END.sub("", raw.strip())
    return normalise(value)


def claims_of(text: str) -> list[Claim]:
    """Every claim of a fact's first sentence, in pattern order (none for facts of no known shape)."""
    head = _subject(text)
    if head is None:
        return []
    subject, rest = head
    out: list[Claim] = []
    for pattern in _PATTERNS:
        found = pattern.regex.match(rest)
        if found is None:
            continue
        raw = found.group(1)
        if pattern.ends and pattern.attribute in (None, "lives-in"):
            raw = re.split(r"\s+to\s+", raw, maxsplit=1, flags=re.IGNORECASE)[0]  # "from A to B": A ends
        value = _value(raw)
        if value and not any(c.attribute == pattern.attribute and c.ends == pattern.ends for c in out):
            out.append(Claim(subject, pattern.attribute, value, pattern.ends))
    return out


def _mentions(text: str, value: str) -> bool:
    """Whether ``text`` names ``value`` (whole words, case and punctuation ignored)."""
    return f" {value} " in f" {normalise(text)} "


def supersedes(new: list[Claim], old_text: str, old: list[Claim]) -> bool:
    """Whether a fact with claims ``new`` ends an earlier fact (its text and claims): same subject,
    and either the same attribute with another value, or an ended value the earlier fact states."""
    for claim in new:
        for before in old:
            if before.subject != claim.subject or before.ends:
                continue
            if claim.ends:
                if (claim.attribute in (None, before.attribute)) and _mentions(old_text, claim.value):
                    return True
            elif claim.attribute is not None and claim.attribute == before.attribute and claim.value != before.value:
                return True
        generic = claim.ends and claim.attribute is None and not old
        if generic and _owner(old_text) == claim.subject and _mentions(old_text, claim.value):
            return True  # "migrated the blog from WordPress to Ghost" ends "blog runs on WordPress"
    return False


def slot_keys(claims: list[Claim]) -> list[str]:
    """Index keys of a fact's stated attributes (``subject|attribute``), for finding earlier ones."""
    return list(dict.fromkeys(f"{c.subject}|{c.attribute}" for c in claims if c.attribute and not c.ends))


def superseded_slot_keys(claims: list[Claim]) -> list[str]:
    """Index keys of the earlier facts a fact may close: its stated attributes (another value) and those
    it ends ("left Acme": ``user|works-at``; a change of anything, "sold the Tesla": every attribute of the
    subject), where they are found however many other facts name the value."""
    ended = [(c.subject, a) for c in claims if c.ends for a in ([c.attribute] if c.attribute else ATTRIBUTES)]
    return list(dict.fromkeys([*slot_keys(claims), *(f"{subject}|{attribute}" for subject, attribute in ended)]))


def ended_values(claims: list[Claim]) -> list[str]:
    """Values a fact ends: the words to look for in earlier facts."""
    return list(dict.fromkeys(c.value for c in claims if c.ends))


def until_label(valid_until: int, utc_offset: int | None = None) -> str:
    """``until March 2024``: how a superseded fact is labelled in a context, by the month where the
    fact that ended it was said (``utc_offset`` minutes east of UTC; UTC without one)."""
    return f"until {turn_datetime(valid_until, utc_offset):%B %Y}"


_PAST = re.compile(
    r"\b(before|used to|previous(ly)?|former(ly)?|originally|at first|earlier|prior|in the past|old|first|"
    r"did i (live|work)|was i)\b",
    re.IGNORECASE,
)
_SUBJECT_WORDS = frozenset({"user", "user's", "users"})
STEM_CHARS = 4  # words match when one begins with the other and the shorter has at least this many letters


def asks_about_the_past(query: str) -> bool:
    """Whether a question asks how things were ("where did I live before?"), not how they are."""
    return bool(_PAST.search(query))


def about(query: str, text: str) -> bool:
    """Whether a fact is about what the question asks: a content word in common, a word matching
    another it begins ("blog" / "blogging"); the subject word "user" does not count."""
    asked = set(content_words(query)) - _SUBJECT_WORDS
    said = set(content_words(text)) - _SUBJECT_WORDS
    return any(
        a == b or (min(len(a), len(b)) >= STEM_CHARS and (a.startswith(b) or b.startswith(a)))
        for a in asked
        for b in said
    )


def after_replacements(order: list[str], replaced_by: dict[str, str]) -> list[str]:
    """``order`` with each item that ``replaced_by`` maps to a later-ranked item moved just below
    it (an episode whose fact a later episode superseded goes below that episode)."""
    out = list(order)
    for old, new in replaced_by.items():
        if old in out and new in out and out.index(old) < out.index(new):
            out.remove(old)
            out.insert(out.index(new) + 1, old)
    return out
