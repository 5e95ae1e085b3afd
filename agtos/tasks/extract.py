"""Rule-based extraction of facts, preferences, corrections, keywords and topic from turns.

Facts come from every person in the conversation (see :mod:`agtos.tasks.speakers`): the user of an
agent chat, and both sides of a chat between two named people. They are rewritten in the third
person naming the speaker ("Gina lost their job at Door Dash"); an unnamed user is "User".
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

from agtos.schemas import Role, Turn
from agtos.tasks.bm25 import light_stem, stem
from agtos.tasks.dates import annotate, resolve_dates
from agtos.tasks.person_rewrite import LEAD, third_person
from agtos.tasks.speakers import Utterance, human_names, utterances
from agtos.tasks.text import STOPWORDS, content_words, sentences, words
from agtos.tasks.word_rarity import rarity, time_words

PREFERENCE_RE = re.compile(
    r"\b(i ([a-z]+ly |much |always |still )?(prefer|like|love|enjoy|hate|dislike|can't stand|"
    r"don't like|do not like|want you to|would rather)|i'd rather|my favou?rite|"
    r"please (always|never|don't|do not)|call me|more of an? [\w-]+ person)\b",
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
    r"implemented|refactored|migrated|installed|configured|resolved|"
    # the agent saying what it did: "I've added", "I have now refactored", "I've rewritten"
    r"i(?:'ve| have) (?:now |just |already |also )?(?:\w+ed|set up|set|written|rewritten|built|made|run)|"
    r"task (is )?complete)\b",
    re.I,
)
SMALL_TALK_WORDS = frozenset(
    """hi hello hey yo good morning afternoon evening night thanks thank you so much ok okay cool great
    bye goodbye bye-bye see later cheers nice got it sure awesome perfect have a day there all the
    best talk soon again""".split()
)
#: Words that carry no memory in chat small talk ("I'm doing good", "that sounds amazing, haha").
CHIT_CHAT_WORDS = SMALL_TALK_WORDS | frozenset(
    """doing fine well pretty quite lol haha hahaha yeah yep yea yup wow omg fun glad happy sorry excited
    amazing lovely sounds sound hope hoping totally definitely absolutely true agree exactly lmao
    miss missed welcome happy new year years merry christmas hbu wbu hru today tonight yes
    nope cute beautiful gorgeous wonderful fantastic oh ah aw though anyways asking hear heard luck
    interesting crazy wild sad bad right indeed agreed fr lmk btw xd""".split()
)
_STRETCHED = re.compile(r"(\w)\1+$")  # a letter repeated at the end of a word
_COURTESY = re.compile(
    r"\b(?:thanks?(?: you)?(?: so much| a lot)?(?: for (?:asking|sharing|that|this|everything|letting me know|"
    r"the \w+))?|sorry to hear(?: that| about that)?|(?:glad|happy) to hear(?: that)?|good luck(?: with \w+)?|"
    r"no worries|you're welcome|take care|see you(?: soon| later| then)?|talk (?:to you )?(?:soon|later)|"
    r"nice (?:to meet you|talking to you|chatting)|oh no|congrat(?:s|ulations)|"
    r"have (?:a|an) (?:great|good|nice|lovely|amazing|fun) (?:day|night|evening|weekend|time|one)|"
    r"how are you(?: doing)?|how about you|what about you|how's it going|how have you been|what's up|"
    r"same here|me too|sounds (?:good|great|fun|amazing|awesome|like fun|like a plan)|"
    r"that's (?:so |really )?(?:great|awesome|amazing|cool|nice|sad|too bad|crazy|wild)|"
    r"this message was deleted|<?(?:media|image|video|sticker) omitted>?)\b",
    re.I,
)

TOPIC_LEXICON: dict[str, frozenset[str]] = {
    topic: frozenset(terms.split())
    for topic, terms in {
        "weather": "weather forecast rain temperature sunny snow umbrella humid wind cold warm",
        "travel": "flight hotel trip travel airport booking vacation visa train passport itinerary beach island resort",
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

_PREDICATE = re.compile(
    r"\b(?:i|you|we|they|he|she|it|i'm|you're|we're|they're|he's|she's|it's|that's|is|are|was|were|be|been|am|"
    r"so|very|too|really|quite|not|don't|didn't|doesn't|won't|can't|will|can|would|should|could|might|must|"
    r"i'll|you'll|we'll|i've|you've|we've|i'd)\s+(?:(?:just|also|still|always|never|usually|often|even|all)\s+)?"
    r"([a-z][a-z'-]*)",
    re.I,
)
_stem = lru_cache(maxsize=65_536)(stem)
_plural_folded = lru_cache(maxsize=65_536)(light_stem)
_TOPIC_STEMS = {topic: frozenset(map(light_stem, terms)) for topic, terms in TOPIC_LEXICON.items()}

_PROPER_NOUN = re.compile(r"\b([A-Z][a-z]+(?:\s+[A-Z][a-z]+)+)\b")

_DISCOURSE = re.compile(
    r"^(?:actually|no|well|also|oh|so|and|but|yeah|yes|yea|haha+|lol|omg|ok|okay|honestly|anyway|anyways|"
    r"wow|aw+|ah+|hmm+|um+|btw|plus|by the way|for now|in fact|funny enough|guess what)\b[,!.]*\s+",
    re.I,
)
_HEDGE = re.compile(
    LEAD + r"i (?:think|guess|believe|suppose|feel like|hope)(?: that)?\s+(?=(?:i|i'm|we|we're|my)\b)", re.I
)
_CASUAL_FORMS = {
    "im": "I'm", "ive": "I've", "dont": "don't", "cant": "can't", "didnt": "didn't",
    "doesnt": "doesn't", "isnt": "isn't", "wasnt": "wasn't", "havent": "haven't", "ill": "I'll",
}  # fmt: skip
_CASUAL = re.compile(r"\b(?:" + "|".join(_CASUAL_FORMS) + r")\b", re.I)
_REACTION = re.compile(
    r"^(?:i (?:think|guess|hope|agree|mean|see|know|understand|bet|believe|suppose|wonder|appreciate|"
    r"totally agree|completely agree|can imagine|can tell|can see|feel you|feel that|wish you)\b|"
    r"i'm (?:so |really |very )?(?:glad|sorry|sure|not sure|happy for you|jealous|curious)\b|"
    r"i (?:really )?(?:love|like|adore) (?:that|this|it|how|your|the way|those|these)\b|"
    r"i (?:don't|do not) (?:know|think)\b|i (?:can't|cannot) wait\b|i'll miss\b|i (?:will )?miss you\b)",
    re.I,
)
_REQUEST = re.compile(
    r"\b(?:can|could|would|will) you\b|\bi (?:need|want|would like|'d like) you\b|"
    r"\b(?:help|let|tell|show|give|remind|send) me\b|^please\b|^i need (?:a|an|some)\b",
    re.I,
)
#: where one statement holds several propositions: "…, and I …", "… but my …", "…; …", "…, so …"
_CLAUSES = re.compile(
    r"\s*;\s+|,?\s+(?:and|but|so)\s+(?=(?:i|i'm|i've|i'd|i'll|we're|we've)\b)(?!i\s+(?:are|were|have|both)\b)"
    r"|,\s+(?:and|but|so)\s+(?=(?:my|our)\b)|,\s+(?=(?:i|i'm|i've|i'd|my)\b)|,\s+so\s+"
    r"|\s+and\s+(?=(?-i:[A-Z][a-z]+)\s+(?:is|was|has|had|does|doesn't|did|didn't|can|can't|will|won't|lives|"
    r"works|loves|likes|hates|eats|doesn't)\b)",
    re.I,
)
_TRAILER = re.compile(r",?\s*\b(?:by the way|btw|though|haha+|lol|too|now)\s*[.!]*$", re.I)
#: "Sofia doesn't eat fish": a named subject and its verb
_NAMED_STATEMENT = re.compile(
    r"^(?-i:[A-Z][a-z]+)\s+(?:(?:just|also|still|really|now|never|always)\s+)?(?:is|was|has|had|does|doesn't|did|"
    r"didn't|can|can't|will|won't|lives|works|loves|likes|hates|eats|got|moved|started)\b",
    re.I,
)
_LOWER_WORD = re.compile(r"\b[a-z]+\b")
_CAPITAL_WORD = re.compile(r"\b[A-Z][a-z]+\b")
_COMMON_RARITY = math.log(1000)  # rarity of the 1,000th most common English word
_INNER_CAPITAL = re.compile(r"(?<=[\w,;:] )(?-i:[A-Z][a-z]+)\b")
_PERSON = re.compile(r"\b(?:i|you|your|my|our|his|her|their|he|she|they|we|me|us|him|them)\b", re.I)
_STATEMENT = re.compile(LEAD + r"(?:i|i'm|i've|i'd|i'll|we|we're|we've|my|our)\b", re.I)
#: a label before a statement ("Update: I moved…", "Quick update: my…", "FYI: Sofia got…"): up to three words
_LABEL = re.compile(r"^[a-z][\w'-]*(?:\s+[\w'-]+){0,2}\s*:\s+", re.I)
_TRAILING_QUESTION = re.compile(
    r"^(.*?\w)[,;:.!-]+\s+(?:(?:so|and|but)\s+)?(?:can|could|would|will|do|does|did|what|how|which|where|when|"
    r"why|who|is|are|have|has|any|should)\b[^,;]*\?$",
    re.I,
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
    #: each fact, preference or correction → the time (ms) of the first turn that said it (0: undated)
    stated_at: dict[str, int] = field(default_factory=dict)
    #: and that turn's UTC offset (minutes east), when it was sent with one
    stated_offset: dict[str, int] = field(default_factory=dict)

    def add(self, tier: list[str], text: str, turn: Turn) -> None:
        tier.append(text)
        if text not in self.stated_at:
            self.stated_at[text] = turn.timestamp
            if turn.utc_offset is not None:
                self.stated_offset[text] = turn.utc_offset


def is_trivial(text: str) -> bool:
    """Greetings, thanks and acknowledgements only ("Hi!", "thanks, bye", "ok cool")."""
    tokens = words(text)
    return bool(tokens) and all(t in SMALL_TALK_WORDS for t in tokens)


def informative_words(text: str, names: frozenset[str] = frozenset()) -> list[str]:
    """Content words that are neither courtesy ("sorry to hear that"), chit-chat ("doing good,
    haha") nor the speakers' names."""
    return _informative(casual_to_standard(text), names)


def _informative(standard: str, names: frozenset[str] = frozenset()) -> list[str]:
    """:func:`informative_words` of a text already in standard form (:func:`casual_to_standard`)."""
    text = _COURTESY.sub(" ", standard)
    return [w for w in content_words(text) if _unstretched(w) not in CHIT_CHAT_WORDS and w not in names]


def _unstretched(word: str) -> str:
    """A chat word without its stretched ending ("hiii", "heyy", "hellooo", "byeee" -> hi, hey, hello, bye)."""
    return word if word in CHIT_CHAT_WORDS else _STRETCHED.sub(r"\1", word)


def is_chit_chat(text: str, names: frozenset[str] = frozenset()) -> bool:
    """Greetings, thanks, bare names and small talk: fewer than two informative words."""
    return len(informative_words(text, names)) < 2


def casual_to_standard(sentence: str) -> str:
    """Curly apostrophes and chat spellings ("im", "dont") to the forms the rules expect."""
    text = sentence.replace("’", "'").replace("‘", "'")
    return _CASUAL.sub(lambda m: _CASUAL_FORMS[m.group().lower()], text)


def statement_of(sentence: str) -> str | None:
    """The part of a sentence that states something: discourse markers, a leading hedge ("I think")
    and a trailing question ("…, have you been?") removed; None for a question or a request."""
    text = unlabelled(casual_to_standard(sentence).strip())
    while (m := _DISCOURSE.match(text)) is not None:
        text = text[m.end() :]
    text = _HEDGE.sub(r"\1", text)
    if text.endswith("?"):
        m = _TRAILING_QUESTION.match(text)
        if m is None:
            return None
        text = m.group(1)
    return text or None


def unlabelled(sentence: str) -> str:
    """``sentence`` without a label that opens it ("Update: I moved to Denver" -> "I moved to Denver") where
    what follows is a statement of someone's ("My goal: run a marathon" keeps its label)."""
    m = _LABEL.match(sentence)
    if m is None:
        return sentence
    rest = sentence[m.end() :]
    return rest if _STATEMENT.match(rest) or _NAMED_STATEMENT.match(rest) else sentence


def propositions(statement: str) -> list[str]:
    """A statement cut into its propositions ("I'm vegetarian and Sofia doesn't eat fish" -> two)."""
    parts = (_TRAILER.sub("", part).strip(" ,") for part in _CLAUSES.split(statement))
    return [part for part in parts if part]


def dated(text: str, timestamp_ms: int, utc_offset: int | None = None) -> str:
    """``text`` with each relative date followed by the absolute one ("last month [= April 2024]"),
    resolved on the local day (``utc_offset`` minutes east of UTC)."""
    return annotate(text, resolve_dates(text, timestamp_ms, utc_offset)) if timestamp_ms else text


def _proper_words(texts: list[str]) -> frozenset[str]:
    """Names in ``texts``: words written with a capital inside a sentence ("we flew to Male"), and capitalised
    words never written in lower case that are not among the 1,000 most common English words ("Sofia")."""
    text = "\n".join(texts)
    inner = {w.lower() for w in _INNER_CAPITAL.findall(text)}
    capitalised = {w.lower() for w in _CAPITAL_WORD.findall(text)} - set(_LOWER_WORD.findall(text))
    return frozenset(inner | {w for w in capitalised if rarity(w) > _COMMON_RARITY}) - {"i"}


def _about_someone(text: str, names: frozenset[str], known: frozenset[str]) -> bool:
    """A statement with a named subject ("Sofia doesn't eat fish") whose subject is a person or a name
    (``known``: the speakers' and the capitalised words of the chat), or that speaks of someone ("It was
    my birthday", a speaker's name in ``names``); not small talk with no one in it ("It was kinda cold",
    "Time was running")."""
    if _NAMED_STATEMENT.match(text) is None:
        return False
    if text.split()[0].lower() in known or _PERSON.search(text) is not None:
        return True
    return not names.isdisjoint(words(text))


def _facts_of(
    u: Utterance,
    other: str | None,
    known: tuple[frozenset[str], frozenset[str]],
    agent_chat: bool,
    out: Extraction,
    worded: bool = True,
) -> None:
    """``known``: the words of the speakers' names, and those with the capitalised words of the chat."""
    names, known_words = known

    def said(text: str) -> str:
        if not worded:
            return text
        return dated(third_person(text, u.speaker, other), u.turn.timestamp, u.turn.utc_offset)

    for sentence in sentences(u.text):
        if agent_chat and u.turn.role == Role.user.value and CORRECTION_RE.search(sentence):
            out.add(out.corrections, sentence, u.turn)
        statement = statement_of(sentence)
        if statement is None:
            continue
        for text in propositions(statement):
            while (m := _DISCOURSE.match(text)) is not None:
                text = text[m.end() :]
            if _REACTION.match(text):
                continue
            if PREFERENCE_RE.search(text):
                out.add(out.preferences, said(text), u.turn)
                continue
            informative = len(informative_words(text, names))
            listed = FACT_RE.search(text) is not None and informative >= 1
            opens = _STATEMENT.match(text) is not None or _about_someone(text, names, known_words)
            stated = informative >= 2 and opens and not _REQUEST.search(text)
            if listed or stated:
                out.add(out.facts, said(text), u.turn)


#: stop words that open place names ("New York City", "New Orleans"): kept at a proper noun's start
_NAME_OPENERS = frozenset({"new"})


def keywords_of(texts: list[str], limit: int = 8, names: frozenset[str] = frozenset()) -> list[str]:
    """Multi-word proper nouns first ('san francisco'), then the words most distinctive of the texts: the
    times a word is said (log-damped) times its rarity in English (:func:`rarity`); singular and
    plural as one (the form used most), no time words, chit-chat or speakers' names, and a word only where
    it is not in a verb's or an adjective's place (after a subject, an auxiliary or a copula: "I'm taking",
    "you add", "it is simple")."""
    phrases: Counter[str] = Counter()
    for text in texts:
        for match in _PROPER_NOUN.findall(text):
            tokens = match.lower().split()
            while (
                tokens and tokens[0] not in _NAME_OPENERS and (tokens[0] in STOPWORDS or tokens[0] in CHIT_CHAT_WORDS)
            ):
                tokens.pop(0)
            if len(tokens) >= 2 and len(set(tokens)) == len(tokens):
                phrases[" ".join(tokens)] += 1
    phrases = Counter({p: n for p, n in phrases.items() if not any(p != q and f" {p} " in f" {q} " for q in phrases)})
    covered = {w for p in phrases for w in p.split()} | names | time_words()
    forms: dict[str, Counter[str]] = {}
    standard = casual_to_standard("\n".join(texts))
    predicated = Counter(m.lower() for m in _PREDICATE.findall(standard))
    for w in _informative(standard):
        if w in covered:
            continue
        if predicated[w] > 0:  # said as a verb or an adjective ("I'm taking", "it is simple"), not a thing
            predicated[w] -= 1
        else:
            forms.setdefault(_stem(w), Counter())[w] += 1
    weight = {s: (1 + math.log(f.total())) * max(rarity(w) for w in f) for s, f in forms.items()}
    ordered = [p for p, _ in phrases.most_common()]
    ordered += [min(forms[s], key=lambda w: (-forms[s][w], len(w))) for s in sorted(weight, key=lambda s: -weight[s])]
    return ordered[:limit]


TOPIC_MAX_CHARS = 128  # Episode.topic's max_length


def topic_of(texts: list[str], keywords: list[str]) -> str:
    """The lexicon topic with most distinct words said (plurals folded: "trips" is "trip"), a keyword counting
    twice, ties broken by how often they are said; else the top keyword, else 'general'."""
    said = Counter(map(_plural_folded, content_words(" ".join(texts))))
    key = {_plural_folded(w) for k in keywords for w in k.split()}
    scores = {
        t: (len(lex & said.keys()) + len(lex & key), sum(said[w] for w in lex)) for t, lex in _TOPIC_STEMS.items()
    }
    best = max(scores, key=lambda t: scores[t])
    if scores[best][0] > 0:
        return best
    # a keyword may be one word of 100,000 characters: Episode.topic holds at most 128 (a longer one made
    # every store of the episode a 500)
    return next((k for k in keywords if len(k) <= TOPIC_MAX_CHARS), "general")


def extract(turns: list[Turn], worded: bool = True) -> Extraction:
    """Facts and preferences from every person, named in the third person; corrections from the
    user of an agent chat; task outcomes from the agent and its tools.

    ``worded`` False: the same items found, as said (not rewritten in the third person, dates not
    resolved), and no keywords or topic — enough for :func:`agtos.tasks.importance.decide_save`'s
    verdict at a third of the cost (a queued session end's decision on the request path)."""
    out = Extraction()
    said = utterances(turns)
    people = human_names(said)
    names = frozenset(w for name in people for w in words(name))
    agent_chat = not any(u.human and u.turn.role == Role.assistant.value for u in said)
    known = (names, names | _proper_words([u.text for u in said if u.human]))
    for u in said:
        if u.turn.is_summary:
            continue
        if u.human:
            others = [n for n in people if n != u.speaker]
            _facts_of(u, others[0] if len(others) == 1 and u.speaker else None, known, agent_chat, out, worded)
        elif u.turn.role in (Role.assistant.value, Role.tool.value):
            out.task_outcomes.extend(s for s in sentences(u.text) if TASK_DONE_RE.search(s))
    if not worded:
        return out
    texts = [u.text for u in said]
    out.keywords = keywords_of(texts, names=names)
    out.topic = topic_of(texts, out.keywords)
    return out
