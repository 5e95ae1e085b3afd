"""Explicit statements of weight, found in what people said: allergies, diet, job, home, origin,
family, pets, name and real likes/dislikes/preferences.

Each statement is rewritten in the third person about its speaker ("User is allergic to peanuts",
"Caroline loves hiking") and keeps the turn it came from, so a conclusion can cite it. Rules only:
a sentence either matches a pattern or says nothing here (reactions, questions and requests never do).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from agtos.schemas import Role, StoredTurn, Turn
from agtos.tasks.extract import casual_to_standard, statement_of, third_person
from agtos.tasks.speakers import human_names, utterances
from agtos.tasks.text import sentences

# a name or place: capitalised words ("Lisbon", "New York", "Feedzai"), not a sentence's pronoun
_NAME = r"(?!I\b)[A-Z][\w'&.-]*(?: (?:de |da |do |van |von )?[A-Z][\w'&.-]*){0,3}"
_LEAD = r"(?:^|[,;]\s*|\b(?:and|but|so|because|since)\s+)"
_I_AM = r"(?:i am|i'm|i've always been|i have always been|i've been|i was born)"
_RECENTLY = r"(?:(?:just|recently|finally|also|now|actually|even|officially) )*"
_STOP = r"(?:at|for|in|on|with|and|but|since|from|so|because|who|which|that|now|here|there)\b"
_ROLE = rf"(?:a|an) (?P<role>(?:(?!{_STOP})[a-z][\w-]*(?: |\b)){{1,4}})"
_FAMILY = (
    "wife|husband|partner|girlfriend|boyfriend|fianc[ée]e?|son|daughter|mom|mum|mother|dad|father|sister|"
    "brother|grandma|grandmother|grandpa|grandfather|aunt|uncle|cousin|best friend|roommate"
)
_PETS = "dog|cat|puppy|kitten|parrot|rabbit|bunny|hamster|horse|bird|turtle|guinea pig|pet"
_PREFERENCE_VERB = (
    r"(?:really |absolutely |totally |also |still |just |much |kind of |kinda )*"
    r"(?P<verb>prefer|love|like|enjoy|hate|dislike|adore|can't stand|don't like|do not like|would rather)"
)
#: objects that make a preference a reaction to the conversation, not about the speaker
_REACTION_OBJECT = re.compile(
    r"^(?:that|this|it|its|it's|those|these|them|you|your|ur|how|what|the way|the idea|when you|to hear|"
    r"hearing|seeing that|the sound of that)\b",
    re.I,
)
_CLAUSE_BREAK = re.compile(
    r"\s*(?:[,;:()]|\s-\s|\s—\s|\s–\s|\b(?:that's|thats|which is) why\b|"
    r"\bbut\b|\bbecause\b|\bsince\b|\bso\b|\bwhich\b|\bwhen\b)\s*",
    re.I,
)
#: "Remember that I prefer ...": what the user asks to be kept, said before the statement
_PREAMBLE = re.compile(
    r"^(?:(?:please )?(?:remember|note|keep in mind)(?: that)?|just so you know|fyi|for the record)[,:]?\s+", re.I
)
_VAGUE_OBJECT = re.compile(r"^(?:the following|the same|both|all of them|so much|a lot|too)\b|.*:$", re.I)
_CLAUSES = re.compile(r"[,;]?\s+(?:but|and|while|whereas|though)\s+(?=(?:i|my)\b)", re.I)
MAX_WORDS = 14  # one profile line


@dataclass(frozen=True)
class Statement:
    """What one sentence of a person states, third person, with where it was said."""

    text: str
    category: str  # allergy | diet | job | home | origin | family | pet | name | preference
    confidence: float
    episode_id: str
    turn_id: str  # "<episode id>.t<position>"


Rule = tuple[str, re.Pattern[str], Callable[[re.Match[str], str], str | None], float]


def _clip(text: str, strict: bool = False) -> str:
    """An object phrase up to its first clause break (``strict``: any; else one whose tail is long
    enough to be a clause, so "metric units, always" stays whole)."""
    text = text.strip(" .!,;")
    for m in _CLAUSE_BREAK.finditer(text):
        if strict or len(text[m.end() :].split()) >= 3 or m.group().strip() in ("(", ")", ";", ":"):
            return text[: m.start()].strip(" .!,;")
    return text


def _object(m: re.Match[str], group: str = "x") -> str | None:
    found = _clip(m.group(group), strict=True)
    return found if found and len(found.split()) <= 8 else None


def _allergy(m: re.Match[str], who: str) -> str | None:
    what = _object(m)
    return f"{who} is allergic to {what}" if what else None


def _allergy_noun(m: re.Match[str], who: str) -> str | None:
    return f"{who} is allergic to {m.group('x').lower()}"


def _diet(m: re.Match[str], who: str) -> str | None:
    return f"{who} is {m.group('x').lower()}"


def _no_eat(m: re.Match[str], who: str) -> str | None:
    what = _object(m)
    return f"{who} does not eat {what}" if what else None


_ABBREVIATION_END = re.compile(r"\b(?:Inc|Co|Ltd|Corp|Bros|Jr|Sr|Dept|Univ|[A-Z])\.$")


def _organisation(name: str | None) -> str | None:
    """A name read up to a sentence's end without that full stop ("Mercy Hospital." -> "Mercy Hospital"),
    an abbreviation's kept ("Acme Inc.")."""
    if name and name.endswith(".") and not _ABBREVIATION_END.search(name):
        return name.rstrip(".")
    return name


def _job(m: re.Match[str], who: str) -> str | None:
    org = _organisation(m.groupdict().get("org"))
    role = m.groupdict().get("role") or m.groupdict().get("role2")
    if org and role:
        return f"{who} works at {org} as {_article(role)}"
    if org:
        return f"{who} works at {org}"
    return f"{who} works as {_article(role)}" if role else None


def _article(role: str) -> str:
    role = _clip(role, strict=True).strip()
    return f"{'an' if role[:1].lower() in 'aeiou' else 'a'} {role}"


def _home(m: re.Match[str], who: str) -> str | None:
    return f"{who} lives in {m.group('place').rstrip('.')}"


def _origin(m: re.Match[str], who: str) -> str | None:
    return f"{who} is from {m.group('place').rstrip('.')}"


def _relative(m: re.Match[str], who: str) -> str | None:
    return f"{_possessive(who)} {m.group('rel').lower()} is {m.group('name')}"


def _pet(m: re.Match[str], who: str) -> str | None:
    return f"{who} has a {m.group('kind').lower()} named {m.group('name')}"


def _name(m: re.Match[str], who: str) -> str | None:
    return f"{_possessive(who)} name is {m.group('name')}"


def _possessive(who: str) -> str:
    return f"{who}'" if who.endswith("s") else f"{who}'s"


_CALLED = r",? (?:is called |is named |named |called |whose name is )?"
_FIRST_NAME = r"(?P<name>(?!I\b)[A-Z][a-z]+)\b"
_I_OR_WE = r"\b(?:[Ii]|[Ww]e)"
_ROLE_TAIL = rf"(?: as (?:a|an) (?P<role2>(?:(?!{_STOP})[a-z][\w-]*(?: |\b)){{1,4}}))?"
_DIETS = "vegetarian|vegan|pescatarian|gluten[- ]free|lactose[- ]intolerant|diabetic|celiac|coeliac"


def _rule(
    category: str, pattern: str, build: Callable[[re.Match[str], str], str | None], confidence: float, flags: int = 0
) -> Rule:
    return category, re.compile(pattern, flags), build, confidence


RULES: list[Rule] = [
    _rule("allergy", rf"\b{_I_AM} {_RECENTLY}(?:severely |very |quite |deathly )?allergic to (?P<x>[^.!?]+)",
          _allergy, 0.95, re.I),
    _rule("allergy", r"\b(?:i have|i've got|i've) an? (?:severe |bad |mild )?(?P<x>[a-z]+(?: [a-z]+)?) allergy",
          _allergy_noun, 0.95, re.I),
    _rule("diet", rf"\b{_I_AM} {_RECENTLY}(?:an? )?(?:strict )?(?P<x>{_DIETS})\b", _diet, 0.9, re.I),
    _rule("diet", r"\bi (?:don't|do not|never|can't|cannot) eat (?P<x>[^.!?]+)", _no_eat, 0.85, re.I),
    _rule("job", rf"{_I_OR_WE} {_RECENTLY}(?:started|got|landed|accepted|took|have|began) (?:a |my |the )?(?:new )?"
          rf"(?:job|position|role) (?:at|with) (?P<org>{_NAME})(?: as {_ROLE})?", _job, 0.9),
    _rule("job", rf"\b[Ii] {_RECENTLY}(?:work|am working|'m working) (?:as {_ROLE} )?(?:at|for) (?P<org>{_NAME})"
          + _ROLE_TAIL, _job, 0.9),
    _rule("job", rf"\b(?:I am|I'm|i am|i'm) {_RECENTLY}{_ROLE} (?:at|for) (?P<org>{_NAME})", _job, 0.85),
    _rule("job", rf"\b[Ii] {_RECENTLY}work as {_ROLE}\b", _job, 0.85),
    _rule("job", rf"\b[Mm]y (?P<rel>boss|manager|supervisor){_CALLED}{_FIRST_NAME}", _relative, 0.85),
    _rule("home", rf"{_I_OR_WE} {_RECENTLY}(?:moved|relocated) (?:back )?(?:here )?to (?P<place>{_NAME})", _home, 0.85),
    _rule("home", rf"{_I_OR_WE} {_RECENTLY}(?:live|am living|'m living|are living|'re living) in (?P<place>{_NAME})",
          _home, 0.9),
    _rule("home", rf"{_I_OR_WE} (?:am|'m|are|'re) (?:now )?based in (?P<place>{_NAME})", _home, 0.85),
    _rule("origin", rf"\b(?:I am|I'm|i am|i'm) (?:originally )?from (?P<place>{_NAME})", _origin, 0.85),
    _rule("family", rf"\b[Mm]y (?P<rel>{_FAMILY}){_CALLED}{_FIRST_NAME}", _relative, 0.9),
    _rule("pet", rf"\b(?:[Mm]y|[Oo]ur) (?P<kind>{_PETS}){_CALLED}{_FIRST_NAME}", _pet, 0.9),
    _rule("pet", rf"\b(?:i|we) (?:have|got|adopted) an? (?P<kind>{_PETS}) (?:named|called) (?P<name>[A-Z][a-z]+)",
          _pet, 0.9, re.I),
    _rule("name", r"\b[Mm]y name is (?P<name>[A-Z][\w'-]+)", _name, 0.95),
]  # fmt: skip
_PREFERENCE = re.compile(
    rf"^(?:(?:honestly|personally|generally|usually|really),? )?(?:i|I) {_PREFERENCE_VERB} (?P<x>.+)$|"
    r"^my (?:absolute |all-time )?favou?rite (?P<fav>[\w ]{2,30}?) (?:is|are) (?P<favx>.+)$|"
    r"^(?:i|I)(?:'m| am) (?:a )?(?:huge |big |real )?fan of (?P<fan>.+)$",
    re.I,
)


def _preference(text: str, who: str) -> str | None:
    """A like, dislike or preference of the speaker, one line, else None."""
    m = _PREFERENCE.match(text)
    if m is None:
        return None
    obj = m.group("x") or m.group("favx") or m.group("fan")
    if _REACTION_OBJECT.match(obj.strip()) or _VAGUE_OBJECT.match(obj.strip()):
        return None
    head = text[: m.start("x")] if m.group("x") else text[: m.start("favx") if m.group("favx") else m.start("fan")]
    line = third_person(head + _clip(obj) if len(obj.split()) > 3 else text, None if who == "User" else who)
    words = line.split()
    return line if 3 <= len(words) <= MAX_WORDS and "?" not in line else None


def statements_of(sentence: str, who: str) -> list[tuple[str, str, float]]:
    """(text, category, confidence) of each weighty thing one sentence of ``who`` states."""
    text = statement_of(sentence)
    if text is None:
        return []
    text = _PREAMBLE.sub("", casual_to_standard(text))
    found = []
    taken: dict[str, list[tuple[int, int]]] = {}  # per category, the spans a rule already read
    for category, pattern, build, confidence in RULES:
        for m in pattern.finditer(text):
            spans = taken.setdefault(category, [])
            if any(m.start() < end and start < m.end() for start, end in spans):
                continue  # a more specific rule of the category read this part already
            line = build(m, who)
            if line and len(line.split()) <= MAX_WORDS + 4:
                spans.append(m.span())
                found.append((line, category, confidence))
    if not found:
        for clause in _CLAUSES.split(text):
            line = _preference(clause, who)
            if line:
                found.append((line, "preference", 0.85))
    return found


def turn_statements(turns: list[StoredTurn]) -> list[Statement]:
    """Every weighty statement the people of one episode made (the user, or each named speaker).

    Remembered per process for the last ``STATEMENTS_CACHED`` turn lists (keyed by a digest of every
    field read): the Dreamer reads the turns of a user's last 50 episodes at each session end, and
    an episode's turns do not change."""
    found: tuple[Statement, ...] = _remembered(_CACHE, turns, lambda: tuple(_turn_statements(turns)))
    return list(found)


def between_people(turns: list[StoredTurn]) -> bool:
    """Whether these turns are a conversation of two or more named people; remembered like
    :func:`turn_statements` (the Dreamer asks it of every episode of its window at each end)."""
    return _remembered(_PEOPLE, turns, lambda: len(human_names(utterances([_as_turn(t) for t in turns]))) >= 2)


STATEMENTS_CACHED = 4096
_CACHE: OrderedDict[bytes, tuple[Statement, ...]] = OrderedDict()
_PEOPLE: OrderedDict[bytes, bool] = OrderedDict()
_CACHE_LOCK = threading.Lock()
T = TypeVar("T")


def _remembered(cache: OrderedDict[bytes, T], turns: list[StoredTurn], compute: Callable[[], T]) -> T:
    """``compute()`` for ``turns``, kept in ``cache`` (LRU of ``STATEMENTS_CACHED`` turn lists)."""
    key = hashlib.blake2b(
        json.dumps([[t.episode_id, t.position, t.role, t.name, t.timestamp, t.content] for t in turns]).encode(),
        digest_size=16,
    ).digest()
    with _CACHE_LOCK:
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
    value = compute()
    with _CACHE_LOCK:
        cache[key] = value
        if len(cache) > STATEMENTS_CACHED:
            cache.popitem(last=False)
    return value


def _as_turn(t: StoredTurn) -> Turn:
    return Turn(role=t.role, content=t.content, timestamp=t.timestamp, name=t.name)


def _turn_statements(turns: list[StoredTurn]) -> list[Statement]:
    ordered = sorted(turns, key=lambda t: t.position)
    said = utterances([_as_turn(t) for t in ordered])
    out: list[Statement] = []
    for stored, u in zip(ordered, said, strict=True):
        if not u.human or stored.role not in (Role.user.value, Role.assistant.value):
            continue
        who = u.speaker or "User"
        for sentence in sentences(u.text):
            for line, category, confidence in statements_of(sentence, who):
                out.append(
                    Statement(line, category, confidence, stored.episode_id, f"{stored.episode_id}.t{stored.position}")
                )
    return out
