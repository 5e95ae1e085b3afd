"""First-person sentences rewritten in the third person, naming the speaker: "I prefer metric units."
-> "User prefers metric units"; between two named people "you" becomes the other one's name."""

from __future__ import annotations

import re
from dataclasses import dataclass

# A short time or discourse lead before the subject: "Yesterday I ...", "This morning, we ...".
_TIME = (
    r"(?:yesterday|today|tonight|tomorrow|recently|lately|earlier|finally|eventually|then|now|also|still|"
    r"(?:this|last|next|on|in|over|during|earlier|later|every)\s+[\w-]+(?:\s+(?:morning|afternoon|evening|night))?)"
)
LEAD = rf"^((?:{_TIME},?\s+){{0,3}})"
# "-ly" words that are verbs, not adverbs: "I fly to Lisbon" is not the adverb "fly" before the verb "to"
_LY_VERBS = r"(?:fly|apply|reply|rely|supply|comply|imply|multiply|ally|rally|bully|tally|sully)"
_ADVERBS = (
    rf"((?:(?!{_LY_VERBS} )\w+ly |just |now |still |also |never |always |often |even |already |ever |finally |kinda )*)"
)
_VERB = r"(\w+(?:n't)?)"
_SUBJECT_VERB = re.compile(LEAD + rf"(i|we) {_ADVERBS}{_VERB}", re.I)
_CLAUSE_I = re.compile(rf"\b(and|but|so|because) i {_ADVERBS}(\w+)\b(?!')", re.I)
_INNER_I = re.compile(rf"\bi {_ADVERBS}{_VERB}", re.I)
_CONTRACTED = (("'m", "is"), ("'ve", "has"), ("'d", "would"), ("'ll", "will"))
_IRREGULAR = {"am": "is", "have": "has", "do": "does", "go": "goes", "don't": "doesn't", "haven't": "hasn't"}
_NO_S = frozenset(
    """can could will would shall should may might must did had went got bought began became came made met
    ran saw sold spent took told thought wrote left lost found kept felt paid said sent put ate drank drove
    flew gave grew heard held knew led meant rode rang rose sang sat slept spoke stood stole swam taught
    threw understood woke won wore broke brought built caught chose dealt drew fed fell fought forgot froze
    hid hurt quit was were cannot lent bent burnt dreamt learnt spelt knelt leapt slid shot swept wept bled
    bred sped fled lit bit hung dug stuck struck stung swung sank shrank sprang stank bore swore tore forgave
    forbade overcame withdrew sought fought bound ground wound shook mistook undertook overtook rebuilt
    spun spat strode strove slung clung flung""".split()
)


@dataclass(frozen=True)
class _Person:
    """How a speaker is written in the third person."""

    subject: str  # "User" / "Gina"
    group: str  # "User's household" / "Gina and others"
    group_plural: bool
    possessive: str  # "the user's" / "Gina's"
    obj: str  # "the user" / "Gina"

    @classmethod
    def of(cls, name: str | None) -> _Person:
        if name is None:
            return cls("User", "User's household", False, "the user's", "the user")
        return cls(name, f"{name} and others", True, f"{name}'s", name)


def _third_person_verb(verb: str) -> str:
    lowered = verb.lower()
    if lowered in _IRREGULAR:
        return _IRREGULAR[lowered]
    if lowered in _NO_S or lowered.endswith(("ed", "n't")):
        return verb
    if lowered.endswith(("s", "sh", "ch", "x", "o")):
        return verb + "es"
    if lowered.endswith("y") and len(lowered) > 1 and lowered[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _first_person(p: _Person) -> list[tuple[re.Pattern[str], str]]:
    group_is, group_has = ("are", "have") if p.group_plural else ("is", "has")
    return [
        (re.compile(LEAD + pattern, re.I), rf"\g<1>{repl}")
        for pattern, repl in (
            (r"i am\b", f"{p.subject} is"),
            (r"i'm\b", f"{p.subject} is"),
            (r"i've\b", f"{p.subject} has"),
            (r"i'd rather\b", f"{p.subject} would rather"),
            (r"i'd\b", f"{p.subject} would"),
            (r"i'll\b", f"{p.subject} will"),
            (r"i (?:do not|don't) (\w+)", rf"{p.subject} does not \2"),
            (r"i (?:can't|cannot) stand\b", f"{p.subject} can't stand"),
            (r"i was\b", f"{p.subject} was"),
            (r"i have\b", f"{p.subject} has"),
            (r"we've\b", f"{p.group} {group_has}"),
            (r"we're\b", f"{p.group} {group_is}"),
        )
    ]


def _possessives(text: str, p: _Person, other: str | None) -> str:
    """my/me/myself (and, between two people, you/your) -> names or their/them."""
    if p.subject == "User":
        text = re.sub(r"\b(?:my|our)\b", p.possessive, text, flags=re.I)
        text = re.sub(r"\bme\b", p.obj, text, flags=re.I)
    else:
        named = p.subject in text
        text = re.sub(r"\bmy\b", "their" if named else p.possessive, text, count=1, flags=re.I)
        text = re.sub(r"\bmy\b", "their", text, flags=re.I)
        text = re.sub(r"\bme\b", "them" if p.subject in text else p.obj, text, count=1, flags=re.I)
        text = re.sub(r"\bme\b", "them", text, flags=re.I)
        text = re.sub(r"\bour\b", "their" if p.subject in text else p.possessive, text, count=1, flags=re.I)
        text = re.sub(r"\b(our|ours)\b", "their", text, flags=re.I)
        text = re.sub(r"\bwe\b", p.group, text, flags=re.I)
        text = re.sub(r"\bus\b", "them", text)
    text = re.sub(r"\bmyself\b", "themselves", text, flags=re.I)
    if other:
        for pattern, repl in (
            (r"\byou(?:'re| are)\b", f"{other} is"),
            (r"\byou(?:'ve| have)\b", f"{other} has"),
            (r"\byou were\b", f"{other} was"),
            (r"\byou (?:don't|do not)\b", f"{other} does not"),
            (r"\byou haven't\b", f"{other} hasn't"),
            (r"\byou aren't\b", f"{other} isn't"),
            (r"\byours?elf\b", other),
            (r"\byours?\b", f"{other}'s"),
            (r"\byou\b", other),
        ):
            text = re.sub(pattern, repl, text, flags=re.I)
            text = text.replace(f"{other}'s's", f"{other}'s")
    return text


def third_person(sentence: str, speaker: str | None = None, other: str | None = None) -> str:
    """'I prefer metric units.' -> 'User prefers metric units' ('Gina prefers ...' for ``speaker``
    "Gina"; with ``other``, the one person spoken to, "you"/"your" become that name)."""
    p = _Person.of(speaker)
    text = sentence.strip().rstrip(".!")
    text = re.sub(r"^(actually|no|well|also|oh|so),?\s+", "", text, flags=re.I)
    for pattern, repl in _first_person(p):
        if pattern.search(text):
            text = pattern.sub(repl, text, count=1)
            break
    else:
        text = _SUBJECT_VERB.sub(lambda m: _conjugate(m, p), text, count=1)
    text = re.sub(r"\b(and|but|so|because) i (?:do not|don't) (\w+)", r"\1 does not \2", text, flags=re.I)
    text = _CLAUSE_I.sub(_conjugate_clause, text)
    for contraction, verb in _CONTRACTED:
        text = re.sub(rf"\bi{contraction}\b", f"{p.subject} {verb}", text, flags=re.I)
    text = _INNER_I.sub(lambda m: f"{p.subject} {m.group(1)}{_third_person_verb(m.group(2))}", text)
    text = re.sub(r"\bI\b", p.subject, text)
    text = _possessives(text, p, other)
    if text.lower().startswith("please "):
        text = f"{p.subject} asks: " + text[7:]
    elif text.lower().startswith(f"call {p.obj.lower()}"):
        text = f"{p.subject} wants to be called" + text[len(f"call {p.obj}") :]
    elif text.lower().startswith(("the user's favourite", "the user's favorite")):
        text = "User's" + text[len("the user's") :]
    return text[:1].upper() + text[1:]


def _conjugate(match: re.Match[str], p: _Person) -> str:
    lead, verb = match.group(1), match.group(4)
    if match.group(2).lower() == "we":
        return f"{lead}{p.group} {match.group(3)}{verb}"
    return f"{lead}{p.subject} {match.group(3)}{_third_person_verb(verb)}"


def _conjugate_clause(match: re.Match[str]) -> str:
    """'… and I prefer tea' -> '… and prefers tea' (the subject is the speaker already)."""
    return f"{match.group(1)} {match.group(2)}{_third_person_verb(match.group(3))}"
