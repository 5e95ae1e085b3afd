"""Tests written for bugs planted in the code landed in 19bc6d2..244532e (issue 20's audit; docs/testing.md):
tokenizer v3's upgrade, entity keys, dates, keywords, the session end lock and the id patterns. Each test
fails with its planted one-line bug in a copy of HEAD and passes without it.

Expected values are literals: words and code points from the languages' dictionaries and Unicode (U+093E
DEVANAGARI VOWEL SIGN AA), calendar facts written out by hand (8 May 2023 was a Monday)."""

from __future__ import annotations

import hashlib
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
    participle (the first two left unresolved); "the past" left out of the words before a count (the third)."""
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
