"""BM25 tokenizer version 4 (issue 14), through HTTP: an irregular inflection is its lemma's term, so "buy"
finds "bought" and "went" finds "go" (both ways, search and context); an index stored by version 3 is
upgraded and its documents found by either form; words that are also nouns or verbs of their own ("rose",
"left") are not merged with the verb they inflect. And a sentence opened by a label ("Update:", "Quick
update:", "FYI:") is a statement whose fact names its speaker.

Literals: the irregular forms are English grammar (buy/bought, go/went, meet/met, lose/lost, run/ran,
take/took, child/children); the terms are Snowball's English stems of the lemmas as written ("buy", "go")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import Stemmer
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.tasks import bm25, lemmas
from agtos.tasks.text import STOPWORDS, words
from tests.helpers import user
from tests.test_tokenizer_v3 import ended, found, upgraded_client

PAIRS = [  # (lemma, said with its irregular form)
    ("buy", "I bought a Ford Fiesta from a dealer in Tucson."),
    ("go", "We went to Lisbon for the jazz festival."),
    ("meet", "I met Dana at the climbing gym downtown."),
    ("lose", "I lost my wallet on the tram yesterday."),
    ("run", "I ran the Boston marathon in under four hours."),
    ("take", "I took a pottery class with my aunt."),
]


def context(client: TestClient, who: str, query: str) -> str:
    answer = client.post("/api/memory/context", json={"query": query, "token_budget": 1000}, headers=user(who))
    assert answer.status_code == 200, answer.text
    return str(answer.json())


def test_a_lemma_finds_its_irregular_form_and_back(client: TestClient) -> None:
    for lemma, said in PAIRS:
        ended(client, "gina", lemma, said)
    ended(client, "gina", "other", "The weather in Tucson was mild and sunny all week.")
    for lemma, _ in PAIRS:
        assert found(client, "gina", f"When did I {lemma}?") == [lemma], lemma
    assert found(client, "gina", "When did Gina buy the Ford Fiesta?")[0] == "buy"
    ended(client, "jon", "shop", "Tomorrow I will buy new running shoes and go to the track.")
    assert found(client, "jon", "bought") == ["shop"]
    assert found(client, "jon", "went") == ["shop"]
    assert "running shoes" in context(client, "jon", "What shoes had Jon bought?")


def test_words_of_their_own_are_not_merged(client: TestClient) -> None:
    ended(client, "ray", "garden", "A red rose grows by the left gate of the garden.")
    ended(client, "ray", "stock", "The price will rise, so leave the shares alone.")
    assert found(client, "ray", "rose") == ["garden"]
    assert found(client, "ray", "rise") == ["stock"]
    assert found(client, "ray", "left") == ["garden"]
    assert bm25.tokenize("the children took the mice") == ["child", "take", "mous"]


# -- version 3, as it stored terms -----------------------------------------------------------------------
_ENGLISH = Stemmer.Stemmer("english")


def version_3(text: str) -> list[str]:
    """Version 3's terms: Snowball English stems of words of letters (after "'s" and plural folding)."""
    out = []
    for word in words(text):
        word = word[:-2] if word.endswith("'s") else word
        if 1 < len(word) <= 64 and word not in STOPWORDS:
            out.append(_ENGLISH.stemWord(bm25.light_stem(word)) if word.isalpha() else word)
    return out


_BY_VERSION_3 = [
    ("ivy", "car", "I bought a Ford Fiesta from a dealer in Tucson."),
    ("ivy", "trip", "We went to Lisbon for the jazz festival."),
    ("ivy", "hike", "The others walked ahead on the ridge trail."),  # "other": a stopword
]


@pytest.fixture
def upgraded_app(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """Sessions ended by an API process of version 3 (it stored "bought"), then one of this version."""
    with upgraded_client(settings, monkeypatch, (3, version_3), _BY_VERSION_3, ("ivy", "buy")) as client:
        yield client


def test_an_index_of_version_3_is_upgraded_and_found_by_either_form(upgraded_app: TestClient) -> None:
    new = upgraded_app
    assert found(new, "ivy", "buy") == ["car"]
    assert found(new, "ivy", "bought") == ["car"]
    assert found(new, "ivy", "go") == ["trip"]
    assert found(new, "ivy", "others") == ["hike"]  # its stored stem "other" stays though "other" is a stopword
    ended(new, "ivy", "shop", "I will buy a bike and go cycling.")  # written by version 4 meanwhile
    assert set(found(new, "ivy", "bought")) == {"car", "shop"}


# -- a sentence opened by a label ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("said", "fact"),
    [
        ("Update: I moved to Denver last week.", "Gina moved to Denver"),
        ("Quick update: I started a new job at Acme Robotics.", "Gina started a new job at Acme Robotics"),
        ("FYI: my sister got engaged to Tom in Paris.", "Gina's sister got engaged to Tom in Paris"),
        ("News: I adopted a beagle named Milo.", "Gina adopted a beagle named Milo"),
        ("My goal: run a marathon in May.", "Gina's goal: run a marathon in May"),  # no statement after it
    ],
    ids=["update", "quick-update", "fyi", "news", "not-a-label"],
)
def test_a_labelled_sentence_yields_its_fact(client: TestClient, said: str, fact: str) -> None:
    turns = [
        {"role": "user", "content": said, "name": "Gina"},
        {"role": "assistant", "content": "Oh, that is big news!", "name": "Jon"},
    ]
    sent = client.post("/api/memory/sessions/s1/turns", json={"turns": turns}, headers=user("gina"))
    assert sent.status_code == 200, sent.text
    answer = client.post("/api/memory/sessions/s1/end", params={"wait": "30"}, headers=user("gina"))
    assert answer.status_code == 200, answer.text
    memories = client.get("/api/memory/memories", params={"kind": "fact"}, headers=user("gina")).json()["memories"]
    texts = [m["text"] for m in memories]
    assert any(t.startswith(fact) for t in texts), texts


def test_the_tables_are_read_by_spacys_ids_of_the_parts_of_speech() -> None:
    """The lookups file keys its tables by spaCy's string ids: the constants are spaCy's own hashes."""
    from spacy.strings import get_string_id

    assert {pos: get_string_id(pos) for pos in lemmas.POS_IDS} == lemmas.POS_IDS
    assert lemmas.lemma_terms()["bought"] == "buy"
