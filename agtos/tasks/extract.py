"""Rule-based extraction of facts, preferences, corrections, keywords and topic from turns."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from agtos.schemas import Role, Turn
from agtos.tasks.text import STOPWORDS, content_words, sentences, words

PREFERENCE_RE = re.compile(
    r"\b(i ([a-z]+ly |much |always |still )?(prefer|like|love|enjoy|hate|dislike|can't stand|"
    r"don't like|do not like|want you to|would rather)|i'd rather|my favou?rite|"
    r"please (always|never|don't|do not)|call me|i always|i never)\b",
    re.I,
)
FACT_RE = re.compile(
    r"\b(i am|i'm|i work|i live|i have|i've|i was|i moved|i study|i own|i use|i go|i eat|i just|i now|"
    r"we've|we're|we have|we moved|we live|we bought|we got|we are now|our (new |current )?\w+ (is|are)|"
    r"my (name|wife|husband|partner|son|daughter|kids?|dog|cat|job|birthday|email|phone|address|"
    r"team|boss|company|manager|project|home|city|age)\b)",
    re.I,
)
CORRECTION_RE = re.compile(
    r"^(no[,.!]|nope\b|actually[, ]|that's (not|wrong|incorrect)|that is (not|wrong|incorrect)|"
    r"wrong\b|correction\b|i (said|meant)\b|not .{1,40}, but\b|you got (it|that) wrong)"
    r"|\b(i meant|that's not what i|i didn't say|let me correct)\b",
    re.I,
)
TASK_DONE_RE = re.compile(
    r"\b(done|completed|finished|booked|scheduled|sent|created|saved|ordered|set (a|the|an) |"
    r"applied edit|committed|commit [0-9a-f]{7,40}|fixed|deployed|merged|tests? pass(ed|es)?|"
    r"i've (added|booked|scheduled|sent|created|set|updated|ordered)|task (is )?complete)\b",
    re.I,
)
SMALL_TALK_WORDS = frozenset(
    """hi hello hey yo good morning afternoon evening night thanks thank you so much ok okay cool great
    bye goodbye bye-bye see later cheers nice got it sure awesome perfect have a day there all the
    best talk soon again""".split()
)

TOPIC_LEXICON: dict[str, frozenset[str]] = {
    topic: frozenset(terms.split())
    for topic, terms in {
        "weather": "weather forecast rain temperature sunny snow umbrella humid wind cold warm",
        "travel": "flight hotel trip travel airport booking vacation visa train passport itinerary",
        "food": "restaurant recipe food dinner lunch breakfast vegetarian vegan cook cooking meal eat",
        "work": "meeting deadline office colleague manager job project report client presentation",
        "coding": "code python bug function api deploy git javascript typescript rust database test",
        "health": "doctor health exercise sleep workout run running gym medication diet allergy",
        "finance": "money budget pay invoice bank price cost salary tax investment expense",
        "music": "music song playlist album spotify band concert artist",
        "shopping": "buy order shop shopping delivery purchase cart store",
        "schedule": "calendar schedule appointment remind reminder alarm tomorrow morning tonight",
        "family": "family wife husband son daughter kids mom dad mother father sister brother",
        "entertainment": "movie film show series game book podcast netflix",
    }.items()
}

_PROPER_NOUN = re.compile(r"\b([A-Z][a-z]+(?:\s+[A-Z][a-z]+)+)\b")
_FIRST_PERSON = [
    (re.compile(r"^(?:and |but |so )?i am\b", re.I), "User is"),
    (re.compile(r"^(?:and |but |so )?i'm\b", re.I), "User is"),
    (re.compile(r"^(?:and |but |so )?i've\b", re.I), "User has"),
    (re.compile(r"^(?:and |but |so )?i'd rather\b", re.I), "User would rather"),
    (re.compile(r"^(?:and |but |so )?i (do not|don't) (\w+)", re.I), r"User does not \2"),
    (re.compile(r"^(?:and |but |so )?i (can't|cannot) stand\b", re.I), "User can't stand"),
    (re.compile(r"^(?:and |but |so )?i was\b", re.I), "User was"),
    (re.compile(r"^(?:and |but |so )?i have\b", re.I), "User has"),
    (re.compile(r"^(?:and |but |so )?we've\b", re.I), "User's household has"),
    (re.compile(r"^(?:and |but |so )?we're\b", re.I), "User's household is"),
]
_SUBJECT_VERB = re.compile(
    r"^(?:and |but |so )?(i|we) ((?:\w+ly |just |now |still |also |never |always |often )*)(\w+)", re.I
)
_CLAUSE_I = re.compile(
    r"\b(and|but|so|because) i ((?:\w+ly |just |now |still |also |never |always |often )*)(\w+)\b(?!')", re.I
)
_IRREGULAR = {"am": "is", "have": "has", "do": "does", "go": "goes"}
_NO_S = frozenset(
    "can could will would shall should may might must did had went got bought began became came made met "
    "ran saw sold spent took told thought wrote left lost found kept felt paid said sent put".split()
)


@dataclass
class Extraction:
    """What one conversation yielded."""

    facts: list[str] = field(default_factory=list)
    preferences: list[str] = field(default_factory=list)
    corrections: list[str] = field(default_factory=list)
    task_outcomes: list[str] = field(default_factory=list)
    keywords: list[str] = field(default_factory=list)
    topic: str = "general"


def _third_person_verb(verb: str) -> str:
    lowered = verb.lower()
    if lowered in _NO_S or lowered.endswith("ed"):
        return verb
    if lowered.endswith(("s", "sh", "ch", "x", "o")):
        return verb + "es"
    if lowered.endswith("y") and len(lowered) > 1 and lowered[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def _conjugate(match: re.Match[str]) -> str:
    subject = "User" if match.group(1).lower() == "i" else "User's household"
    verb = match.group(3)
    if subject == "User's household":
        return f"{subject} {match.group(2)}{verb}"
    return f"{subject} {match.group(2)}{_third_person_verb(verb)}"


def _conjugate_clause(match: re.Match[str]) -> str:
    """'… and I prefer tea' -> '… and prefers tea' (the subject is the user already)."""
    verb = match.group(3)
    conjugated = _IRREGULAR.get(verb.lower()) or _third_person_verb(verb)
    return f"{match.group(1)} {match.group(2)}{conjugated}"


def third_person(sentence: str) -> str:
    """'I prefer metric units.' -> 'User prefers metric units'."""
    text = sentence.strip().rstrip(".!")
    text = re.sub(r"^(actually|no|well|also|oh|so),?\s+", "", text, flags=re.I)
    for pattern, repl in _FIRST_PERSON:
        if pattern.search(text):
            text = pattern.sub(repl, text, count=1)
            break
    else:
        text = _SUBJECT_VERB.sub(_conjugate, text, count=1)
    text = re.sub(r"\b(and|but|so|because) i (?:do not|don't) (\w+)", r"\1 does not \2", text, flags=re.I)
    text = _CLAUSE_I.sub(_conjugate_clause, text)
    text = re.sub(r"\bmy\b", "the user's", text, flags=re.I)
    text = re.sub(r"\bme\b", "the user", text, flags=re.I)
    text = re.sub(r"\bmyself\b", "themselves", text, flags=re.I)
    if text.lower().startswith("please "):
        text = "User asks: " + text[7:]
    elif text.lower().startswith("call the user"):
        text = "User wants to be called" + text[len("call the user") :]
    elif text.lower().startswith("the user's favourite") or text.lower().startswith("the user's favorite"):
        text = "User's" + text[len("the user's") :]
    return text[:1].upper() + text[1:]


def is_trivial(text: str) -> bool:
    """Greetings, thanks and acknowledgements only ("Hi!", "thanks, bye", "ok cool")."""
    tokens = words(text)
    return bool(tokens) and all(t in SMALL_TALK_WORDS for t in tokens)


def keywords_of(texts: list[str], limit: int = 8) -> list[str]:
    """Multi-word proper nouns first ('san francisco'), then the most frequent content words."""
    phrases: Counter[str] = Counter()
    for text in texts:
        for match in _PROPER_NOUN.findall(text):
            phrase = match.lower()
            if not all(w in STOPWORDS for w in phrase.split()):
                phrases[phrase] += 1
    counts = Counter(w for text in texts for w in content_words(text))
    covered = {w for p in phrases for w in p.split()}
    ordered = [p for p, _ in phrases.most_common()]
    ordered += [w for w, _ in counts.most_common() if w not in covered]
    return ordered[:limit]


def topic_of(texts: list[str], keywords: list[str]) -> str:
    """The lexicon topic with most hits, else the top keyword, else 'general'."""
    counts = Counter(content_words(" ".join(texts)))
    scores = {t: sum(counts[w] for w in lex) for t, lex in TOPIC_LEXICON.items()}
    best = max(scores, key=lambda t: scores[t])
    if scores[best] > 0:
        return best
    return keywords[0] if keywords else "general"


def extract(turns: list[Turn]) -> Extraction:
    """Facts, preferences and corrections from the user's turns; outcomes from the rest."""
    out = Extraction()
    for turn in turns:
        if turn.is_summary:
            continue
        for sentence in sentences(turn.content):
            if turn.role == Role.user.value:
                if CORRECTION_RE.search(sentence):
                    out.corrections.append(sentence)
                if PREFERENCE_RE.search(sentence):
                    out.preferences.append(third_person(sentence))
                elif FACT_RE.search(sentence) and not sentence.endswith("?"):
                    out.facts.append(third_person(sentence))
            elif turn.role in (Role.assistant.value, Role.tool.value) and TASK_DONE_RE.search(sentence):
                out.task_outcomes.append(sentence)
    texts = [t.content for t in turns]
    out.keywords = keywords_of(texts)
    out.topic = topic_of(texts, out.keywords)
    return out
