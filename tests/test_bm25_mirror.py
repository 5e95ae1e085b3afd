"""The in-process BM25 mirror: exact scores, tombstone compaction, freshness across processes.

Expected scores come from bm25s (tests.helpers.bm25_oracle) over the documents' index terms."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from agtos.config import Settings
from agtos.storage.bm25_index import BM25Index
from agtos.storage.bm25_mirror import decode_terms, encode_terms
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector
from agtos.tasks import bm25
from tests.helpers import bm25_oracle

VOCAB = [f"w{i}" for i in range(300)] + ["redis", "kubernetes", "lisbon", "pasta", "billing", "zyxtrel"]


def random_text(rng: random.Random) -> str:
    """Zipf-ish word choice so some terms are common and some rare."""
    n = rng.randint(1, 12)
    return " ".join(VOCAB[min(len(VOCAB) - 1, int(rng.paretovariate(0.8)) - 1)] for _ in range(n))


@pytest.fixture
def connectors(settings: Settings) -> Iterator[tuple[RedisConnector, RedisConnector]]:
    """Two connections standing in for two API processes."""
    a, b = (RedisConnector(settings.redis_url, settings.data_dir) for _ in range(2))
    yield a, b
    a.close()
    b.close()


def expected(query: str, corpus: dict[str, str], limit: int) -> list[tuple[str, float]]:
    return bm25_oracle({d: bm25.tokenize(t) for d, t in corpus.items()}, bm25.query_terms(query), limit)


def assert_same_ranking(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> None:
    assert [d for d, _ in got] == [d for d, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9)


def test_terms_round_trip_and_older_format() -> None:
    tf = {"redis": 2, "gpt-4": 1, "c++": 3}
    assert decode_terms(encode_terms(tf)) == tf
    assert decode_terms(b"redis port") == {"redis": 1, "port": 1}
    assert decode_terms(None) == {}


def test_mirror_matches_pure_bm25_through_updates_and_compaction(
    settings: Settings, connectors: tuple[RedisConnector, RedisConnector]
) -> None:
    rng = random.Random(11)
    keys = GlobalKeys(settings.key_prefix)
    mirrored = BM25Index(connectors[0], keys, "memory")
    from_redis = BM25Index(connectors[1], keys, "memory", max_postings=100_000, mirror=False)
    corpus = {f"d{i}": random_text(rng) for i in range(2_600)}
    mirrored.add_many("alice", list(corpus.items()))
    queries = ["zyxtrel billing", "w0 w1", "redis w3 w40", "lisbon", "w299 pasta w0"]
    mirrored.search("alice", "w0", 5)  # loads the mirror; later writes are applied to it
    for doc_id in rng.sample(sorted(corpus), 2_000):  # enough tombstones to compact
        if rng.random() < 0.3:
            corpus[doc_id] = random_text(rng)
            mirrored.add("alice", doc_id, corpus[doc_id])
        else:
            del corpus[doc_id]
            assert mirrored.remove("alice", doc_id) is True
    assert mirrored.stats()["docs"] == len(corpus) == mirrored.count("alice")
    mirror = mirrored._mirrors.peek("alice")
    assert mirror is not None and len(mirror.ids) < 2_600  # tombstones were compacted away
    for query in queries:
        want = expected(query, corpus, 25)
        assert want, query
        assert_same_ranking(mirrored.search("alice", query, 25), want)
        assert_same_ranking(from_redis.search("alice", query, 25), want)


def test_writes_of_one_process_are_seen_by_the_next_search_of_another(
    settings: Settings, connectors: tuple[RedisConnector, RedisConnector]
) -> None:
    keys = GlobalKeys(settings.key_prefix)
    reader = BM25Index(connectors[0], keys, "memory")
    writer = BM25Index(connectors[1], keys, "memory", max_change_log=5)
    writer.add_many("alice", [("a1", "lisbon trip in may"), ("a2", "pasta recipe")])
    assert [d for d, _ in reader.search("alice", "lisbon", 5)] == ["a1"]  # first search loads

    writer.add("alice", "a3", "moved to lisbon for work")  # replayed from the change log
    writer.remove("alice", "a1")
    assert [d for d, _ in reader.search("alice", "lisbon", 5)] == ["a3"]

    corpus = {f"b{i}": f"lisbon note {i} " + "pasta " * i for i in range(12)}  # more than the log keeps
    writer.add_many("alice", list(corpus.items()))
    corpus |= {"a2": "pasta recipe", "a3": "moved to lisbon for work"}
    assert_same_ranking(reader.search("alice", "lisbon pasta", 20), expected("lisbon pasta", corpus, 20))
    assert reader.search("bob", "lisbon", 5) == []


def test_loaded_mirrors_are_bounded(settings: Settings, connectors: tuple[RedisConnector, RedisConnector]) -> None:
    index = BM25Index(connectors[0], GlobalKeys(settings.key_prefix), "memory", max_loaded_users=2)
    for user in ("u1", "u2", "u3"):
        index.add(user, "x", f"note of {user}")
        assert [d for d, _ in index.search(user, "note", 3)] == ["x"]
    assert index.stats()["loadedUsers"] == 2
    assert [d for d, _ in index.search("u1", f"note {'u1'}", 3)] == ["x"]  # reloaded from Redis


def test_top_hits_of_a_corpus_of_many_equal_scores_are_those_of_scoring_every_document(
    settings: Settings, connectors: tuple[RedisConnector, RedisConnector]
) -> None:
    """A search selects among the scores from a floor read off a sample (the rarest terms' rows, or
    the maxima of runs of one term's rows): the hits must be those of scoring every document, ties
    at the last hit included (ordered by id), on copies of the same texts as the scale benchmark
    indexes them (equal scores by the hundred), before and after tombstones."""
    rng = random.Random(5)
    base = [random_text(rng) for _ in range(40)] + ["zyxtrel w0 billing", "lisbon pasta w1"]
    corpus = {f"b{j:02d}-r{k:02d}": text for k in range(30) for j, text in enumerate(base)}
    index = BM25Index(connectors[0], GlobalKeys(settings.key_prefix), "turn")
    index.add_many("alice", list(corpus.items()))
    queries = ["w0", "w1", "w0 w1", "w0 w1 w2 w3", "zyxtrel w0", "lisbon w0 w1", "pasta zyxtrel", "billing"]

    def scored() -> dict[str, list[tuple[str, float]]]:
        """Each query's oracle ranking of every document (each limit's is its head: scored once)."""
        return {query: expected(query, corpus, len(corpus)) for query in queries}

    def check(oracle: dict[str, list[tuple[str, float]]]) -> None:
        for query in queries:
            for limit in (1, 3, 10, 31, 200, 2_000):
                want = oracle[query][:limit]
                assert want, query
                assert_same_ranking(index.search("alice", query, limit), want)

    check(scored())
    for doc_id in rng.sample(sorted(corpus), 150):  # tombstones, fewer than compaction needs
        del corpus[doc_id]
        assert index.remove("alice", doc_id) is True
    mirror = index._mirrors.peek("alice")
    assert mirror is not None and mirror.dead == 150
    after = scored()
    check(after)
    check(after)


def test_a_document_written_after_a_search_that_raises_a_terms_best_score_is_found(
    settings: Settings, connectors: tuple[RedisConnector, RedisConnector]
) -> None:
    """A search scores only the rows of the terms a hit needs when the others' best possible
    scores (from their largest tf and shortest document) add up below the floor: a document
    written later with a higher best score for a term must be seen (here it ranks first)."""
    filler = " ".join(f"f{i}" for i in range(120))
    corpus = {f"s{i:04d}": f"short{i % 50}" for i in range(2_000)}  # short texts: a low average length
    corpus |= {f"r{i:03d}": f"rare {filler}" for i in range(50)} | {f"c{i:03d}": f"common {filler}" for i in range(500)}
    index = BM25Index(connectors[0], GlobalKeys(settings.key_prefix), "turn")
    index.add_many("alice", list(corpus.items()))
    assert_same_ranking(index.search("alice", "rare common", 10), expected("rare common", corpus, 10))
    loud = {f"loud-{i}": "common " * 6 for i in range(3)}
    corpus |= loud
    index.add_many("alice", list(loud.items()))
    found = index.search("alice", "rare common", 10)
    assert [d for d, _ in found[:3]] == ["loud-0", "loud-1", "loud-2"]
    assert_same_ranking(found, expected("rare common", corpus, 10))
