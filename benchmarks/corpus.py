"""A reproducible synthetic corpus of episodes and of queries with known targets.

Episodes are episode summaries built from templates × slot vocabularies (people,
places, activities, foods, tools, dates, amounts, rare product codes such as
``XJ-482193``). Episode ``i`` depends only on ``(seed, i)``, so the corpus of size
10 000 is the first 10 000 episodes of the corpus of size 100 000 (embeddings cached
for one serve the other).

Queries come in three kinds, each with the id of the one episode it is about:

* ``paraphrase``: the target's activity and food/tool in *other words* (synonyms), plus
  the person's name — the only word shared with the target;
* ``literal``: the person, the activity in the target's own words and the place;
* ``exact``: a rare product code that occurs in the target only.

Paraphrase and literal targets are chosen among episodes whose slot combination is
unique in the corpus, so "the target is in the top 10" is well defined.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from agtos.schemas import Episode

GENERATOR_VERSION = 1
USER_ID = "bench-user"
BASE_TIMESTAMP_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z

PEOPLE = (
    "Mia Lukas Priya Omar Sofia Jonas Aisha Mateo Hana Elias Chloe Ravi Lena Tobias Yuki Nora "
    "Felix Amara Diego Ingrid Kofi Marta Sven Leila Hugo Anya Ibrahim Clara Kenji Zoe Rafael "
    "Freya Tariq Elena Bruno Sakura Nils Fatima Oscar Greta Arjun Lucia Emil Nadia Pablo Astrid "
    "Malik Julia Henrik Mei Samuel Rosa Viktor Imani Luca Signe Hamza Alba Theo Noor Marco Elsa "
    "Dmitri Ayla Bastian Carmen Olu Linnea Farid Paula Anton Zara Kai Ines Moritz Selin Jakob "
    "Wanjiru Leon Ottilie"
).split()

PLACES = (
    "Zermatt Lisbon Kyoto Oslo Marrakesh Vancouver Edinburgh Porto Hamburg Seville Reykjavik "
    "Krakow Tallinn Valencia Bergen Lyon Salzburg Dubrovnik Ghent Bologna Cork Tromso Granada "
    "Ljubljana Brighton Utrecht Innsbruck Galway Trieste Aarhus Nantes Bilbao Freiburg Split "
    "Uppsala Verona Malmo Toulouse Lucerne Plovdiv Cadiz Leiden Tartu Annecy Gdansk Sintra "
    "Heidelberg Bruges Lausanne Matera Kotor Riga Vilnius Coimbra Nice Bled Hallstatt Ronda "
    "Assisi Bamberg"
).split()


@dataclass(frozen=True)
class Concept:
    """Something that happened: how an episode says it and how a query paraphrases it."""

    doc: str
    para: str
    topic: str


ACTIVITIES = (
    Concept("went hiking on the glacier trail", "trekking through icy mountain paths", "hiking"),
    Concept("trained for a half marathon", "jogging practice for a long-distance race", "running"),
    Concept("repaired the bicycle gears", "fixed the shifting on a bike", "cycling"),
    Concept("filed the annual tax return", "did the yearly paperwork for the revenue office", "taxes"),
    Concept(
        "planned a surprise birthday party",
        "organised a secret celebration for turning a year older",
        "party",
    ),
    Concept("studied Spanish vocabulary", "memorised new castilian words", "languages"),
    Concept("practised fingerpicking on the guitar", "played patterns on a six-string instrument", "music"),
    Concept("booked cheap flights", "reserved inexpensive plane tickets", "travel"),
    Concept("painted the living room walls", "put a new colour on the lounge", "home"),
    Concept("prepared for a job interview", "got ready for a hiring conversation with an employer", "career"),
    Concept("visited the dentist for a filling", "had a cavity fixed at the tooth doctor", "health"),
    Concept("went grocery shopping", "bought provisions at the supermarket", "shopping"),
    Concept("adopted a rescue puppy", "took home a young dog from the shelter", "pets"),
    Concept("set up a home server", "configured a basement machine to host services", "tech"),
    Concept("planted tomatoes in the garden", "grew vegetables in the backyard beds", "gardening"),
    Concept("went skiing on fresh powder", "slid down snowy slopes", "skiing"),
    Concept("read a mystery novel", "finished a detective book", "reading"),
    Concept("debugged a memory leak", "tracked down a program hogging RAM", "programming"),
    Concept("wrote a wedding speech", "drafted a toast for the marriage ceremony", "writing"),
    Concept("renewed the passport", "extended the travel document at the consulate", "admin"),
    Concept("went camping by the river", "slept in a tent next to flowing water", "camping"),
    Concept("took a pottery class", "shaped ceramics on a wheel in a workshop", "crafts"),
    Concept("cleaned out the garage", "tidied the car shed", "chores"),
    Concept("did a yoga session", "stretching and breathing exercises on a mat", "fitness"),
    Concept("went swimming at the lido", "did laps in an outdoor pool", "swimming"),
    Concept("bought a used car", "purchased a second-hand vehicle", "cars"),
    Concept("watched a football match", "saw a soccer game in the stadium", "sports"),
    Concept("hosted the book club", "ran a reading group meeting", "books"),
    Concept("assembled flat-pack furniture", "put together shelves from a kit", "diy"),
    Concept("learned to knit a scarf", "made a woolly neck warmer with needles", "crafts"),
    Concept("drew up a household budget", "worked out the monthly spending plan", "finance"),
    Concept("moved into a new apartment", "relocated to a different flat", "moving"),
    Concept("went to a jazz concert", "heard live saxophone music at a club", "concerts"),
    Concept("volunteered at the food bank", "helped hand out meals to people in need", "volunteering"),
    Concept("went trout fishing", "caught freshwater fish with a rod", "fishing"),
    Concept("studied for the driving test", "prepared for the licence exam behind the wheel", "driving"),
    Concept("photographed migrating birds", "took pictures of flocks flying south", "photography"),
    Concept("practised chess openings", "rehearsed the first moves on the board", "chess"),
    Concept("migrated the Postgres database", "moved the SQL data to another server", "databases"),
    Concept("baked sourdough bread", "made a loaf with wild yeast starter", "baking"),
)

FOODS = (
    Concept("lasagna", "layered baked pasta with cheese", "food"),
    Concept("sushi", "raw fish rolls with rice", "food"),
    Concept("ramen", "japanese noodle soup", "food"),
    Concept("pancakes", "flat griddle cakes for breakfast", "food"),
    Concept("tacos", "folded corn tortillas with filling", "food"),
    Concept("curry", "a spicy stew served with rice", "food"),
    Concept("paella", "a saffron rice pan with seafood", "food"),
    Concept("dumplings", "stuffed dough parcels", "food"),
    Concept("croissants", "buttery french pastries", "food"),
    Concept("falafel", "fried chickpea balls", "food"),
    Concept("risotto", "creamy italian rice", "food"),
    Concept("pho", "vietnamese beef noodle broth", "food"),
    Concept("cheesecake", "a creamy dessert on a biscuit base", "food"),
    Concept("goulash", "hungarian paprika stew", "food"),
    Concept("kimchi", "fermented spicy cabbage", "food"),
    Concept("hummus", "a chickpea and tahini dip", "food"),
    Concept("waffles", "grid-patterned batter treats", "food"),
    Concept("bagels", "boiled bread rings", "food"),
    Concept("gnocchi", "little potato dumplings", "food"),
    Concept("fondue", "melted cheese to dip bread in", "food"),
    Concept("burritos", "wrapped flour tortillas with beans", "food"),
    Concept("tiramisu", "coffee-soaked ladyfinger dessert", "food"),
    Concept("moussaka", "aubergine and mince bake", "food"),
    Concept("pierogi", "polish filled half-moon dumplings", "food"),
    Concept("shakshuka", "eggs poached in tomato sauce", "food"),
)

TOOLS = (
    Concept("laptop", "notebook computer", "tools"),
    Concept("wifi router", "wireless internet box", "tools"),
    Concept("cordless drill", "battery-powered screwdriver", "tools"),
    Concept("spreadsheet", "table of numbers in excel", "tools"),
    Concept("3D printer", "machine that prints plastic objects layer by layer", "tools"),
    Concept("e-reader", "digital ink tablet for books", "tools"),
    Concept("sewing machine", "stitching appliance", "tools"),
    Concept("pressure cooker", "sealed pot that cooks fast with steam", "tools"),
    Concept("drone", "small flying camera copter", "tools"),
    Concept("smartwatch", "wrist gadget that tracks the pulse", "tools"),
    Concept("espresso machine", "coffee maker with a portafilter", "tools"),
    Concept("telescope", "stargazing lens tube", "tools"),
    Concept("label printer", "gadget that prints sticky name tags", "tools"),
    Concept("robot vacuum", "automatic floor-cleaning disc", "tools"),
    Concept("soldering iron", "hot pen for joining electronics", "tools"),
    Concept("kayak", "narrow paddle boat", "tools"),
    Concept("tent", "portable fabric shelter", "tools"),
    Concept("synthesizer", "electronic keyboard that makes sounds", "tools"),
    Concept("air fryer", "countertop hot-air cooker", "tools"),
    Concept("mechanical keyboard", "clicky typing board", "tools"),
)
OBJECTS = FOODS + TOOLS

MONTHS = "January February March April May June July August September October November December".split()
WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
RELATIONS = "sister brother cousin neighbour colleague manager friend partner aunt uncle flatmate".split()
JOBS = "nurse architect teacher welder pharmacist translator plumber barista accountant pilot".split()
CODE_LETTERS = "XJ QB ZK VR TM PX WD KL GH NY".split()

TEMPLATES = (
    "{Person} and the user {act} near {place} on {date}. {extra}",
    "On {date} the user {act} with {person} in {place}; {extra_lc}",
    "The user {act} in {place} together with {person}. {extra}",
    "Talked about how the user {act} with {person} during a trip to {place} on {date}. {extra}",
    "The user said they {act} in {place} and that {person} came along. {extra}",
    "Recap: {act} ({place}, {date}) with {person}. {extra}",
    "The user asked for tips after they {act} with {person} near {place}. {extra}",
    "While in {place} the user {act}; {person} joined on {date}. {extra}",
)

FOOD_EXTRAS = (
    "Afterwards they shared {obj} at a small place nearby.",
    "They cooked {obj} together in the evening.",
    "{Person} brought homemade {obj}.",
    "Dinner was {obj}, which the user rated {score} out of 10.",
)
TOOL_EXTRAS = (
    "They needed the {obj} for it.",
    "{Person} lent the user a {obj}.",
    "The user ordered a new {obj} for {amount} euros.",
    "Most of the time went into setting up the {obj}.",
)
CODE_EXTRAS = (
    "The order number was {code}.",
    "Reference {code} was mentioned for the booking.",
    "The user noted the serial {code} on the receipt.",
    "Part {code} had to be replaced.",
)
FACT_TEMPLATES = (
    "User's {relation} is called {person}.",
    "User is allergic to {food}.",
    "User prefers {food} over {food2}.",
    "User works as a {job}.",
    "User lives in {place}.",
    "User likes {food}.",
)


@dataclass(frozen=True)
class Slots:
    person: str
    activity: int
    place: str
    obj: int
    code: str | None


@dataclass(frozen=True)
class Query:
    text: str
    kind: str  # paraphrase | literal | exact
    target_id: str


def episode_id(i: int) -> str:
    return f"ep-{i:07d}"


def product_code(i: int, rng: random.Random) -> str:
    """Unique for i < 10**6: a bijection of i (7919 is coprime with 10**6)."""
    return f"{rng.choice(CODE_LETTERS)}-{(i * 7919 + 104_729) % 1_000_000:06d}"


def _slots(seed: int, i: int) -> tuple[Slots, random.Random]:
    rng = random.Random(seed * 1_000_003 + i)
    person = rng.choice(PEOPLE)
    activity = rng.randrange(len(ACTIVITIES))
    place = rng.choice(PLACES)
    obj = rng.randrange(len(OBJECTS))
    code = product_code(i, rng) if rng.random() < 0.15 else None
    return Slots(person, activity, place, obj, code), rng


def make_episode(seed: int, i: int) -> Episode:
    """Episode ``i`` of the corpus (deterministic in ``seed`` and ``i``)."""
    s, rng = _slots(seed, i)
    act, obj = ACTIVITIES[s.activity], OBJECTS[s.obj]
    date = f"{rng.choice(WEEKDAYS)} {rng.randint(1, 28)} {rng.choice(MONTHS)}"
    fmt = {
        "person": s.person,
        "Person": s.person,
        "obj": obj.doc,
        "score": rng.randint(3, 10),
        "amount": rng.randrange(20, 900, 5),
    }
    extras = FOOD_EXTRAS if obj.topic == "food" else TOOL_EXTRAS
    extra = rng.choice(extras).format(**fmt)
    if s.code is not None:
        extra += " " + rng.choice(CODE_EXTRAS).format(code=s.code)
    summary = rng.choice(TEMPLATES).format(
        person=s.person,
        Person=s.person,
        act=act.doc,
        place=s.place,
        date=date,
        extra=extra,
        extra_lc=extra[0].lower() + extra[1:],
    )
    facts: list[str] = []
    if rng.random() < 0.2:
        facts.append(
            rng.choice(FACT_TEMPLATES).format(
                relation=rng.choice(RELATIONS),
                person=rng.choice(PEOPLE),
                food=rng.choice(FOODS).doc,
                food2=rng.choice(FOODS).doc,
                job=rng.choice(JOBS),
                place=rng.choice(PLACES),
            )
        )
    keywords = [act.topic, obj.doc.split()[-1].lower(), s.place.lower()]
    return Episode(
        id=episode_id(i),
        user_id=USER_ID,
        session_id=f"sess-{i:07d}",
        summary=summary,
        keywords=keywords,
        topic=act.topic,
        timestamp=BASE_TIMESTAMP_MS + i * 60_000,
        importance=round(rng.uniform(0.3, 0.9), 2),
        facts=facts,
    )


PARAPHRASE_FORMS = (
    "that time {para_act} with {person}, and we had {para_obj}",
    "when did I go {para_act} with {person}? there was {para_obj}",
    "{person} and me {para_act}, remember the {para_obj}",
    "the day of {para_act} alongside {person} and {para_obj}",
)
LITERAL_FORMS = ("{person} {act} {place}", "{act} with {person} in {place}", "{place} {person} {act}")
EXACT_FORMS = ("{code}", "what was {code} about", "order {code}", "details for {code}")


def make_queries(seed: int, n_docs: int, per_kind: int) -> list[Query]:
    """``per_kind`` queries of each kind, distinct strings, targets drawn from the corpus."""
    slots = [_slots(seed, i)[0] for i in range(n_docs)]
    para_key = Counter((s.person, s.activity, s.obj) for s in slots)
    literal_key = Counter((s.person, s.activity, s.place) for s in slots)
    rng = random.Random(f"queries-{seed}-{n_docs}")
    order = list(range(n_docs))
    rng.shuffle(order)
    out: dict[str, Query] = {}
    counts = Counter[str]()
    for i in order:
        s = slots[i]
        act, obj = ACTIVITIES[s.activity], OBJECTS[s.obj]
        preferred = ("paraphrase", "literal", "exact")[len(out) % 3]
        for kind in (preferred, "paraphrase", "literal", "exact"):
            if counts[kind] >= per_kind:
                continue
            if kind == "paraphrase" and para_key[(s.person, s.activity, s.obj)] == 1:
                text = rng.choice(PARAPHRASE_FORMS).format(para_act=act.para, person=s.person, para_obj=obj.para)
            elif kind == "literal" and literal_key[(s.person, s.activity, s.place)] == 1:
                text = rng.choice(LITERAL_FORMS).format(person=s.person, act=act.doc, place=s.place)
            elif kind == "exact" and s.code is not None:
                text = rng.choice(EXACT_FORMS).format(code=s.code)
            else:
                continue
            if text not in out:
                out[text] = Query(text, kind, episode_id(i))
                counts[kind] += 1
            break
        if all(counts[k] >= per_kind for k in ("paraphrase", "literal", "exact")):
            break
    queries = list(out.values())
    random.Random(seed).shuffle(queries)
    return queries


def warmup_queries(n: int) -> list[str]:
    """Distinct warm-up strings that are not among the measured queries."""
    rng = random.Random("warmup")
    return [
        f"warm-up {k}: {rng.choice(ACTIVITIES).para} in {rng.choice(PLACES)} with {rng.choice(PEOPLE)}"
        for k in range(n)
    ]
