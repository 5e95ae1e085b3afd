"""Tests written for bugs planted in the code landed in 19bc6d2..244532e (issue 20's audit; docs/testing.md):
tokenizer v3's upgrade, entity keys, dates, keywords, the session end lock and the id patterns. Each test
fails with its planted one-line bug in a copy of HEAD and passes without it.

Expected values are literals: words and code points from the languages' dictionaries and Unicode (U+093E
DEVANAGARI VOWEL SIGN AA), calendar facts written out by hand (8 May 2023 was a Monday)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from agtos.tasks import bm25
from tests.helpers import end_session, talk, user
from tests.test_entity_marks import THANKS
from tests.test_episode_gist import two_people
from tests.test_ingest_queue import KEYBOARD, end
from tests.test_tokenizer_v3 import DAAL, DAL, ended, found, version_2
from tests.test_turn_dates import MAY_8, dates


def _api(settings: Settings) -> Iterator[TestClient]:
    coordinator = MemoryCoordinator(settings)
    with TestClient(create_app(coordinator=coordinator)) as client:
        yield client
    coordinator.close()


def test_an_index_upgraded_by_another_process_still_finds_its_older_marked_words(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planted: a process that finds the index already upgraded (a restart, a second API process) ignoring
    the index's ``marks`` flag, so its searches no longer look up the older, mark-less forms: "दाल"
    (lentils), stored by version 2 as "दल", was found by the upgrading process only."""
    with monkeypatch.context() as old:
        old.setattr(bm25, "tokenize", version_2)
        old.setattr(bm25, "TOKENIZER_VERSION", 2)
        for client in _api(settings):
            ended(client, "ivy", "meal", f"At the market I bought {DAAL} for tonight.")
    for upgrader in _api(settings):
        assert found(upgrader, "ivy", DAAL) == ["meal"]  # this process upgrades the index
    for restarted in _api(settings):  # finds it current, with its marks flag
        assert found(restarted, "ivy", DAAL) == ["meal"]
        ended(restarted, "ivy", "party", f"My sister joined the {DAL} last year.")
        assert set(found(restarted, "ivy", DAL)) == {"meal", "party"}


def test_while_another_process_upgrades_the_index_a_search_still_finds_older_marked_words(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, raw_redis: Any, key_prefix: str
) -> None:
    """Planted: a search made while another process holds the upgrade lock looking up only the current
    terms: the index still holds version 2's "दल" for "दाल", so the search found nothing until that
    upgrade ended."""
    with monkeypatch.context() as old:
        old.setattr(bm25, "tokenize", version_2)
        old.setattr(bm25, "TOKENIZER_VERSION", 2)
        for client in _api(settings):
            ended(client, "ivy", "meal", f"At the market I bought {DAAL} for tonight.")
    metas = [k.decode() for k in raw_redis.scan_iter(match=f"{key_prefix}:*bm25:meta", count=1_000)]
    assert metas
    for meta in metas:  # another process is upgrading every index of the user
        raw_redis.set(meta.removesuffix("meta") + "upgrade", "another-process", px=60_000)
    for client in _api(settings):
        assert found(client, "ivy", DAAL) == ["meal"]


HINDI, HIND = "\u0939\u093f\u0902\u0926\u0940", "\u0939\u093f\u0902\u0926"  # हिंदी (Hindi), हिंद (Hind, India)


def test_a_word_ending_in_a_vowel_sign_keeps_it(client: TestClient) -> None:
    """Planted: the word pattern letting a mark stand inside a word but not end it, so "हिंदी" (ending in
    U+0940 DEVANAGARI VOWEL SIGN II) was cut to "हिंद", another word."""
    ended(client, "hari", "one", f"I am learning {HINDI} at the evening school.")
    ended(client, "hari", "two", f"We sang a song about {HIND} at the festival.")
    assert found(client, "hari", HINDI) == ["one"]
    assert found(client, "hari", HIND) == ["two"]


def test_hebrew_vowel_points_are_folded_like_accents(client: TestClient) -> None:
    """Planted: Hebrew's points (U+05B0-U+05BD...) left out of the marks folded away, so "שָׁלוֹם" written
    with its points and "שלום" (shalom) without were two words."""
    ended(client, "dana", "one", "My grandmother always greets me with \u05e9\u05b8\u05c1\u05dc\u05d5\u05b9\u05dd.")
    ended(client, "dana", "two", "I rented a small boat on the lake for the afternoon.")
    assert found(client, "dana", "\u05e9\u05dc\u05d5\u05dd") == ["one"]


def test_a_fact_with_a_spacing_vowel_sign_keeps_the_id_it_had_before_version_3(client: TestClient) -> None:
    """Planted: ids dropping only nonspacing marks (Mn), not spacing ones (Mc): "दाल"'s U+093E DEVANAGARI
    VOWEL SIGN AA is Mc, and version 2 dropped every mark ("i love दल"), so the fact got a second record."""
    answer = client.post("/api/memory/memories", json={"text": f"I love {DAAL}", "kind": "fact"}, headers=user("mia"))
    assert answer.status_code == 201, answer.text
    digest = hashlib.sha256(f"mia\x00i love {DAL}".encode()).hexdigest()[:16]
    assert answer.json()["memory"]["id"] == f"mem-{digest}"


def test_a_surface_whose_old_key_another_entity_owns_stays_with_that_entity(
    client: TestClient, coordinator: MemoryCoordinator, raw_redis: Any
) -> None:
    """Planted: an alias joining the matched entity when *any* of its keys is free rather than all: "Bjørn",
    owned under its old key "bj rn" (before names kept their marks: ASCII letters only) by another entity,
    was taken as an alias of "Bjørn Larsen" (a name another entity owns stays with that entity)."""
    store, u = coordinator.entities.store, "bjorn-user"
    coordinator.entities.similarity_threshold = 1.01  # names join by their keys only, not by similar vectors
    assert talk(client, u, "s1", ("user", "I went hiking with Bjørn Larsen on Monday."), *THANKS)["saved"]
    assert talk(client, u, "s2", ("user", "My cousin Bob fixed my bike on Tuesday."), *THANKS)["saved"]
    people = {e["name"]: e for e in persons_of(client, u)}
    full, short = people["Bjørn Larsen"], people["Bob"]
    renamed = client.put(f"/api/entities/{short['id']}", json={"name": "Bjørn"}, headers=user(u))
    assert renamed.status_code == 200, renamed.text
    alias, names = store.index(u, "alias"), store.index(u, "names")
    raw_redis.hdel(alias, "bjørn")  # "Bjørn" as the code before stored it: under "bj rn" only
    raw_redis.zrem(names, f"bjørn|{short['id']}")
    assert raw_redis.hget(alias, "bj rn") == short["id"].encode()
    said = "I went hiking with Bjørn Larsen on Sunday. Later Bjørn drove us home and Bjørn cooked dinner."
    assert talk(client, u, "s3", ("user", said), *THANKS)["saved"]
    after = {e["id"]: e for e in persons_of(client, u)}
    assert "Bjørn" not in after[full["id"]]["aliases"], after[full["id"]]
    assert len(after[full["id"]]["episodeIds"]) == 2
    assert after[short["id"]]["name"] == "Bjørn"


def test_an_entity_stored_under_its_old_key_is_found_by_its_name_with_a_curly_possessive(
    client: TestClient, coordinator: MemoryCoordinator, raw_redis: Any
) -> None:
    """Planted: the old key dropping only a straight "'s", not "’s" (as the code before did both): a search
    for "Bjørn Larsen’s" looked up "bj rn larsen s" and missed the entity stored under "bj rn larsen"."""
    store, u = coordinator.entities.store, "bjorn-user"
    coordinator.entities.similarity_threshold = 1.01
    assert talk(client, u, "s1", ("user", "I went hiking with Bjørn Larsen on Monday."), *THANKS)["saved"]
    [bjorn] = [e for e in persons_of(client, u) if e["name"] == "Bjørn Larsen"]
    alias, names = store.index(u, "alias"), store.index(u, "names")
    raw_redis.hdel(alias, "bjørn larsen")  # as the code before stored it: ASCII letters and digits only
    raw_redis.zrem(names, f"bjørn larsen|{bjorn['id']}")
    raw_redis.hset(alias, "bj rn larsen", bjorn["id"])
    raw_redis.zadd(names, {f"bj rn larsen|{bjorn['id']}": 0})
    for q in ("Bjørn Larsen's", "Bjørn Larsen\u2019s"):
        answer = client.get("/api/entities", params={"q": q}, headers=user(u))
        assert [e["id"] for e in answer.json()["entities"]] == [bjorn["id"]], q


def test_names_apart_only_by_a_trailing_plus_or_hash_are_two_entities(client: TestClient) -> None:
    """Planted: name words without their trailing "+"/"#", so "C++" and "C#" had one key ("c") and renaming
    a second entity to "C#" was refused as a name the first owned."""
    u = "lang-user"
    assert talk(client, u, "s1", ("user", "Alice and Bob flew to Lisbon on Monday."), *THANKS)["saved"]
    ids = {e["name"]: e["id"] for e in persons_of(client, u)}
    for old, new in (("Alice", "C++"), ("Bob", "C#")):
        renamed = client.put(f"/api/entities/{ids[old]}", json={"name": new}, headers=user(u))
        assert renamed.status_code == 200, renamed.text
    for q, old in (("C++", "Alice"), ("C#", "Bob")):
        answer = client.get("/api/entities", params={"q": q}, headers=user(u))
        assert [e["id"] for e in answer.json()["entities"]] == [ids[old]], q


def persons_of(client: TestClient, who: str) -> list[dict[str, Any]]:
    response = client.get("/api/entities", params={"type": "person", "limit": 100}, headers=user(who))
    assert response.status_code == 200, response.text
    return response.json()["entities"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # an adverb between "have" and the participle: still a present perfect; 3 / 10 years before Mon 8 May 2023
        ("We have actually lived in Lyon for 3 years", [("for 3 years", "2020-05-08", "year")]),
        ("I have really played the piano for about 10 years", [("for about 10 years", "2013-05-08", "year")]),
        ("I've lived in Lyon for the past 3 years", [("for the past 3 years", "2020-05-08", "year")]),
        ("I have owned this car for 5 years", [("for 5 years", "2018-05-08", "year")]),
        ("We've been married for nearly 20 years", [("for nearly 20 years", "2003-05-08", "year")]),
        # a present perfect in another clause or sentence says nothing of this span (still to come)
        ("I've been so busy lately, but I'll be away for two weeks", []),
        ("I've been busy. I'll be away for two weeks", []),
    ],
)
def test_a_span_is_dated_from_now_only_in_its_own_present_perfect_clause(
    text: str, expected: list[tuple[str, str, str]]
) -> None:
    """Planted: the present perfect looked for from the start of the text rather than of the span's clause
    (the last two cases dated "two weeks ago"), and without the one word allowed between "have" and the
    participle (the first two left unresolved); "the past" / "nearly" left out of the words before a count,
    "owned" out of the participles."""
    assert dates(text, MAY_8) == expected


CHEERS = [
    ("Mia", "Congrats Congrats on the new puppy! What breed is she?"),
    ("Sam", "A beagle, she chewed my slippers on the first night."),
    ("Mia", "Go Go Go, you will need a crate and a chew toy for the beagle."),
    ("Sam", "Wait Wait, my vet said the same thing about the crate."),
]


def test_a_word_said_twice_in_a_row_is_no_keyword_phrase(client: TestClient) -> None:
    """Planted: capitalised phrases kept as keywords though they repeat one word, so the cheers "Congrats
    Congrats", "Go Go Go" and "Wait Wait" came first among the keywords of a chat about a beagle puppy."""
    ended = end_session(client, "mia", "puppy", two_people("Mia", CHEERS))
    keywords = ended["episode"]["keywords"]
    assert {"beagle", "puppy", "crate"} <= set(keywords), keywords
    assert all(len(set(k.split())) == len(k.split()) for k in keywords), keywords


COSTA_RICA = [
    ("Eva", "We spent two weeks in Costa Rica in March."),
    ("Tom", "Did you like the Costa Rican food?"),
    ("Eva", "Yes, Costa Rica has great coffee and the Costa Rican beaches are empty."),
]
CALLED_BY_NAME = [
    ("Nora", "Ben, my spin class at the new studio downtown was brutal."),
    ("Ben", "Nora, you always pick the hardest instructor!"),
    ("Nora", "Ben, the techno was loud but I love it."),
    ("Ben", "Good for you Nora, I stick to rowing."),
]


def test_a_phrase_is_dropped_only_inside_a_longer_phrase_not_a_longer_word(client: TestClient) -> None:
    """Planted: the sub-phrase rule matching characters rather than whole words, so "costa rica", a string
    inside "costa rican", was dropped and its "rica" shown alone."""
    ended = end_session(client, "eva", "trip", two_people("Eva", COSTA_RICA))
    keywords = ended["episode"]["keywords"]
    assert keywords[:2] == ["costa rica", "costa rican"], keywords
    assert "rica" not in keywords


def test_speakers_called_by_name_are_not_keywords(client: TestClient) -> None:
    """Planted: the speakers' names left out of the words a keyword may not be: "ben" and "nora", said at the
    start of most turns, were among the keywords of every episode of theirs."""
    ended = end_session(client, "nora", "spin", two_people("Nora", CALLED_BY_NAME))
    keywords = ended["episode"]["keywords"]
    assert {"spin", "techno", "rowing", "instructor"} <= set(keywords), keywords
    assert not {"nora", "ben"} & set(keywords), keywords


def test_singular_and_plural_said_as_often_show_the_shorter_form(client: TestClient) -> None:
    """Planted: the tie between a word's forms broken towards the longer one ("lakes" for "lake" and
    "lakes" each said once)."""
    lines = [
        ("Ana", "We swam in two lakes this week."),
        ("Leo", "Which one was the coldest?"),
        ("Ana", "The mountain lake, the water was freezing."),
    ]
    keywords = end_session(client, "ana", "swim", two_people("Ana", lines))["episode"]["keywords"]
    assert "lake" in keywords and "lakes" not in keywords, keywords


def test_a_topic_word_among_the_keywords_counts_twice(client: TestClient) -> None:
    """Planted: the topic scored by the distinct lexicon words said only, so two food verbs said six times
    ("cook", "eat") outweighed the chat's keywords "deadline" and "client" (work): topic food, not work."""
    lines = [
        ("Ana", "The client moved the deadline to Monday, so I cook tonight and we eat late."),
        ("Leo", "Fine, I cook the rice and you eat first."),
        ("Ana", "We eat together then, I cook the fish."),
    ]
    ended = end_session(client, "ana", "deadline", two_people("Ana", lines))["episode"]
    assert {"deadline", "client"} <= set(ended["keywords"]), ended["keywords"]
    assert ended["topic"] == "work"


def memories_of(client: TestClient, who: str) -> set[str]:
    answer = client.get("/api/memory/memories", headers=user(who))
    assert answer.status_code == 200, answer.text
    return {m["text"] for m in answer.json()["memories"]}


def test_a_named_subject_is_someone_only_if_rare_or_a_speaker(client: TestClient) -> None:
    """Planted: the bound for a capitalised word to be a name lowered from the 1,000 most common English words
    to 100 ("music", about the 200th, became someone: "Music was way too loud at the party" a fact), and a
    statement's subject looked up among the speakers' names only ("Sofia doesn't eat fish at all" no fact)."""
    lines = [
        ("Lena", "How was the party on Saturday?"),
        ("Paul", "Music was way too loud at the party."),
        ("Paul", "Sofia doesn't eat fish at all, so we grilled vegetables."),
    ]
    assert end_session(client, "lena", "party", two_people("Lena", lines))["saved"]
    said = memories_of(client, "lena")
    assert "Sofia doesn't eat fish at all" in said, said
    assert not any(m.startswith("Music") for m in said), said


def test_chat_spellings_are_read_whatever_their_case(client: TestClient) -> None:
    """Planted: "im", "dont", "ive" matched in lower case only, so "Im a nurse at the city hospital" opening a
    turn was no statement (no fact) and "im", "dont", "ive" became keywords."""
    lines = [
        ("Lena", "Im a nurse at the city hospital."),
        ("Paul", "Dont you work nights there?"),
        ("Lena", "Ive worked nights for two years at the hospital."),
    ]
    ended = end_session(client, "lena", "nurse", two_people("Lena", lines))
    assert "Lena is a nurse at the city hospital" in memories_of(client, "lena")
    assert not {"im", "dont", "ive"} & set(ended["episode"]["keywords"]), ended["episode"]["keywords"]


def test_words_the_vocabulary_does_not_hold_are_the_rarest(client: TestClient) -> None:
    """Planted: a word out of the embedder's vocabulary ranked as the commonest, not the rarest: "kombucha" and
    "sourdough", what the chat was about, fell out of its keywords."""
    lines = [
        ("Lena", "This weekend I brewed kombucha and baked sourdough bread."),
        ("Paul", "Kombucha is tricky, how long did it ferment?"),
        (
            "Lena",
            "The kombucha took ten days, the sourdough starter is older than my car, my house plants and my garden.",
        ),
        ("Paul", "My neighbour sells sourdough at the market near the station every morning."),
    ]
    keywords = end_session(client, "lena", "brew", two_people("Lena", lines))["episode"]["keywords"]
    assert keywords[:2] == ["kombucha", "sourdough"], keywords


def test_an_agent_chat_with_statements_still_counts_for_habits(client: TestClient) -> None:
    """Planted: ``between_people`` remembered in the statements' cache, so an agent chat whose statements were
    read first answered with them (a non-empty tuple: "between people") and its topics made no habit: no
    "User regularly asks about weather" after two weather sessions in which the user said they are vegetarian."""
    for session in ("w1", "w2"):
        ended = talk(
            client,
            "wes",
            session,
            ("user", "What is the weather forecast for Lisbon tomorrow? I am vegetarian by the way."),
            ("assistant", "Sunny and warm, 24 degrees, light wind."),
            ("user", "Will it rain in Lisbon at the weekend? I need an umbrella for the market."),
            ("assistant", "No rain expected, the temperature stays warm."),
        )
        assert ended["saved"], ended
    answer = client.get("/api/memory/conclusions", params={"type": "inductive"}, headers=user("wes"))
    assert answer.status_code == 200, answer.text
    texts = {c["text"] for c in answer.json()["conclusions"]}
    assert "User regularly asks about weather" in texts, texts
    explicit = client.get("/api/memory/conclusions", params={"type": "explicit"}, headers=user("wes")).json()
    assert explicit["conclusions"], explicit  # the statements were read


def test_a_session_end_lock_expires_within_60_seconds_and_is_released(
    client: TestClient, coordinator: MemoryCoordinator, raw_redis: Any, key_prefix: str
) -> None:
    """Planted: the end lock set with ``ex`` (seconds) instead of ``px`` (ms): a holder that died kept the
    session from being ended for 60,000 s, not the 60 s the lock promises. Read during an end through HTTP."""
    journal = coordinator.services.journal
    read, ttls = journal.read, []

    def hooked(user_id: str, session_id: str) -> Any:
        ttls.extend(raw_redis.pttl(k) for k in raw_redis.scan_iter(match=f"{key_prefix}:*ending*", count=1_000))
        return read(user_id, session_id)

    journal.read = hooked  # type: ignore[method-assign]
    assert talk(client, "lok", "s1", ("user", "My locker code at the gym is 4471."), ("assistant", "Noted."))
    assert len(ttls) == 1 and 0 < ttls[0] <= 60_000, ttls
    assert list(raw_redis.scan_iter(match=f"{key_prefix}:*ending*", count=1_000)) == []  # released


def test_an_end_of_one_user_does_not_wait_for_another_users_end_of_the_same_session_id(
    client: TestClient, coordinator: MemoryCoordinator
) -> None:
    """Planted: the end lock keyed by the session id without its user, so bob's end of "s1" waited while ann's
    end of her own "s1" held the lock (for up to 60 s if her process died): users' sessions are isolated."""
    journal = coordinator.services.journal
    read, bob_done, in_time = journal.read, threading.Event(), []
    for who in ("ann", "bob"):
        turns = {"turns": [{"role": "user", "content": f"My name is {who} and my locker code is 4471."}]}
        assert client.post("/api/memory/sessions/s1/turns", json=turns, headers=user(who)).status_code == 200

    def bob_ends() -> None:
        assert client.post("/api/memory/sessions/s1/end", headers=user("bob")).status_code == 200
        bob_done.set()

    bob = threading.Thread(target=bob_ends, daemon=True)

    def hooked(user_id: str, session_id: str) -> Any:
        if user_id == "ann":  # ann's end holds her lock here while bob ends his session
            bob.start()
            in_time.append(bob_done.wait(30))
        return read(user_id, session_id)

    journal.read = hooked  # type: ignore[method-assign]
    assert client.post("/api/memory/sessions/s1/end", headers=user("ann")).status_code == 200
    bob.join(90)
    assert in_time == [True] and bob_done.is_set()


@pytest.mark.parametrize("path", ["/openapi.json", "/docs", "/health"])
def test_a_405_allows_head_once_where_the_route_serves_head_itself(client: TestClient, path: str) -> None:
    """Planted: HEAD added to a 405's Allow for every path that serves GET, though Starlette's own routes (the
    OpenAPI document, the docs page) already list it: "Allow: GET, HEAD, HEAD" (RFC 9110: a list of methods)."""
    answer = client.request("DELETE", path)
    assert answer.status_code == 405
    assert answer.headers["allow"] == "GET, HEAD"


@pytest.fixture
def queued(settings: Settings) -> Iterator[tuple[TestClient, MemoryCoordinator]]:
    """An API process in queue mode without a worker thread of its own."""
    coordinator = MemoryCoordinator(settings.with_overrides(ingest_mode="queue", ingest_worker=False))
    with TestClient(create_app(coordinator=coordinator)) as client:
        yield client, coordinator
    coordinator.close()


def test_a_queued_end_estimates_its_wait_from_its_place_in_the_queue(
    queued: tuple[TestClient, MemoryCoordinator],
) -> None:
    """Planted: the estimate made for place 0 whatever the end's place, so a job behind two others was said to
    be searchable in 0.0 s. README: position x mean job time / live workers; one worker of another process is
    alive (its heartbeat) and has done no job yet, when a job is taken as 1 s: places 1, 2, 3 are 1, 2, 3 s."""
    queue_client, queue_coordinator = queued
    queue_coordinator.ingest_queue.heartbeat("worker-elsewhere")
    said = [[{**turn, "content": f"{turn['content']} (take {n})"} for turn in KEYBOARD] for n in range(3)]
    ends = [end(queue_client, "qu", f"s{n}", turns) for n, turns in enumerate(said)]
    assert [(e["status"], e["queuePosition"], e["searchableInS"]) for e in ends] == [
        ("queued", 1, 1.0),
        ("queued", 2, 2.0),
        ("queued", 3, 3.0),
    ], ends


def test_a_common_word_capitalised_after_a_comma_is_a_name(client: TestClient) -> None:
    """Planted: a capital after a comma not read as a name ("my brother, Mark,"), so "Mark", one of the
    1,000 commonest English words, was no one and "Mark moved to Denver ..." no fact."""
    lines = [
        ("Lena", "I called my brother, Mark, on Sunday."),
        ("Paul", "How is he doing?"),
        ("Lena", "Mark moved to Denver last spring with the whole family."),
    ]
    assert end_session(client, "lena", "mark", two_people("Lena", lines))["saved"]
    assert any(m.startswith("Mark moved to Denver") for m in memories_of(client, "lena"))


def test_short_time_words_are_no_keywords(client: TestClient) -> None:
    """Planted: time words kept only from 4 letters on, so "min" (dateparser's English word for minutes),
    said three times, became the first keyword of a chat about a bakery."""
    lines = [
        ("Lena", "The bakery is a 10 min walk from the station, 5 min by bike."),
        ("Paul", "Only 5 min? The croissants there sell out by 8."),
        ("Lena", "Give it 20 min on a Sunday, the queue for croissants is long."),
    ]
    keywords = end_session(client, "lena", "bakery", two_people("Lena", lines))["episode"]["keywords"]
    assert {"croissants", "bakery"} <= set(keywords) and "min" not in keywords, keywords
