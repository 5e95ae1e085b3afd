"""Build ``benchmarks/eval/convset.json``: long chats between two named people, LoCoMo's layout.

    .venv/bin/python -m benchmarks.eval.make_convset [--out PATH] [--check]

Deterministic (seeded): four conversations of 22–26 dated sessions each, every session a
messaging-app chat of greetings, small talk and sign-offs around the facts the two people tell
each other — jobs, pets, trips, family news, injuries, races, classes — some of them stated
with relative dates ("yesterday", "last Friday", "two weeks ago", "next month", "in 2014") and
some later updated (a new employer, a move, a sold car). Both speakers state facts. Shared
photos carry a ``blip_caption`` as in LoCoMo.

Questions use LoCoMo's categories: 1 multi-hop (evidence in several turns, often several
sessions or both people), 2 temporal (absolute-date answers, resolved from the turn's own
date: each such question also stores the ``relative`` expression it resolves), 3 open-domain
(inferred from what was said; the answer holds the key words of the evidence), 4 single-hop.
``evidence`` lists the turns (``D<session>:<position>``, positions from 1) that hold the answer.
``event_summary`` lists, per session, the facts each speaker told (``agent_a`` is ``speaker_a``).

``--check`` only verifies that the committed JSON is what this script generates.
"""

# ruff: noqa: E501 - the value pools and lines are prose

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any

SEED = 1414
DEFAULT_OUT = Path(__file__).with_name("convset.json")
MULTI_HOP, TEMPORAL, OPEN_DOMAIN, SINGLE_HOP = 1, 2, 3, 4


# -- people, lines, questions ------------------------------------------------------------------
@dataclass(frozen=True)
class Person:
    name: str
    they: str  # she / he
    their: str  # her / his

    @property
    def they_cap(self) -> str:
        return self.they.capitalize()


@dataclass
class Line:
    who: Person
    text: str
    key: str | None = None  # evidence key a question may cite
    caption: str | None = None  # a shared photo


@dataclass(frozen=True)
class Ask:
    category: int
    question: str
    answer: str
    keys: tuple[str, ...]
    relative: str | None = None  # temporal questions: the expression the answer resolves


@dataclass
class Beat:
    """What one fact brings to one session: its lines, its questions and its one-line gist."""

    owner: Person
    lines: list[Line]
    asks: list[Ask]
    gist: str


@dataclass
class Ctx:
    """What a fact needs to be told: who, to whom, when, and the teller's sampled details."""

    rng: random.Random
    owner: Person
    partner: Person
    day: date
    values: dict[str, Any]
    state: dict[str, Any] = field(default_factory=dict)  # per person, read by later facts

    def key(self, name: str) -> str:
        return f"{self.owner.name}.{name}"


# -- dates ---------------------------------------------------------------------------------------
DATE_FORMATS = ("{d} {B} {Y}", "{B} {d}, {Y}", "{d} {b} {Y}")


def fmt_day(rng: random.Random, day: date) -> str:
    return rng.choice(DATE_FORMATS).format(d=day.day, B=f"{day:%B}", b=f"{day:%b}", Y=day.year)


def cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def fmt_month(day: date) -> str:
    return f"{day:%B %Y}"


def add_months(day: date, months: int) -> date:
    month = day.month - 1 + months
    return date(day.year + month // 12, month % 12 + 1, 1)


def past_day(rng: random.Random, day: date) -> tuple[str, date]:
    """A relative expression for a recent past day and the day it means."""
    options = [("yesterday", 1), ("two days ago", 2), ("three days ago", 3)]
    options += [(f"last {(day - timedelta(days=back)):%A}", back) for back in range(2, 7)]
    phrase, back = rng.choice(options)
    return phrase, day - timedelta(days=back)


def far_past(rng: random.Random, day: date) -> tuple[str, str]:
    """'two weeks ago' (a day) or 'last month' (a month): the phrase and the formatted answer."""
    phrase, back = rng.choice([("a week ago", 7), ("two weeks ago", 14), ("three weeks ago", 21), ("last month", 0)])
    if back == 0:
        return phrase, fmt_month(add_months(day, -1))
    return phrase, fmt_day(rng, day - timedelta(days=back))


def future_day(rng: random.Random, day: date) -> tuple[str, date]:
    phrase, ahead = rng.choice([("tomorrow", 1), ("in three days", 3), ("in two weeks", 14)])
    return phrase, day + timedelta(days=ahead)


# -- the facts -----------------------------------------------------------------------------------
REACTIONS = ("No way!!", "That's amazing!", "Wow, love that 😄", "Omg congrats!", "Haha that's so you")
SYMPATHY = ("Oh no!! Are you okay?", "Ugh, that sounds awful 😟", "Oh no, I'm so sorry")


def job(c: Ctx) -> Beat:
    o, p, v = c.owner, c.partner, c.values
    c.state["company"] = v["company"]
    lines = [
        Line(p, c.rng.choice(["So what do you do these days?", f"Remind me, {o.name}, where do you work again?"])),
        Line(o, f"I'm a {v['job']} at {v['company']}, been there {v['years']} years now.", c.key("job")),
        Line(p, c.rng.choice(["Oh nice, do you like it?", "Sounds busy! Is it a good team?"])),
        Line(o, "Most days! The people are great, the commute not so much."),
    ]
    asks = [Ask(SINGLE_HOP, f"What does {o.name} do for work?", v["job"], (c.key("job"),))]
    return Beat(o, lines, asks, f"{o.name} works as a {v['job']} at {v['company']}.")


def job_update(c: Ctx) -> Beat:
    o, p, v = c.owner, c.partner, c.values
    phrase, start = future_day(c.rng, c.day)
    lines = [
        Line(o, f"Big news: I accepted an offer from {v['company2']}! I start {phrase}.", c.key("job2")),
        Line(p, f"Congrats!! What made you leave {c.state['company']}?"),
        Line(o, "Better hours, and they're letting me lead a small team."),
    ]
    asks = [
        Ask(SINGLE_HOP, f"Which company does {o.name} work for now?", v["company2"], (c.key("job2"),)),
        Ask(
            MULTI_HOP,
            f"Which companies has {o.name} worked for?",
            f"{c.state['company']} and {v['company2']}",
            (c.key("job"), c.key("job2")),
        ),
        Ask(TEMPORAL, f"When does {o.name} start at {v['company2']}?", fmt_day(c.rng, start), (c.key("job2"),), phrase),
    ]
    return Beat(o, lines, asks, f"{o.name} accepted a job at {v['company2']}, leaving {c.state['company']}.")


def hometown(c: Ctx) -> Beat:
    o, p, v = c.owner, c.partner, c.values
    lines = [
        Line(p, "Where are you from originally?"),
        Line(
            o, f"I grew up in {v['hometown']}, but I moved to {v['city']} in {v['moved']} for college.", c.key("home")
        ),
        Line(p, f"I've never been to {v['hometown']}! What's it like?"),
        Line(o, "Small, rainy, lots of good bakeries 😄"),
    ]
    asks = [
        Ask(SINGLE_HOP, f"Where did {o.name} grow up?", v["hometown"], (c.key("home"),)),
        Ask(TEMPORAL, f"When did {o.name} move to {v['city']}?", str(v["moved"]), (c.key("home"),), f"in {v['moved']}"),
    ]
    return Beat(o, lines, asks, f"{o.name} grew up in {v['hometown']} and moved to {v['city']} in {v['moved']}.")


def flat(c: Ctx) -> Beat:
    o, p, v = c.owner, c.partner, c.values
    c.state["hood"] = v["hood"]
    lines = [
        Line(o, f"Our apartment in {v['hood']} is tiny but the view is great.", c.key("flat")),
        Line(p, "Tiny apartments are cozy though!"),
    ]
    return Beat(o, lines, [], f"{o.name} lives in a small apartment in {v['hood']}.")


def move(c: Ctx) -> Beat:
    o, p, v = c.owner, c.partner, c.values
    phrase, day = past_day(c.rng, c.day)
    lines = [
        Line(o, f"We finally moved {phrase}!! The new place is in {v['hood2']}, so much more space.", c.key("move")),
        Line(p, "Yay!! How's the new neighbourhood?"),
        Line(o, "Quiet, and there's a bakery downstairs, which is dangerous 😅"),
    ]
    asks = [
        Ask(SINGLE_HOP, f"Which neighbourhood does {o.name} live in now?", v["hood2"], (c.key("move"),)),
        Ask(
            MULTI_HOP,
            f"Where did {o.name} live before moving to {v['hood2']}?",
            c.state["hood"],
            (c.key("flat"), c.key("move")),
        ),
        Ask(TEMPORAL, f"When did {o.name} move to {v['hood2']}?", fmt_day(c.rng, day), (c.key("move"),), phrase),
    ]
    return Beat(o, lines, asks, f"{o.name} moved from {c.state['hood']} to {v['hood2']}.")


def pet(c: Ctx) -> Beat:
    o, p, v = c.owner, c.partner, c.values
    phrase, day = past_day(c.rng, c.day)
    c.state["pet"] = v["pet"]
    species, name = v["pet"]
    lines = [
        Line(
            o,
            f"{cap(phrase)} we adopted a {species} from the shelter! {v['pet_they']} is called {name}.",
            c.key("pet"),
            caption=f"a photo of a small {species} sitting on a blanket",
        ),
        Line(p, f"Omg {name} is adorable! How old?"),
        Line(o, f"About {c.rng.randint(3, 11)} months, and already bossing everyone around."),
    ]
    asks = [
        Ask(SINGLE_HOP, f"What is the name of {o.name}'s {species}?", name, (c.key("pet"),)),
        Ask(TEMPORAL, f"When did {o.name} adopt {name}?", fmt_day(c.rng, day), (c.key("pet"),), phrase),
    ]
    return Beat(o, lines, asks, f"{o.name} adopted a {species} named {name}.")


def trip_past(c: Ctx) -> Beat:
    o, p, v = c.owner, c.partner, c.values
    phrase, when = far_past(c.rng, c.day)
    city, reason = v["trip"]
    c.state["trip"] = city
    lines = [
        Line(p, c.rng.choice(["Been anywhere fun lately?", "Any travel this year?"])),
        Line(o, f"{cap(phrase)} I was in {city} for {reason}.", c.key("trip")),
        Line(p, f"Ooh, how was {city}?"),
        Line(o, f"Loved it, the {v['trip_highlight']} was the best part."),
    ]
    asks = [
        Ask(TEMPORAL, f"When was {o.name} in {city}?", when, (c.key("trip"),), phrase),
        Ask(SINGLE_HOP, f"Why did {o.name} go to {city}?", reason, (c.key("trip"),)),
    ]
    return Beat(o, lines, asks, f"{o.name} went to {city} for {reason}.")


def trip_future(c: Ctx) -> Beat:
    o, p, v = c.owner, c.partner, c.values
    city, reason = v["trip2"]
    lines = [
        Line(o, f"Next month I'm flying to {city} for {reason}!", c.key("trip2")),
        Line(p, "Jealous! First time there?"),
        Line(o, "Yes! Any tips?"),
        Line(p, "Pack comfy shoes, that's all I know 😂"),
    ]
    asks = [
        Ask(
            TEMPORAL,
            f"When is {o.name} travelling to {city}?",
            fmt_month(add_months(c.day, 1)),
            (c.key("trip2"),),
            "next month",
        ),
    ]
    if "trip" in c.state:
        asks.append(
            Ask(
                MULTI_HOP,
                f"Which cities has {o.name} visited or planned to visit?",
                f"{c.state['trip']} and {city}",
                (c.key("trip"), c.key("trip2")),
            )
        )
    return Beat(o, lines, asks, f"{o.name} plans to fly to {city} next month for {reason}.")


def instrument(c: Ctx) -> Beat:
    o, p, v = c.owner, c.partner, c.values
    c.state["instrument"] = v["instrument"]
    lines = [
        Line(p, "What do you do to unwind after work?"),
        Line(o, f"I play the {v['instrument']}! I started in {v['since']} and never stopped.", c.key("instrument")),
        Line(p, "That's so cool, you should play me something sometime."),
    ]
    asks = [
        Ask(
            TEMPORAL,
            f"Since when has {o.name} played the {v['instrument']}?",
            str(v["since"]),
            (c.key("instrument"),),
            f"in {v['since']}",
        ),
        Ask(
            OPEN_DOMAIN,
            f"Which instrument could {o.name} bring to a jam session?",
            v["instrument"],
            (c.key("instrument"),),
        ),
    ]
    return Beat(o, lines, asks, f"{o.name} has played the {v['instrument']} since {v['since']}.")


def race(c: Ctx) -> Beat:
    o, p, v = c.owner, c.partner, c.values
    phrase, day = past_day(c.rng, c.day)
    city, kind = v["race"]
    lines = [
        Line(o, f"I ran the {city} {kind} {phrase}! Finished {v['place']} in my age group 🏃", c.key("race")),
        Line(p, "That's incredible!! Are you sore?"),
        Line(o, "Legs are dead, totally worth it."),
    ]
    asks = [
        Ask(TEMPORAL, f"When did {o.name} run the {city} {kind}?", fmt_day(c.rng, day), (c.key("race"),), phrase),
        Ask(
            SINGLE_HOP,
            f"Where did {o.name} place in the {city} {kind}?",
            f"{v['place']} in {o.their} age group",
            (c.key("race"),),
        ),
    ]
    return Beat(o, lines, asks, f"{o.name} ran the {city} {kind} and finished {v['place']} in {o.their} age group.")


def sibling(c: Ctx) -> Beat:
    o, p, v = c.owner, c.partner, c.values
    phrase, day = past_day(c.rng, c.day)
    rel, sib = v["sibling"]
    lines = [
        Line(o, f"Family news: my {rel} {sib} got engaged to {v['fiance']} {phrase}!", c.key("sibling")),
        Line(p, c.rng.choice(["Aww congrats to them! Wedding plans yet?", "Yay!! Did you know it was coming?"])),
        Line(o, "They're thinking next summer, by a lake somewhere."),
    ]
    asks = [
        Ask(SINGLE_HOP, f"Who is {o.name}'s {rel} {sib} engaged to?", v["fiance"], (c.key("sibling"),)),
        Ask(TEMPORAL, f"When did {sib} get engaged?", fmt_day(c.rng, day), (c.key("sibling"),), phrase),
    ]
    return Beat(o, lines, asks, f"{o.name}'s {rel} {sib} got engaged to {v['fiance']}.")


def allergy(c: Ctx) -> Beat:
    o, p, v = c.owner, c.partner, c.values
    allergen, dish = v["allergy"]
    lines = [
        Line(p, "Want to try that new place on Main Street sometime?"),
        Line(o, f"Sure, as long as they can skip the {allergen}, I'm allergic.", c.key("allergy")),
        Line(p, "Good to know, I'll remember that!"),
    ]
    asks = [
        Ask(
            OPEN_DOMAIN, f"Would {o.name} enjoy {dish}?", f"No, {o.they} is allergic to {allergen}", (c.key("allergy"),)
        )
    ]
    return Beat(o, lines, asks, f"{o.name} is allergic to {allergen}.")


def course(c: Ctx) -> Beat:
    o, p, v = c.owner, c.partner, c.values
    phrase, day = past_day(c.rng, c.day)
    lines = [
        Line(
            o,
            f"{cap(phrase)} I started a {v['course']} class at the community center, Tuesday evenings.",
            c.key("course"),
        ),
        Line(p, "Fun! What made you sign up?"),
        Line(o, "I needed a hobby that isn't a screen 😅"),
    ]
    asks = [
        Ask(SINGLE_HOP, f"What class did {o.name} start at the community center?", v["course"], (c.key("course"),)),
        Ask(
            TEMPORAL,
            f"When did {o.name} start the {v['course']} class?",
            fmt_day(c.rng, day),
            (c.key("course"),),
            phrase,
        ),
    ]
    return Beat(o, lines, asks, f"{o.name} started a {v['course']} class at the community center.")


def volunteer(c: Ctx) -> Beat:
    o, p, v = c.owner, c.partner, c.values
    lines = [
        Line(p, "Are you free Saturday morning for brunch?"),
        Line(o, f"Not before noon, every Saturday morning I volunteer at the {v['volunteer']}.", c.key("volunteer")),
        Line(p, "That's lovely. Lunch then!"),
    ]
    asks = [
        Ask(
            OPEN_DOMAIN,
            f"Where is {o.name} likely to be on a Saturday morning?",
            f"the {v['volunteer']}",
            (c.key("volunteer"),),
        )
    ]
    return Beat(o, lines, asks, f"{o.name} volunteers at the {v['volunteer']} on Saturday mornings.")


def book(c: Ctx) -> Beat:
    o, p, v = c.owner, c.partner, c.values
    title, author = v["book"]
    lines = [
        Line(o, f"I'm halfway through {title} by {author} and I can't put it down.", c.key("book")),
        Line(p, "Is it worth it? I need something new to read."),
        Line(o, "Totally, I'll lend it to you when I'm done."),
    ]
    asks = [
        Ask(SINGLE_HOP, f"Which book by {author} was {o.name} reading?", title, (c.key("book"),)),
        Ask(OPEN_DOMAIN, f"Which book might {p.name} borrow from {o.name}?", title, (c.key("book"),)),
    ]
    return Beat(o, lines, asks, f"{o.name} is reading {title} by {author}.")


def injury(c: Ctx) -> Beat:
    o, p, v = c.owner, c.partner, c.values
    phrase, day = past_day(c.rng, c.day)
    lines = [
        Line(o, f"I sprained my ankle {phrase} playing {v['sport']} 🤕", c.key("injury")),
        Line(p, c.rng.choice(SYMPATHY)),
        Line(o, f"It's swollen but I'll live. No {v['sport']} for a few weeks though."),
    ]
    asks = [
        Ask(TEMPORAL, f"When did {o.name} sprain {o.their} ankle?", fmt_day(c.rng, day), (c.key("injury"),), phrase),
        Ask(SINGLE_HOP, f"How did {o.name} sprain {o.their} ankle?", f"playing {v['sport']}", (c.key("injury"),)),
    ]
    return Beat(o, lines, asks, f"{o.name} sprained {o.their} ankle playing {v['sport']}.")


def car(c: Ctx) -> Beat:
    o, p, v = c.owner, c.partner, c.values
    phrase, day = past_day(c.rng, c.day)
    c.state["car"] = v["car"]
    lines = [
        Line(
            o,
            f"I bought a used {v['car']} {phrase}, my first car in years!",
            c.key("car"),
            caption=f"a photo of a {v['car']} parked on a street",
        ),
        Line(p, "Road trip!! 🚗"),
    ]
    asks = [
        Ask(SINGLE_HOP, f"What car did {o.name} buy?", v["car"], (c.key("car"),)),
        Ask(TEMPORAL, f"When did {o.name} buy the {v['car']}?", fmt_day(c.rng, day), (c.key("car"),), phrase),
    ]
    return Beat(o, lines, asks, f"{o.name} bought a used {v['car']}.")


def car_sold(c: Ctx) -> Beat:
    o, p = c.owner, c.partner
    lines = [
        Line(
            o,
            f"Update: I sold the {c.state['car']}. I'm riding my bike to work now and honestly I love it.",
            c.key("car2"),
        ),
        Line(p, "Wait, already? Good for you though!"),
    ]
    asks = [
        Ask(OPEN_DOMAIN, f"How does {o.name} get to work these days?", "by bike", (c.key("car2"),)),
        Ask(MULTI_HOP, f"What car did {o.name} buy and later sell?", c.state["car"], (c.key("car"), c.key("car2"))),
    ]
    return Beat(o, lines, asks, f"{o.name} sold the {c.state['car']} and bikes to work.")


def kid(c: Ctx) -> Beat:
    o, p, v = c.owner, c.partner, c.values
    phrase, day = past_day(c.rng, c.day)
    rel, name, age = v["kid"]
    lines = [
        Line(
            o,
            f"{name} turned {age} {phrase}! We threw a {v['theme']} party.",
            c.key("kid"),
            caption=f"a photo of a birthday cake with {age} candles",
        ),
        Line(p, f"Happy birthday {name}!! A {v['theme']} party sounds amazing."),
        Line(o, f"My {rel} had the best time, we're still finding glitter everywhere."),
    ]
    asks = [
        Ask(TEMPORAL, f"When did {o.name}'s {rel} {name} turn {age}?", fmt_day(c.rng, day), (c.key("kid"),), phrase),
        Ask(SINGLE_HOP, f"What was the theme of {name}'s birthday party?", v["theme"], (c.key("kid"),)),
    ]
    return Beat(o, lines, asks, f"{o.name}'s {rel} {name} turned {age} with a {v['theme']} party.")


def concert(c: Ctx) -> Beat:
    o, p, v = c.owner, c.partner, c.values
    phrase, day = past_day(c.rng, c.day)
    band, venue = v["concert"]
    lines = [
        Line(o, f"We saw {band} live {phrase} at the {venue}!", c.key("concert")),
        Line(p, "No way, how were they?"),
        Line(o, "So good, I lost my voice from singing along."),
    ]
    asks = [
        Ask(TEMPORAL, f"When did {o.name} see {band} live?", fmt_day(c.rng, day), (c.key("concert"),), phrase),
        Ask(SINGLE_HOP, f"At which venue did {o.name} see {band}?", f"the {venue}", (c.key("concert"),)),
    ]
    return Beat(o, lines, asks, f"{o.name} saw {band} live at the {venue}.")


def comfort_food(c: Ctx) -> Beat:
    o, p, v = c.owner, c.partner, c.values
    lines = [
        Line(p, "Rough week. What's your go-to comfort food?"),
        Line(o, f"My grandma's {v['dish']}, nothing beats it.", c.key("dish")),
        Line(p, "Okay now I'm hungry."),
    ]
    asks = [Ask(OPEN_DOMAIN, f"What could {p.name} cook to cheer {o.name} up?", v["dish"], (c.key("dish"),))]
    return Beat(o, lines, asks, f"{o.name}'s comfort food is {o.their} grandma's {v['dish']}.")


Fact = Callable[[Ctx], Beat]
EARLY: tuple[Fact, ...] = (job, hometown, flat, instrument, allergy, volunteer, comfort_food)
MIDDLE: tuple[Fact, ...] = (pet, trip_past, race, sibling, course, book, injury, car, kid, concert)
LATE: tuple[Fact, ...] = (trip_future,)
UPDATES: dict[Fact, Fact] = {job: job_update, flat: move, car: car_sold}

# -- value pools (each conversation draws its two people's details without repeats) -------------
POOLS: dict[str, list[Any]] = {
    "job": [
        "nurse",
        "data analyst",
        "graphic designer",
        "line cook",
        "high school teacher",
        "accountant",
        "physiotherapist",
        "bike mechanic",
        "pharmacist",
        "dental hygienist",
    ],
    "company": [
        "Brightline Logistics",
        "Harbor & Finch",
        "Northwind Health",
        "Pixelcraft Studios",
        "Greenleaf Bank",
        "Copperpot Foods",
        "Tidewater Energy",
        "Lumen Schools",
        "Bluebird Clinic",
        "Atlas Freight",
    ],
    "company2": [
        "Summit Analytics",
        "Redwood Medical",
        "Kestrel Games",
        "Oakline Credit Union",
        "Marigold Catering",
        "Ironbridge Labs",
        "Sparrow Design",
        "Cobalt Insurance",
    ],
    "hometown": ["Cork", "Leeds", "Toledo", "Fresno", "Halifax", "Duluth", "Savannah", "Dayton", "Galway", "Spokane"],
    "city": [
        "Denver",
        "Portland",
        "Austin",
        "Columbus",
        "Tucson",
        "Raleigh",
        "Madison",
        "Boise",
        "Pittsburgh",
        "Sacramento",
    ],
    "hood": [
        "Riverside",
        "Old Town",
        "Maple Heights",
        "Eastgate",
        "Cedar Park",
        "Harbor View",
        "Linden Hill",
        "Southbank",
    ],
    "hood2": ["Willow Creek", "Northfield", "Brookside", "Elm Grove", "Stonegate", "Lakeview", "Ashford", "Fairmount"],
    "pet": [
        ("dog", "Biscuit"),
        ("cat", "Miso"),
        ("rabbit", "Pepper"),
        ("dog", "Juniper"),
        ("cat", "Olive"),
        ("parrot", "Ziggy"),
        ("dog", "Nacho"),
        ("cat", "Mochi"),
    ],
    "trip": [
        ("Lisbon", "a work conference"),
        ("Montreal", "my cousin's wedding"),
        ("Kyoto", "a friend's birthday"),
        ("Nashville", "a music festival"),
        ("Edinburgh", "a job interview"),
        ("Oaxaca", "a cooking retreat"),
        ("Prague", "a bachelorette weekend"),
        ("Vancouver", "a family reunion"),
    ],
    "trip2": [
        ("Reykjavik", "a photography tour"),
        ("Barcelona", "my best friend's wedding"),
        ("Seoul", "a work trip"),
        ("Cape Town", "a hiking trip"),
        ("Dublin", "a rugby match"),
        ("Mexico City", "a language course"),
        ("Copenhagen", "a design fair"),
        ("Athens", "my parents' anniversary"),
    ],
    "trip_highlight": [
        "food market",
        "old town at night",
        "boat tour",
        "street music",
        "bookshops",
        "sunset from the castle",
    ],
    "instrument": ["ukulele", "cello", "drums", "saxophone", "banjo", "piano", "violin", "harmonica"],
    "moved": [2009, 2012, 2015, 2016, 2018],
    "since": [2008, 2011, 2013, 2014, 2016, 2017, 2019],
    "race": [
        ("Riverfront", "half marathon"),
        ("Harbor", "10K"),
        ("Hillside", "charity 5K"),
        ("Lakeshore", "half marathon"),
        ("Downtown", "10K"),
        ("Pinecrest", "trail race"),
    ],
    "place": ["3rd", "7th", "12th", "14th", "21st", "5th"],
    "sibling": [
        ("sister", "Tessa"),
        ("brother", "Rory"),
        ("sister", "Dana"),
        ("brother", "Felix"),
        ("sister", "Ruth"),
        ("brother", "Omar"),
        ("sister", "Ingrid"),
        ("brother", "Luca"),
    ],
    "fiance": ["Callum", "Priscilla", "Diego", "Hannah", "Wendell", "Sofia", "Anika", "Bram"],
    "allergy": [
        ("peanuts", "pad thai with crushed peanuts"),
        ("shellfish", "a shrimp boil"),
        ("strawberries", "strawberry shortcake"),
        ("sesame", "sesame noodles"),
        ("walnuts", "walnut brownies"),
        ("kiwi", "a kiwi smoothie"),
    ],
    "course": [
        "pottery",
        "Italian",
        "photography",
        "woodworking",
        "salsa dancing",
        "watercolor",
        "improv",
        "sign language",
    ],
    "volunteer": ["animal shelter", "food bank", "community garden", "public library", "soup kitchen", "bike co-op"],
    "book": [
        ("The Overstory", "Richard Powers"),
        ("Piranesi", "Susanna Clarke"),
        ("Project Hail Mary", "Andy Weir"),
        ("Circe", "Madeline Miller"),
        ("The Remains of the Day", "Kazuo Ishiguro"),
        ("Station Eleven", "Emily St. John Mandel"),
        ("Braiding Sweetgrass", "Robin Wall Kimmerer"),
        ("Klara and the Sun", "Kazuo Ishiguro"),
    ],
    "sport": ["bouldering", "pickleball", "volleyball", "basketball", "tennis", "soccer", "badminton"],
    "car": ["Subaru Outback", "Mini Cooper", "Toyota Prius", "Honda Civic", "Ford Fiesta", "Volvo wagon", "Mazda 3"],
    "kid": [
        ("daughter", "Mia", 6),
        ("son", "Leo", 4),
        ("daughter", "Ava", 8),
        ("son", "Noah", 5),
        ("daughter", "Zoe", 7),
        ("son", "Eli", 9),
    ],
    "theme": ["dinosaur", "mermaid", "space", "pirate", "superhero", "unicorn", "jungle"],
    "concert": [
        ("The Lumineers", "Fillmore"),
        ("Khruangbin", "Greek Theatre"),
        ("Phoebe Bridgers", "Ryman Auditorium"),
        ("Vampire Weekend", "Orpheum"),
        ("Hozier", "Paramount"),
        ("Fleet Foxes", "Riverside Amphitheater"),
    ],
    "dish": [
        "chicken and dumplings",
        "lentil soup",
        "mac and cheese",
        "beef stew",
        "shepherd's pie",
        "potato pierogi",
        "mushroom risotto",
        "chicken pot pie",
    ],
    "years": [2, 3, 4, 5, 6, 8],
}
PAIRS = [
    (Person("Gina", "she", "her"), Person("Jon", "he", "his")),
    (Person("Maya", "she", "her"), Person("Theo", "he", "his")),
    (Person("Priya", "she", "her"), Person("Sam", "he", "his")),
    (Person("Nora", "she", "her"), Person("Ines", "she", "her")),
]
STARTS = [date(2023, 3, 6), date(2022, 9, 12), date(2023, 10, 2), date(2024, 1, 8)]


def draw_values(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two people's details, none shared between them."""
    a, b = {}, {}
    for name, pool in POOLS.items():
        first, second = rng.sample(pool, 2)
        a[name], b[name] = first, second
    for values in (a, b):
        values["pet_they"] = "She" if rng.random() < 0.5 else "He"
    return a, b


# -- small talk ----------------------------------------------------------------------------------
# Each exchange: (speaker, text) with speaker 0 or 1; {me}/{you} are the speaker's / other's names.
OPENERS = (
    "Hey {you}! How's it going?",
    "Hi {you}, happy {weekday}!",
    "Good morning {you} ☀️",
    "{you}!! It's been a few days",
    "Hey hey, you around?",
    "Hiii how was your {weekday}?",
)
REPLIES = (
    "Hey {you}! Doing well, just got home from work.",
    "Hi! Pretty good, a bit tired honestly.",
    "Heyy, all good here. You?",
    "Here! Sorry, slow day. How are you?",
    "Hi {you}! Can't complain 😊",
)
CLOSERS = (
    ("Anyway, I should get some sleep. Talk soon!", "Night {you}!"),
    ("Gotta run, dinner's ready. Bye {you}!", "Bye! Take care 💛"),
    ("Okay I need to get back to work, chat later!", "Talk soon!"),
    ("Phone's about to die, ttyl", "Haha go charge it! Bye"),
    ("I'm off to bed, night!", "Sleep well {you}!"),
)
SMALL_TALK: tuple[tuple[tuple[int, str], ...], ...] = (
    (
        (0, "The weather has been so weird this week"),
        (1, "Right? Sun in the morning and rain by lunch"),
        (0, "I've given up on umbrellas"),
    ),
    (
        (0, "Watching anything good lately?"),
        (1, "Just finished a true crime series, now I can't sleep lol"),
        (0, "Classic. I'm rewatching an old sitcom"),
    ),
    ((0, "What are you having for dinner?"), (1, "Leftover pizza, living the dream 🍕"), (0, "Honestly respect")),
    ((0, "Work has been exhausting this week"), (1, "Same, I can't wait for the weekend"), (0, "Only two more days!")),
    ((0, "I need more coffee today"), (1, "Same, third cup already ☕"), (0, "We have a problem haha")),
    ((0, "My neighbour's dog barked all night"), (1, "Ugh, did you sleep at all?"), (0, "Maybe four hours")),
    (
        (0, "A coworker of mine is training for a marathon"),
        (1, "I could never, I get tired on the stairs"),
        (0, "Haha me too"),
    ),
    (
        (0, "Have you ever been to Lisbon? I keep seeing ads for it"),
        (1, "Not yet, it's on the list though"),
        (0, "Same, one day!"),
    ),
    ((0, "My phone screen cracked again"), (1, "Noo, how?"), (0, "Dropped it in the parking lot, classic me")),
    ((0, "I tried a new recipe last night"), (1, "Oh? How did it turn out?"), (0, "Edible! That's a win")),
    (
        (0, "Any plans for the weekend?"),
        (1, "Not really, probably just cleaning and resting"),
        (0, "Sounds perfect honestly"),
    ),
    ((0, "I finally cleaned out my closet"), (1, "Proud of you, mine is a disaster"), (0, "It took all afternoon")),
    (
        (0, "Did you see the game last night?"),
        (1, "Only the second half, what a finish!"),
        (0, "I was yelling at the TV"),
    ),
    (
        (0, "I'm thinking about getting a plant for my desk"),
        (1, "Get a snake plant, they're impossible to kill"),
        (0, "Perfect for me then"),
    ),
    (
        (0, "Traffic this morning was unreal"),
        (1, "There was an accident on the bridge I think"),
        (0, "That explains it"),
    ),
    ((0, "I started a puzzle and now I'm obsessed"), (1, "How many pieces?"), (0, "A thousand, send help 🧩")),
    (
        (0, "My sister keeps sending me wedding dress photos for her friend"),
        (1, "Haha are they nice?"),
        (0, "All of them look the same to me"),
    ),
    ((0, "I've been reading way less this year"), (1, "Same, my phone ate my attention span"), (0, "Facts")),
    ((0, "Went grocery shopping hungry, big mistake"), (1, "How many snacks did you buy?"), (0, "Too many to admit")),
    ((0, "I want to redo my living room"), (1, "Ooh what style?"), (0, "Something cozy, lots of lamps")),
    (
        (0, "Do you ever get the Sunday scaries?"),
        (1, "Every single week, starting around 4 pm"),
        (0, "Same. I try to go for a walk to shake it off"),
        (1, "That's smart, I just doomscroll"),
    ),
    (
        (0, "I think I'm finally getting the hang of my new phone"),
        (1, "Took me a month with mine"),
        (0, "The camera is wild though, even my blurry photos look okay"),
    ),
    (
        (0, "Guess who forgot their lunch at home again"),
        (1, "Haha you?"),
        (0, "Me. Vending machine crackers it is"),
        (1, "Nutritious!"),
    ),
    (
        (0, "The cafe near my place changed owners"),
        (1, "Is the coffee still good?"),
        (0, "Better actually, and they have oat milk now"),
        (1, "Then it's a win"),
    ),
    (
        (0, "I've been trying to go to bed earlier"),
        (1, "How's that going?"),
        (0, "Badly, I keep watching one more episode 😂"),
    ),
    (
        (0, "My landlord finally fixed the heating"),
        (1, "About time!! It's been weeks"),
        (0, "I almost bought a second duvet"),
    ),
    (
        (0, "Should I get bangs?"),
        (1, "Honestly it's a bold move, but you'd pull it off"),
        (0, "That's what the hairdresser said too"),
        (1, "Then do it and send pics"),
    ),
    (
        (0, "Random question, what's your favorite pizza topping?"),
        (1, "Mushrooms, always. Yours?"),
        (0, "Pineapple, fight me"),
        (1, "No comment 🙃"),
    ),
    (
        (0, "The new season of that baking show is out"),
        (1, "Ooh I need to catch up"),
        (0, "The first episode was chaos, someone dropped a whole cake"),
        (1, "Nooo"),
    ),
    (
        (0, "I'm so tired of meetings that could have been emails"),
        (1, "Story of my life"),
        (0, "Three today, and nothing was decided"),
    ),
    (
        (0, "Have you tried that meal kit thing?"),
        (1, "Once, too much packaging for me"),
        (0, "Yeah that's what put me off too"),
    ),
    (
        (0, "I keep seeing ads for standing desks"),
        (1, "The algorithm knows your back hurts"),
        (0, "It's a little scary how accurate that is"),
    ),
    (
        (0, "My plants are thriving for once"),
        (1, "What changed?"),
        (0, "I stopped watering them every day lol"),
        (1, "Less is more"),
    ),
    (
        (0, "It's been raining nonstop here"),
        (1, "Same here, my shoes are never dry"),
        (0, "I'm ready for summer already"),
    ),
    (
        (0, "I reorganized my whole kitchen yesterday"),
        (1, "Wow, productive! Can you come do mine?"),
        (0, "Only if you pay me in tacos"),
    ),
    (
        (0, "I watched a documentary about octopuses"),
        (1, "They're so smart, it's creepy"),
        (0, "They can open jars!"),
        (1, "Better than me then"),
    ),
    (
        (0, "Is it weird that I like grocery shopping?"),
        (1, "Not at all, it's relaxing"),
        (0, "Right? Walking around with a little plan"),
    ),
    (
        (0, "My neighbor started learning the trumpet"),
        (1, "Oh no, how's your sleep?"),
        (0, "He practices at 7 am sharp"),
        (1, "That's a crime"),
    ),
    ((0, "I got a parking ticket today"), (1, "Ugh, how much?"), (0, "Forty bucks, for being five minutes late")),
    (
        (0, "Do you have any podcast recs?"),
        (1, "I've been into a history one about weird inventions"),
        (0, "Send me the name!"),
        (1, "Will do"),
    ),
)


def small_talk(rng: random.Random, pair: tuple[Person, Person]) -> list[Line]:
    first = rng.randint(0, 1)
    speakers = (pair[first], pair[1 - first])
    return [Line(speakers[s], text) for s, text in rng.choice(SMALL_TALK)]


def greeting(rng: random.Random, pair: tuple[Person, Person], day: date) -> list[Line]:
    first = rng.randint(0, 1)
    a, b = pair[first], pair[1 - first]
    lines = [
        Line(a, rng.choice(OPENERS).format(you=b.name, weekday=f"{day:%A}")),
        Line(b, rng.choice(REPLIES).format(you=a.name)),
    ]
    if rng.random() < 0.5:
        lines.append(Line(a, rng.choice(("Good good 😊", "Same old, same old", "Busy but fine!"))))
    return lines


def closing(rng: random.Random, pair: tuple[Person, Person]) -> list[Line]:
    first = rng.randint(0, 1)
    a, b = pair[first], pair[1 - first]
    bye, reply = rng.choice(CLOSERS)
    return [Line(a, bye.format(you=b.name)), Line(b, reply.format(you=a.name))]


# -- a conversation ------------------------------------------------------------------------------
def plan(rng: random.Random, sessions: int) -> list[tuple[int, Fact]]:
    """One person's facts in telling order, with the sessions they are told in."""
    early = rng.sample(EARLY, 5)
    middle = rng.sample(MIDDLE, 6)
    updated = [f for f in early + middle if f in UPDATES]
    facts = early + middle + list(LATE) + [UPDATES[f] for f in updated]
    third = sessions // 3
    slots = sorted(rng.sample(range(0, third), len(early)))
    slots += sorted(rng.sample(range(third, 2 * third + 2), len(middle)))
    slots += sorted(rng.sample(range(2 * third + 2, sessions), len(facts) - len(early) - len(middle)))
    return list(zip(slots, facts, strict=True))


def joint_asks(pair: tuple[Person, Person], states: tuple[dict[str, Any], dict[str, Any]]) -> list[Ask]:
    """Multi-hop questions over both people."""
    (a, b), (sa, sb) = pair, states
    asks = []
    if "pet" in sa and "pet" in sb:
        asks.append(
            Ask(
                MULTI_HOP,
                f"What are the names of {a.name}'s and {b.name}'s pets?",
                f"{sa['pet'][1]} and {sb['pet'][1]}",
                (f"{a.name}.pet", f"{b.name}.pet"),
            )
        )
    if "instrument" in sa and "instrument" in sb:
        asks.append(
            Ask(
                MULTI_HOP,
                f"Which instruments do {a.name} and {b.name} play?",
                f"{sa['instrument']} and {sb['instrument']}",
                (f"{a.name}.instrument", f"{b.name}.instrument"),
            )
        )
    if "trip" in sa and "trip" in sb:
        asks.append(
            Ask(
                MULTI_HOP,
                f"Which cities did {a.name} and {b.name} travel to?",
                f"{sa['trip']} and {sb['trip']}",
                (f"{a.name}.trip", f"{b.name}.trip"),
            )
        )
    if "company" in sa and "company" in sb:
        asks.append(
            Ask(
                MULTI_HOP,
                f"Which companies did {a.name} and {b.name} work for when they first talked about work?",
                f"{sa['company']} and {sb['company']}",
                (f"{a.name}.job", f"{b.name}.job"),
            )
        )
    return asks


def session_start(rng: random.Random, day: date) -> datetime:
    """Between 7 am and 9 pm: a session (at most ~2 h of turns) never crosses midnight."""
    return datetime.combine(day, time(rng.randint(7, 20), rng.randint(0, 59), rng.randint(0, 59)))


def locomo_date(moment: datetime) -> str:
    """LoCoMo's session date: '1:56 pm on 8 May, 2023'."""
    hour = moment.hour % 12 or 12
    return f"{hour}:{moment:%M} {'am' if moment.hour < 12 else 'pm'} on {moment.day} {moment:%B}, {moment.year}"


def conversation(index: int) -> dict[str, Any]:
    rng = random.Random(SEED * 100 + index)
    pair = PAIRS[index]
    n_sessions = rng.randint(22, 26)
    days, day = [], STARTS[index]
    for _ in range(n_sessions):
        days.append(day)
        day += timedelta(days=rng.randint(2, 7))
    values = draw_values(rng)
    states: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
    by_session: dict[int, list[tuple[int, Fact]]] = {}
    for who in (0, 1):
        for slot, fact in plan(rng, n_sessions):
            by_session.setdefault(slot, []).append((who, fact))
    conv: dict[str, Any] = {"speaker_a": pair[0].name, "speaker_b": pair[1].name}
    events: dict[str, Any] = {}
    where: dict[str, str] = {}  # evidence key -> dia_id
    asks: list[Ask] = []
    for s, day in enumerate(days, start=1):
        lines = greeting(rng, pair, day)
        gists: dict[str, list[str]] = {"agent_a": [], "agent_b": []}
        told = sorted(by_session.get(s - 1, []), key=lambda item: rng.random())
        for who, fact in told:
            if rng.random() < 0.7:
                lines += small_talk(rng, pair)
            beat = fact(Ctx(rng, pair[who], pair[1 - who], day, values[who], states[who]))
            lines += beat.lines
            asks += beat.asks
            gists["agent_a" if who == 0 else "agent_b"].append(beat.gist)
        for _ in range(rng.randint(2, 4) if told else rng.randint(3, 6)):
            lines += small_talk(rng, pair)
        lines += closing(rng, pair)
        moment = session_start(rng, day)
        conv[f"session_{s}_date_time"] = locomo_date(moment)
        turns = []
        for pos, line in enumerate(lines, start=1):
            turn = {
                "speaker": line.who.name,
                "dia_id": f"D{s}:{pos}",
                "text": line.text,
                "timestamp": moment.isoformat(),
            }
            if line.caption:
                turn["blip_caption"] = line.caption
            if line.key:
                where[line.key] = turn["dia_id"]
            turns.append(turn)
            moment += timedelta(seconds=rng.randint(15, 240))
        conv[f"session_{s}"] = turns
        events[f"events_session_{s}"] = gists
    asks += joint_asks(pair, states)
    qa = []
    for ask in asks:
        item: dict[str, Any] = {
            "question": ask.question,
            "answer": ask.answer,
            "evidence": sorted((where[k] for k in ask.keys), key=dia_order),
            "category": ask.category,
        }
        if ask.relative:
            item["relative"] = ask.relative
        qa.append(item)
    qa.sort(key=lambda q: (dia_order(q["evidence"][-1]), q["category"], q["question"]))
    return {"sample_id": f"convset-{index + 1}", "conversation": conv, "qa": qa, "event_summary": events}


def dia_order(dia_id: str) -> tuple[int, int]:
    session, _, position = dia_id[1:].partition(":")
    return int(session), int(position)


def build() -> list[dict[str, Any]]:
    return [conversation(i) for i in range(len(PAIRS))]


def render(data: list[dict[str, Any]]) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.eval.make_convset", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--check", action="store_true", help="only check that --out matches the generator")
    args = parser.parse_args(argv)
    text = render(build())
    if args.check:
        same = args.out.exists() and args.out.read_text(encoding="utf-8") == text
        print(f"{args.out}: {'up to date' if same else 'OUT OF DATE, run without --check'}")
        return 0 if same else 1
    args.out.write_text(text, encoding="utf-8")
    data = json.loads(text)
    n_sessions = sum(sum(k.endswith("_date_time") for k in s["conversation"]) for s in data)
    print(
        f"wrote {args.out}: {len(data)} conversations, {n_sessions} sessions, {sum(len(s['qa']) for s in data)} questions"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
