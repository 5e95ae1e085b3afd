"""BM25 tokenizer version 3 (issue 14), through HTTP: a possessive "'s" (straight or curly apostrophe) is
its word, so "Kate" finds "Kate's"; the marks of Devanagari, Thai and Japanese are parts of their letters,
so words that differ only by them stay distinct (Latin accents are still folded: "cafe" finds "café");
an index stored by version 2 is upgraded and its documents found.

Literals: words from the languages' dictionaries and their code points from Unicode (U+093E DEVANAGARI
VOWEL SIGN AA, U+0E49 THAI CHARACTER MAI THO, U+3099 the combining dakuten of "ぎ" in NFD)."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import Stemmer
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from agtos.tasks import bm25
from agtos.tasks.consolidate import conclusion_id
from agtos.tasks.text import STOPWORDS
from tests.helpers import user

DAAL, DAL = "\u0926\u093e\u0932", "\u0926\u0932"  # दाल (lentils), दल (party): the vowel sign AA apart
SHIRT, TIGER = "\u0e40\u0e2a\u0e37\u0e49\u0e2d", "\u0e40\u0e2a\u0e37\u0e2d"  # เสื้อ, เสือ: the tone mark apart
KEY, PERSIMMON = "\u304b\u304d\u3099", "\u304b\u304d"  # かぎ (key) in NFD: "き" + U+3099; かき (persimmon)


def ended(client: TestClient, who: str, session: str, said: str) -> None:
    turns = [
        {"role": "user", "content": said},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "Please remember that for later."},
        {"role": "assistant", "content": "I will."},
    ]
    sent = client.post(f"/api/memory/sessions/{session}/turns", json={"turns": turns}, headers=user(who))
    assert sent.status_code == 200, sent.text
    answer = client.post(f"/api/memory/sessions/{session}/end", params={"wait": "30"}, headers=user(who))
    assert answer.status_code == 200 and answer.json()["saved"] is True, answer.text


def found(client: TestClient, who: str, query: str) -> list[str]:
    """The sessions a BM25 search finds, best first."""
    answer = client.get("/api/memory/search", params={"q": query, "mode": "bm25"}, headers=user(who))
    assert answer.status_code == 200, answer.text
    return [hit["sessionId"] for hit in answer.json()["results"]]


def keywords(client: TestClient, who: str) -> dict[str, list[str]]:
    """Each episode's keywords, by the session's first words ("at" or "i")."""
    episodes = client.get("/api/memory/episodes", headers=user(who)).json()["episodes"]
    return {e["summary"].split()[1].lower(): e["keywords"] for e in episodes}


def test_kate_finds_kates_with_either_apostrophe(client: TestClient) -> None:
    ended(client, "ann", "dog", "My neighbour Kate's dog chewed through the garden fence again.")
    ended(client, "ann", "car", "I borrowed Kate\u2019s car to drive to the airport on Monday.")
    ended(client, "ann", "boat", "I rented a small boat on the lake for the afternoon.")
    assert set(found(client, "ann", "Kate")) == {"dog", "car"}
    assert set(found(client, "ann", "kate\u2019s")) == {"dog", "car"}
    assert found(client, "ann", "Kate's car")[0] == "car"
    assert found(client, "ann", "garden cafe") == ["dog"]  # accents: "café" and "cafe" are one word
    ended(client, "ann", "coffee", "I love the caf\u00e9 near the station, it roasts its own beans.")
    assert found(client, "ann", "cafe")[0] == "coffee"


@pytest.mark.parametrize(
    ("first", "second", "language"),
    [(DAAL, DAL, "devanagari"), (SHIRT, TIGER, "thai"), (KEY, PERSIMMON, "japanese")],
    ids=["devanagari", "thai", "japanese"],
)
def test_words_apart_only_by_their_marks_stay_distinct(
    client: TestClient, first: str, second: str, language: str
) -> None:
    ended(client, language, "one", f"At the market I bought {first} for tonight.")
    ended(client, language, "two", f"I kept talking about {second} during the long trip.")
    assert found(client, language, first) == ["one"]
    assert found(client, language, second) == ["two"]
    shown = keywords(client, language)  # what the user sees: the words as written (NFC), marks and all
    composed = unicodedata.normalize("NFC", first)
    assert composed in shown["at"] and composed not in shown["i"], shown


# -- version 2, as it stored terms -------------------------------------------------------------------------
_V2_WORD = re.compile(r"\w[\w'+#.-]*[\w+#]|\w")
_ENGLISH = Stemmer.Stemmer("english")


def version_2(text: str) -> list[str]:
    """Version 2's terms: every mark dropped after NFKD, "'s" kept as written, Snowball English stems of
    words of letters (after plural folding)."""
    folded = "".join(c for c in unicodedata.normalize("NFKD", text.lower()) if unicodedata.category(c)[0] != "M")
    tokens = [w for w in _V2_WORD.findall(folded.replace("_", " ")) if 1 < len(w) <= 64 and w not in STOPWORDS]
    return [_ENGLISH.stemWord(bm25.light_stem(w)) if w.isalpha() else w for w in tokens]


@contextmanager
def upgraded_client(
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    old: tuple[int, Callable[[str], list[str]]],
    sessions: list[tuple[str, str, str]],
    unfound: tuple[str, str],
) -> Iterator[TestClient]:
    """``sessions`` (who, session, said) ended by an API process of the ``old`` tokenizer (version, tokenize),
    where ``unfound`` (who, query) finds nothing; then a client of a process of this version over the same Redis."""
    with monkeypatch.context() as patched:
        patched.setattr(bm25, "tokenize", old[1])
        patched.setattr(bm25, "TOKENIZER_VERSION", old[0])
        old_coordinator = MemoryCoordinator(settings)
        with TestClient(create_app(coordinator=old_coordinator)) as old_client:
            for who, session, said in sessions:
                ended(old_client, who, session, said)
            assert found(old_client, *unfound) == []
        old_coordinator.close()
    coordinator = MemoryCoordinator(settings)
    try:
        with TestClient(create_app(coordinator=coordinator)) as new_client:
            yield new_client
    finally:
        coordinator.close()


_BY_VERSION_2 = [
    ("ivy", "dog", "My neighbour Kate's dog chewed through the garden fence again."),
    ("ivy", "meal", f"At the market I bought {DAAL} for tonight."),
    ("ivy", "cooking", "I was cooking an incredible pasta with fresh basil."),
    ("leo", "cooking", "I was cooking an incredible pasta with fresh basil."),
]


@pytest.fixture
def upgraded_app(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """Sessions ended by an API process of version 2 (it stored "kate's"), then one of this version."""
    with upgraded_client(settings, monkeypatch, (2, version_2), _BY_VERSION_2, ("ivy", "Kate")) as client:
        yield client


def test_an_index_of_version_2_is_upgraded_and_found(upgraded_app: TestClient) -> None:
    new = upgraded_app
    assert found(new, "ivy", "Kate") == ["dog"]
    assert found(new, "ivy", "cooked") == ["cooking"]
    assert found(new, "ivy", "incredible") == ["cooking"]  # version 2 stems kept: "incred", not "incr"
    assert found(new, "ivy", DAAL) == ["meal"]  # stored as version 2 made it (marks off): still found
    ended(new, "ivy", "party", f"My sister joined the {DAL} last year.")
    assert set(found(new, "ivy", DAL)) == {"meal", "party"}  # an upgraded index cannot tell them apart
    ended(new, "leo", "party", f"My sister joined the {DAL} last year.")  # none lost marks here: exact terms
    assert found(new, "leo", DAAL) == []
    assert found(new, "leo", DAL) == ["party"]


def test_either_apostrophe_gives_the_same_terms_and_other_apostrophes_stay() -> None:
    assert bm25.tokenize("Kate\u2019s") == bm25.tokenize("Kate's") == bm25.tokenize("KATE") == ["kate"]
    assert bm25.tokenize("O\u2019Neill") == bm25.tokenize("O'Neill") == ["o'neill"]
    assert bm25.tokenize("it\u2019s, let\u2019s, don\u2019t, one's") == []  # stopwords, with or without "'s"
    assert bm25.tokenize("\uff76\uff9e\uff77\uff9e") == ["\u30ac\u30ae"]  # half-width ｶﾞｷﾞ: NFKC ガギ


@pytest.mark.parametrize(
    ("said", "as_before"),
    [
        ("I\u2019m vegetarian", "i m vegetarian"),  # "’" split the words before version 3
        (
            "\u304b\u304e\u3092\u306a\u304f\u3057\u305f",
            "\u304b\u304d\u3092\u306a\u304f\u3057\u305f",
        ),  # かぎをなくした: dakuten off
        ("\uc800\ub294 \uc11c\uc6b8", unicodedata.normalize("NFKD", "\uc800\ub294 \uc11c\uc6b8")),  # 저는 서울: as jamo
    ],
    ids=["apostrophe", "japanese", "korean"],
)
def test_a_fact_keeps_the_id_it_had_before_version_3(client: TestClient, said: str, as_before: str) -> None:
    """A memory's id is made of its normalised text; a fact stored before and learned again after the
    upgrade must find its record, not make a second one."""
    answer = client.post("/api/memory/memories", json={"text": said, "kind": "fact"}, headers=user("mia"))
    assert answer.status_code == 201, answer.text
    digest = hashlib.sha256(f"mia\x00{as_before}".encode()).hexdigest()[:16]
    assert answer.json()["memory"]["id"] == f"mem-{digest}"


def test_a_conclusion_keeps_the_id_it_had_before_version_3() -> None:
    """The Dreamer re-derives its conclusions each run and updates them by id: a conclusion stored before the
    upgrade is the same record after it (the text as version 2 normalised it: "’" split the words)."""
    digest = hashlib.sha256(b"ana\x00explicit\x00ana s diet is vegetarian").hexdigest()[:16]
    assert conclusion_id("ana", "explicit", "Ana\u2019s diet is vegetarian") == f"con-{digest}"
