"""Build ``benchmarks/eval/assistset.json``: user/assistant chats with long assistant replies.

    .venv/bin/python -m benchmarks.eval.make_assistset [--out PATH] [--check]

Deterministic (seeded): six users, thirty dated sessions each over about five months. Every
session is a request for recommendations (hotels, restaurants, books, trails, laptops, dishes,
plants, courses, gifts, exercises) answered by a long assistant reply (150-500 words: an intro,
a numbered list of named options each with a feature and details, a closing line), often with
a short follow-up. Users mention facts about themselves in passing: one-off facts, preferences,
updates ("I switched from X to Y"), dated events told with relative dates ("last Tuesday") and
facts spread over two sessions.

Questions use LongMemEval's types: ``single-session-user``, ``single-session-assistant`` (an
item of one reply, by its feature or its position), ``single-session-preference``,
``knowledge-update`` (with the superseded session), ``temporal-reasoning`` (absolute dates and
which-came-first) and ``multi-session``. ``evidence`` lists the turns (``D<session>:<position>``,
both from 1) holding the answer; those turns also carry ``has_answer``.

``--check`` only verifies that the committed JSON is what this script generates.
"""

# ruff: noqa: E501 - the pools are prose

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path

from benchmarks.eval.assistset_vocab import DOMAINS, Domain

SEED = 1919
DEFAULT_OUT = Path(__file__).with_name("assistset.json")
DATE_FMT = "%Y/%m/%d (%a) %H:%M"  # LongMemEval's date format
USERS, SESSIONS = 6, 30
SU, SA, SP = "single-session-user", "single-session-assistant", "single-session-preference"
MULTI, KU, TEMP = "multi-session", "knowledge-update", "temporal-reasoning"
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")


@dataclass(frozen=True)
class Fact:
    """A sentence a user says in passing, and the question it answers."""

    kind: str
    sentence: str
    question: str = ""
    answer: str = ""


# -- what users tell ---------------------------------------------------------------------------
# (sentence with {v}, question, answer template, values)
ONE_OFF: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "My sister {v} is coming along, she's the one who plans everything.",
        "What is my sister's name?",
        ("Marta", "Ines", "Clara", "Hanna", "Sofia", "Lotte"),
    ),
    (
        "We have a {v}, he's four and full of energy.",
        "What breed is my dog?",
        ("beagle", "border collie", "dachshund", "Labrador", "whippet", "corgi"),
    ),
    (
        "Just so you know, I'm allergic to {v}.",
        "What am I allergic to?",
        ("peanuts", "shellfish", "sesame", "kiwi fruit", "pollen", "cats"),
    ),
    (
        "I grew up in {v}, a small town by the sea.",
        "Where did I grow up?",
        ("Nazaré", "Whitby", "Cassis", "Hoorn", "Tropea", "Ystad"),
    ),
    (
        "I've played the {v} since I was a kid.",
        "Which instrument have I played since childhood?",
        ("cello", "clarinet", "trumpet", "violin", "accordion", "harp"),
    ),
    (
        "I work as a {v}, so my days are long.",
        "What do I do for a living?",
        (
            "paediatric nurse",
            "structural engineer",
            "primary school teacher",
            "pharmacist",
            "bus driver",
            "sound technician",
        ),
    ),
    (
        "My son turned {v} last month and he wants to come too.",
        "How old is my son?",
        ("seven", "nine", "eleven", "twelve", "fourteen", "six"),
    ),
    (
        "My partner {v} is a chef, so the bar is high.",
        "What is my partner's name?",
        ("Tomasz", "Rafael", "Anouk", "Dmitri", "Leila", "Ruairi"),
    ),
)
PREFERENCES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("I'm {v}, so please keep that in mind.", "What diet do I follow?", ("vegetarian", "vegan", "pescatarian")),
    ("I always choose a {v} seat when I travel.", "Which seat do I prefer when I travel?", ("window", "aisle")),
    ("I much prefer exercising in the {v}.", "When do I prefer to exercise?", ("early morning", "evening")),
    ("I really can't stand crowds, I like {v} places.", "What kind of places do I like?", ("quiet", "remote")),
    (
        "I only drink {v}, never coffee.",
        "What do I drink instead of coffee?",
        ("green tea", "rooibos", "hot chocolate"),
    ),
)
# (old sentence, new sentence, question, values): {a} is replaced by {b}
UPDATES: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    (
        "I keep all my notes in {a}.",
        "By the way, I switched from {a} to {b} for my notes.",
        "Which app do I use for my notes now?",
        ("Notion", "Obsidian", "Evernote", "OneNote", "Bear"),
    ),
    (
        "I live in {a}.",
        "We finally moved from {a} to {b} last month.",
        "Which city do I live in now?",
        ("Leeds", "Utrecht", "Aarhus", "Graz", "Nantes", "Bilbao"),
    ),
    (
        "I work at {a} as an analyst.",
        "News: I left {a} and started at {b}.",
        "Where do I work now?",
        ("Brightwater Insurance", "Kelvin Labs", "Orchard Logistics", "Meridian Bank", "Tallis Media"),
    ),
    (
        "I drive an old {a}.",
        "I sold the {a} and bought a {b}.",
        "What car do I drive now?",
        ("Fiat Panda", "Volvo V70", "Skoda Octavia", "Renault Zoe", "Mazda 3"),
    ),
    (
        "I go {a} twice a week.",
        "I've given up {a} and now I go {b} instead.",
        "Which sport do I do now?",
        ("swimming", "climbing", "cycling", "rowing", "running"),
    ),
)
# (event sentence with {rel}, question, short name for which-came-first)
EVENTS: tuple[tuple[str, str, str], ...] = (
    ("I ran my first half marathon {rel}.", "When did I run my first half marathon?", "the half marathon"),
    ("We adopted a kitten {rel}.", "When did I adopt the kitten?", "the kitten"),
    ("I passed my driving test {rel}!", "When did I pass my driving test?", "the driving test"),
    (
        "I fell and ended up with a broken wrist {rel}, so typing is slow.",
        "When did I break my wrist?",
        "the broken wrist",
    ),
    ("My parents came to visit {rel}.", "When did my parents visit me?", "my parents' visit"),
    ("Big news: our engagement party was {rel}!", "When was my engagement party?", "the engagement party"),
)
# (first sentence, second sentence, question, values)
SPREAD: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    (
        "My daughter {v} is starting school soon.",
        "My youngest, {v}, has just learned to swim.",
        "What are my children's names?",
        ("Elsa", "Noor", "Bruno", "Mateo", "Ada", "Kai"),
    ),
    (
        "I've started learning {v} on the side.",
        "I've also picked up {v} recently.",
        "Which two languages am I learning?",
        ("Portuguese", "Japanese", "Greek", "Dutch", "Turkish", "Korean"),
    ),
    (
        "I just got back from a week in {v}.",
        "I'm just back from a few days in {v}.",
        "Which two places did I say I had just come back from?",
        ("Tallinn", "Palermo", "Tbilisi", "Bergen", "Ohrid", "Cádiz"),
    ),
    (
        "I signed up for a {v} class on Wednesdays.",
        "I've booked a {v} class on Saturdays too.",
        "Which two classes did I sign up for?",
        ("pottery", "salsa", "life drawing", "bouldering", "woodworking", "choir"),
    ),
)


def past_day(rng: random.Random, day: date) -> tuple[str, date]:
    """A relative expression for a recent day and the day it means."""
    options = [("yesterday", 1), ("two days ago", 2), ("three days ago", 3)]
    options += [(f"last {(day - timedelta(days=back)):%A}", back) for back in range(2, 7)]
    phrase, back = rng.choice(options)
    return phrase, day - timedelta(days=back)


def fmt_day(day: date) -> str:
    return f"{day.day} {day:%B %Y}"


# -- the assistant's long reply -----------------------------------------------------------------
@dataclass
class Item:
    name: str
    feature: str


@dataclass
class Session:
    domain: Domain
    place: str
    when: datetime
    items: list[Item] = field(default_factory=list)
    turns: list[dict[str, object]] = field(default_factory=list)


GENERIC = (
    "It is a solid all-rounder.",
    "I'd put it near the top of the list.",
    "The main downside is that it can be hard to find.",
    "People who tried it tend to come back to it.",
    "It is a little more expensive than the others, but it shows.",
    "It is a safe choice if you are unsure.",
    "It's worth reading a couple of recent reviews first.",
    "It's the one I would pick for a first try.",
    "It suits beginners and experienced people alike.",
    "Availability varies with the season.",
    "It is a good match if you value simplicity.",
    "Several readers of travel and hobby forums rate it highly.",
)


def reply(rng: random.Random, domain: Domain, place: str) -> tuple[str, list[Item]]:
    """A 150-500 word list reply: intro, 5-8 named options with a feature and details, tips, a closing."""
    count = rng.randint(5, 8)
    items = [
        Item(n, f) for n, f in zip(rng.sample(domain.names, count), rng.sample(domain.features, count), strict=True)
    ]
    pool = rng.sample(domain.details + GENERIC, len(domain.details) + len(GENERIC))  # drawn in turn, few repeats
    style = rng.randrange(3)
    lines = [rng.choice(domain.intros).format(place=place), ""]
    for n, item in enumerate(items, 1):
        details = " ".join(pool.pop() if pool else rng.choice(GENERIC) for _ in range(rng.randint(2, 3)))
        name = item.name[:1].upper() + item.name[1:]
        if style == 0:
            lines.append(f"{n}. **{name}**: it {item.feature}. {details}")
        elif style == 1:
            lines.append(f"{n}. {name} - this one {item.feature}. {details}")
        else:
            lines.append(f"- **{name}** {item.feature}. {details}")
    tips = [t for t in pool if t in domain.details][: rng.randint(0, 4)]
    if tips:
        lines += ["", "A few general tips:", *(f"- {tip}" for tip in tips)]
    lines += ["", rng.choice(domain.closings)]
    return "\n".join(lines), items


# -- one user -----------------------------------------------------------------------------------
@dataclass
class Ask:
    type: str
    question: str
    answer: str
    evidence: list[tuple[int, int]]  # (session index, turn index), both from 0
    superseded: list[int] = field(default_factory=list)


FOLLOW_UPS = (
    "Thanks, that's really helpful.",
    "Great list, thank you!",
    "Perfect, I'll look into these.",
    "Thanks! That gives me plenty to think about.",
)
ACKS = (
    "Happy to help. Enjoy!",
    "You're welcome! Let me know if you need anything else.",
    "Glad it helps. Have fun choosing!",
)
NOTED = ("Thanks for telling me, I'll keep that in mind.", "Good to know, thanks!", "Noted, that's useful context.")


class UserBuilder:
    """Thirty sessions of one user and the questions about them."""

    def __init__(self, rng: random.Random, start: datetime) -> None:
        self.rng = rng
        self.sessions: list[Session] = []
        self.asks: list[Ask] = []
        used: set[tuple[str, str]] = set()
        when = start
        while len(self.sessions) < SESSIONS:
            domain = rng.choice(DOMAINS)
            place = rng.choice(domain.places)
            if (domain.key, place) in used:
                continue
            used.add((domain.key, place))
            self.sessions.append(Session(domain, place, when))
            when += timedelta(days=rng.randint(2, 8), hours=rng.randint(-3, 3), minutes=rng.randint(-30, 30))
        self.facts: dict[int, str] = {}  # session index -> fact sentence

    def tell(self, lo: int, hi: int, sentence: str) -> int:
        """Put a fact sentence in a free session between lo and hi (exclusive); return it."""
        free = [i for i in range(lo, hi) if i not in self.facts]
        index = self.rng.choice(free)
        self.facts[index] = sentence
        return index

    def plan(self) -> None:
        rng = self.rng
        for kind, pool, count in ((SU, ONE_OFF, 3), (SP, PREFERENCES, 2)):
            for sentence, question, values in rng.sample(pool, count):
                value = rng.choice(values)
                self._fact_ask(kind, self.tell(0, SESSIONS, sentence.format(v=value)), question, value)
        for old, new, question, values in rng.sample(UPDATES, 2):
            a, b = rng.sample(values, 2)
            first = self.tell(0, SESSIONS // 2, old.format(a=a))
            second = self.tell(first + 3, SESSIONS, new.format(a=a, b=b))
            self.asks.append(Ask(KU, question, b, [(second, -1)], [first]))
        self._events()
        for once, again, question, values in rng.sample(SPREAD, 2):
            a, b = rng.sample(values, 2)
            x = self.tell(0, SESSIONS // 2, once.format(v=a))
            y = self.tell(SESSIONS // 2, SESSIONS, again.format(v=b))
            self.asks.append(Ask(MULTI, question, f"{a} and {b}", [(x, -1), (y, -1)]))

    def _events(self) -> None:
        """Two dated events told with relative dates, asked about by date and by order."""
        rng = self.rng
        events: list[tuple[date, str, int]] = []
        for sentence, question, short in rng.sample(EVENTS, 2):
            index = self.tell(0, SESSIONS, "")  # the sentence needs the session's day
            phrase, day = past_day(rng, self.sessions[index].when.date())
            self.facts[index] = sentence.format(rel=phrase)
            self.asks.append(Ask(TEMP, question, fmt_day(day), [(index, -1)]))
            events.append((day, short, index))
        (day_i, early, i), (day_j, late, j) = sorted(events)
        pair = [early, late] if rng.random() < 0.5 else [late, early]
        if day_i != day_j:  # two sessions telling of the same day leave no order to ask about
            self.asks.append(Ask(TEMP, f"Which happened first, {pair[0]} or {pair[1]}?", early, [(i, -1), (j, -1)]))

    def _fact_ask(self, kind: str, index: int, question: str, answer: str) -> None:
        self.asks.append(Ask(kind, question, answer, [(index, -1)]))

    def write(self) -> None:
        """Turn every planned session into turns; -1 evidence turns become the fact's position."""
        rng = self.rng
        where: dict[int, int] = {}
        for index, session in enumerate(self.sessions):
            request = rng.choice(session.domain.requests).format(place=session.place)
            text, session.items = reply(rng, session.domain, session.place)
            fact = self.facts.get(index)
            if fact and rng.random() < 0.6:  # the fact opens the request
                session.turns = [
                    {"role": "user", "content": f"{fact} {request}"},
                    {"role": "assistant", "content": text},
                ]
                where[index] = 0
                continue
            session.turns = [{"role": "user", "content": request}, {"role": "assistant", "content": text}]
            if fact:  # the fact comes in the follow-up
                session.turns += [
                    {"role": "user", "content": f"{rng.choice(FOLLOW_UPS)} {fact}"},
                    {"role": "assistant", "content": rng.choice(NOTED)},
                ]
                where[index] = 2
            elif rng.random() < 0.4:
                session.turns += [
                    {"role": "user", "content": rng.choice(FOLLOW_UPS)},
                    {"role": "assistant", "content": rng.choice(ACKS)},
                ]
        for ask in self.asks:
            ask.evidence = [(s, where[s] if t == -1 else t) for s, t in ask.evidence]
        for index in rng.sample(range(SESSIONS), 6):  # about the assistant's replies
            session = self.sessions[index]
            position = rng.randrange(len(session.items))
            item = session.items[position]
            if rng.random() < 0.3:
                listed = session.domain.listed.format(place=session.place)
                question = f"In the list of {listed} you gave me, what was the {ORDINALS[position]} one?"
            else:
                question = session.domain.question.format(place=session.place, feature=item.feature)
            self.asks.append(Ask(SA, question, item.name.removeprefix("the "), [(index, 1)]))


# -- the file -----------------------------------------------------------------------------------
def build(seed: int = SEED) -> dict[str, object]:
    rng = random.Random(seed)
    haystacks, questions = [], []
    for u in range(USERS):
        hid = f"a{u + 1:02d}"
        start = datetime(2024, 1, 8) + timedelta(
            days=rng.randint(0, 60), hours=rng.randint(9, 20), minutes=rng.randint(0, 59)
        )
        user = UserBuilder(rng, start)
        user.plan()
        user.write()
        for ask in user.asks:
            for s, t in ask.evidence:
                user.sessions[s].turns[t]["has_answer"] = True
        ids = [f"{hid}_s{i + 1:02d}" for i in range(SESSIONS)]
        haystacks.append(
            {
                "haystack_id": hid,
                "haystack_session_ids": ids,
                "haystack_dates": [s.when.strftime(DATE_FMT) for s in user.sessions],
                "haystack_sessions": [s.turns for s in user.sessions],
            }
        )
        asked = (user.sessions[-1].when + timedelta(days=3)).replace(hour=10, minute=0)
        for n, ask in enumerate(user.asks, 1):
            questions.append(
                {
                    "question_id": f"{hid}_q{n:02d}",
                    "haystack_id": hid,
                    "question_type": ask.type,
                    "question": ask.question,
                    "answer": ask.answer,
                    "question_date": asked.strftime(DATE_FMT),
                    "answer_session_ids": list(dict.fromkeys(ids[s] for s, _ in ask.evidence)),
                    "superseded_session_ids": [ids[s] for s in ask.superseded],
                    "evidence": [f"D{s + 1}:{t + 1}" for s, t in ask.evidence],
                }
            )
    return {
        "name": "agtos-assistset",
        "description": (
            "Synthetic user/assistant chats with long list replies (recommendations), generated by "
            f"benchmarks/eval/make_assistset.py (seed {seed}); evidence ids are D<session>:<turn>, from 1."
        ),
        "source_format": "haystacks",
        "haystacks": haystacks,
        "questions": questions,
    }


def render(data: dict[str, object]) -> str:
    return json.dumps(data, ensure_ascii=False, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--check", action="store_true", help="fail if --out differs from what would be generated")
    args = parser.parse_args(argv)
    text = render(build())
    if args.check:
        same = args.out.exists() and args.out.read_text(encoding="utf-8") == text
        print(f"{args.out}: {'up to date' if same else 'OUT OF DATE (rerun make_assistset)'}")
        return 0 if same else 1
    args.out.write_text(text, encoding="utf-8")
    data = json.loads(text)
    turns = sum(len(s) for h in data["haystacks"] for s in h["haystack_sessions"])
    print(
        f"wrote {args.out}: {len(data['haystacks'])} users, {USERS * SESSIONS} sessions, {turns} turns, {len(data['questions'])} questions"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
