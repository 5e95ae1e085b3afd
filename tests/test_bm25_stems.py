"""BM25 terms are Snowball English stems (issue 14), and an index stored by the older tokenizer
(plurals folded only) is upgraded from its stored terms: its data is found after the upgrade.

Expected stems are those of the Snowball English (Porter2) algorithm (snowballstem.org); expected
scores come from bm25s (tests.helpers.bm25_oracle) over the texts' current terms."""

from __future__ import annotations

import pytest

from agtos.config import Settings
from agtos.storage.bm25_index import BM25Index
from agtos.storage.bm25_mirror import decode_terms
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector
from agtos.tasks import bm25
from agtos.tasks.text import STOPWORDS, words
from tests.helpers import bm25_oracle
from tests.test_bm25_mirror import connectors  # noqa: F401  (two connections: two API processes)

CORPUS = {
    "cook": "We were cooking a shepherd's pie all afternoon",
    "trip": "She travelled to Lisbon with her sisters",
    "dog": "They adopted two puppies from the shelter",
    "job": "Incredible news: an order of 4521 GPT-4 licences",
    "city": "Cities with cheap flights",
}


def plural_folding_only(text: str) -> list[str]:
    """The tokenizer before issue 14's stems (version 1): words, stopwords out, plurals folded."""
    return [bm25.light_stem(w) for w in words(text) if 1 < len(w) <= bm25.MAX_TERM_LENGTH and w not in STOPWORDS]


@pytest.fixture
def old_keys(
    settings: Settings,
    connectors: tuple[RedisConnector, RedisConnector],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> GlobalKeys:
    """``CORPUS`` in ana's turn index as a process of the older version stored it (its terms, no
    version recorded)."""
    keys = GlobalKeys(settings.key_prefix)
    index = BM25Index(connectors[0], keys, "turn")
    with monkeypatch.context() as patched:
        patched.setattr(bm25, "tokenize", plural_folding_only)
        patched.setattr(bm25, "TOKENIZER_VERSION", 1)
        index.add_many("ana", list(CORPUS.items()))
    connectors[0].run(lambda r: r.hdel(index._key("ana", "meta"), "tok"))
    return keys


def test_terms_are_snowball_stems_of_the_words_numbers_and_codes_kept() -> None:
    assert bm25.tokenize("I was cooking; we cooked, they cook") == ["cook", "cook", "cook"]
    assert bm25.tokenize("She travelled to the cities for an adoption") == ["travel", "citi", "adopt"]
    assert bm25.tokenize("Error 4521 in GPT-4, generously") == ["error", "4521", "gpt-4", "generous"]
    assert bm25.query_terms("adopted adoption adopting") == ["adopt"]


def test_an_index_of_the_older_tokenizer_is_found_after_the_upgrade(
    old_keys: GlobalKeys,
    connectors: tuple[RedisConnector, RedisConnector],  # noqa: F811
) -> None:
    upgraded = BM25Index(connectors[1], old_keys, "turn")  # a process of this version, mirror loaded on first search
    from_redis = BM25Index(connectors[0], old_keys, "turn", max_postings=100_000, mirror=False)
    for query, hit in (("what did she cook", "cook"), ("where did she travel", "trip"), ("adoption", "dog")):
        assert [d for d, _ in upgraded.search("ana", query, 3)] == [hit]
        assert [d for d, _ in from_redis.search("ana", query, 3)] == [hit]
    current = {d: bm25.tokenize(t) for d, t in CORPUS.items()}
    want = bm25_oracle(current, bm25.query_terms("incredible licences cities 4521"), 5)
    got = from_redis.search("ana", "incredible licences cities 4521", 5)
    assert [d for d, _ in got] == [d for d, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9)
    terms = dict(connectors[0].scan_hash(upgraded._key("ana", "terms")))
    want_terms = {d: bm25.term_frequencies(t) for d, t in current.items()}
    assert {d: decode_terms(raw) for d, raw in terms.items()} == want_terms
    assert connectors[0].run(lambda r: r.hget(upgraded._key("ana", "meta"), "tok")) == b"5"


def test_an_index_is_upgraded_once_and_a_new_one_records_its_version(
    old_keys: GlobalKeys,
    connectors: tuple[RedisConnector, RedisConnector],  # noqa: F811
) -> None:
    """Stems are not stable under stemming again ("incredible" → "incred" → "incr"): an index whose
    terms are current must never be upgraded, by a second process nor after its keys were deleted
    and written again by a process that knew it current."""
    first, second = BM25Index(connectors[0], old_keys, "turn"), BM25Index(connectors[1], old_keys, "turn")
    assert first.search("ana", "incredible", 3)[0][0] == "job"
    assert second.search("ana", "incredible", 3)[0][0] == "job"
    assert decode_terms(connectors[0].run(lambda r: r.hget(first._key("ana", "terms"), "job")))["incred"] == 1

    first.add("ben", "n1", "An incredible view")  # a new index
    parts = ("meta", "changes", "terms", "len", "stats", "t:incred", "t:view")
    connectors[0].run(lambda r: r.delete(*(first._key("ben", p) for p in parts)))  # the user's data deleted
    first.add("ben", "n1", "An incredible view")  # this process knew the index current
    third = BM25Index(connectors[1], old_keys, "turn")
    assert [d for d, _ in third.search("ben", "incredible", 3)] == ["n1"]
    assert decode_terms(connectors[0].run(lambda r: r.hget(third._key("ben", "terms"), "n1"))) == {
        "incred": 1,
        "view": 1,
    }


def test_a_search_does_not_wait_for_another_process_upgrading(
    old_keys: GlobalKeys,
    connectors: tuple[RedisConnector, RedisConnector],  # noqa: F811
) -> None:
    index = BM25Index(connectors[1], old_keys, "turn")
    lock = index._key("ana", "upgrade")
    connectors[0].run(lambda r: r.set(lock, "another process", px=10_000))
    assert index.search("ana", "cooked", 3) == []  # the terms as they are: "cooking"
    assert [d for d, _ in index.search("ana", "pie", 3)] == ["cook"]
    connectors[0].run(lambda r: r.delete(lock))  # it went away without upgrading
    assert [d for d, _ in index.search("ana", "cooked", 3)] == ["cook"]


def test_codes_and_numbers_are_terms_as_written_and_words_are_stemmed() -> None:
    """``stem``'s promise: codes and numbers untouched, only words of letters stemmed (mutmut's
    ``x_stem__mutmut_2``, stemming every token, made "node.js" "node.j" and "iphone15s" "iphone15",
    so a search for the model "iphone15" found the "iphone15s" turn)."""
    said = "Ran node.js and gpt-4 on the iphone15s for order 4521 while cooking"
    assert bm25.tokenize(said) == ["run", "node.js", "gpt-4", "iphone15s", "order", "4521", "cook"]  # "ran": v4 lemma
