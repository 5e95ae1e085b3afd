"""BM25 tokenizer version 5 (issue 15), through HTTP: a "-men" plural is its singular's term as spaCy's noun
rule relates them ("women" finds "woman", "firemen" finds "fireman", and back), so is "oxen" ("ox"); a word
of its own that ends in "men" ("omen") is not merged with "man"; an index stored by version 4 is upgraded and
found by either form, and a version-4 term that is already a lemma's ("marches", of "marchesi") stays.

Literals: English grammar (woman/women, fireman/firemen, ox/oxen); the Italian plural "marchesi" of
"marchese"; Snowball's English stems of the words as written."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.tasks import bm25
from tests.test_tokenizer_v3 import ended, found, upgraded_client
from tests.test_tokenizer_v4 import version_3

#: the stems version 4 left as they were: version 5 relates them to their singular's
NEW_IN_5 = {"women": "woman", "firemen": "fireman", "oxen": "ox"}
#: what version 4's table did to the stems of "marchesi" and "marches": a chain, applied once
VERSION_4_LEMMAS = {"marchesi": "marches", "marches": "marchesa"}


def version_4(text: str) -> list[str]:
    """Version 4's terms: version 3's, each looked up once in its table (the entries it had for these words)."""
    return [VERSION_4_LEMMAS.get(t, t) for t in version_3(text)]


def test_a_men_plural_finds_its_singular_and_back(client: TestClient) -> None:
    ended(client, "nia", "team", "The women's football team from our town won the regional cup.")
    ended(client, "nia", "fire", "Two firemen rescued a cat from the old oak tree on our street.")
    ended(client, "nia", "farm", "The farmer ploughs his field with a pair of oxen every spring.")
    ended(client, "nia", "sign", "A black cat crossing the road is a bad omen, my grandmother said.")
    assert found(client, "nia", "woman") == ["team"]
    assert found(client, "nia", "fireman") == ["fire"]
    assert found(client, "nia", "ox") == ["farm"]
    ended(client, "ola", "talk", "A woman from the fire brigade gave a talk; one fireman showed the hoses.")
    assert found(client, "ola", "women") == ["talk"]
    assert found(client, "ola", "firemen") == ["talk"]
    assert found(client, "nia", "men") == []  # "omen" and "women" are not "man"
    assert bm25.tokenize("women firemen oxen omen germen") == ["woman", "fireman", "ox", "omen", "germen"]


@pytest.fixture
def upgraded_app(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """Sessions ended by an API process of version 4 (it stored "women", and "marches" for "marchesi"), then
    one of this version."""
    sessions = [
        ("uma", "club", "Our women's rowing club meets every Saturday at the lake."),
        ("uma", "title", "The marchesi of the old villa hosted the wine festival."),
    ]
    with upgraded_client(settings, monkeypatch, (4, version_4), sessions, ("uma", "woman")) as client:
        yield client


def test_an_index_of_version_4_is_upgraded_and_found_by_either_form(upgraded_app: TestClient) -> None:
    new = upgraded_app
    assert found(new, "uma", "woman") == ["club"]
    assert found(new, "uma", "women") == ["club"]
    assert found(new, "uma", "marchesi") == ["title"]  # its stored "marches" was not taken on to "marchesa"
    ended(new, "uma", "news", "A woman from the club won the national sculling final.")  # written by version 5
    assert set(found(new, "uma", "women")) == {"club", "news"}
    assert {t: bm25.upgraded_term(t, 4) for t in NEW_IN_5} == NEW_IN_5  # each to its own singular
