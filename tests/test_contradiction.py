"""The contradiction stages: polarity heuristics, stage-1 candidates, fallback NLI, strict judge, cache."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agtos.config import Settings
from agtos.storage.keys import GlobalKeys
from agtos.storage.nli_cache import NLICache
from agtos.storage.redis_conn import RedisConnector
from agtos.tasks.contradiction import (
    LexicalNegationNLI,
    LLMJudge,
    NLIVerdict,
    build_nli,
    candidate_pairs,
    pair_cache_key,
    polarity_clash,
)


@pytest.mark.parametrize(
    ("a", "b", "clash"),
    [
        ("User is vegetarian", "User eats steak every day", True),
        ("User is not vegetarian", "User eats steak every day", False),  # a negated antonym cancels
        ("User loves jazz", "User hates jazz", True),
        ("User loves jazz", "User hates opera", False),  # loves/hates needs a shared topic
        ("User drinks coffee", "User no longer drinks coffee", True),
        ("User is a morning person", "User is a night owl", True),
        ("User prefers tea", "User prefers metric units", False),
    ],
)
def test_polarity_table(a: str, b: str, clash: bool) -> None:
    assert polarity_clash(a, b) is clash
    assert LexicalNegationNLI().predict([(a, b)])[0].label == ("contradiction" if clash else "neutral")


def test_candidates_put_polarity_pairs_first_and_respect_the_cap() -> None:
    texts = ["User is vegetarian", "User likes jazz", "User eats steak every day", "User likes jazz a lot"]
    ids = [f"c{i}" for i in range(len(texts))]
    vectors = np.eye(4, dtype=np.float32)
    vectors[3] = vectors[1]  # the two jazz texts are identical in vector space
    found = candidate_pairs(ids, vectors, texts, top_k=1)
    assert (found[0].a, found[0].b, found[0].reason) == ("c0", "c2", "polarity")
    assert ("c1", "c3") in {(c.a, c.b) for c in found}
    assert len({(c.a, c.b) for c in found}) == len(found)  # unordered pairs, deduplicated
    assert len(candidate_pairs(ids, vectors, texts, top_k=3, cap=2)) == 2
    assert build_nli(False) is None and build_nli(True).name == "lexical-negation-fallback"


class FakeLLM:
    name = "fake"

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.calls: list[list[dict[str, str]]] = []

    def chat(self, messages: list[dict[str, str]], *, json_mode: bool = False) -> str:
        self.calls.append(messages)
        return self.replies.pop(0)


def test_judge_batches_and_validates_strictly() -> None:
    pairs = [(f"a{i}", f"b{i}", f"A {i}", f"B {i}") for i in range(12)]
    good = {"verdicts": [{"pair": i, "contradiction": i % 2 == 0, "confidence": 0.9} for i in range(10)]}
    stringy = {"verdicts": [{"pair": i, "contradiction": "true", "confidence": "0.9"} for i in range(2)]}
    llm = FakeLLM(json.dumps(good), json.dumps(stringy))
    judged, unjudged = LLMJudge(llm, batch_size=10).judge(pairs)
    assert len(llm.calls) == 2 and "9. A: A 9 | B: B 9" in llm.calls[0][1]["content"]
    assert [j.a for j in judged if j.contradiction] == ["a0", "a2", "a4", "a6", "a8"]
    assert unjudged == 2  # strings where a bool / number belongs reject the batch
    missing = {"verdicts": [{"pair": 0, "contradiction": True, "confidence": 0.9}]}
    assert LLMJudge(FakeLLM(json.dumps(missing)), 10).judge(pairs[:2]) == ([], 2)
    assert LLMJudge(FakeLLM("not json"), 10).judge(pairs[:2]) == ([], 2)


def test_nli_cache_round_trip(settings: Settings) -> None:
    connector = RedisConnector(settings.redis_url, settings.data_dir)
    cache = NLICache(connector, GlobalKeys(settings.key_prefix), ttl_s=60)
    key = pair_cache_key("m", "a", "b")
    assert cache.get_many("nina", [key]) == {}
    cache.put_many("nina", {key: NLIVerdict("contradiction", {"contradiction": 0.8})})
    assert cache.get_many("nina", [key])[key].label == "contradiction"
    assert cache.get_many("nin", [key]) == {}  # per user: a digest of one user's texts is theirs
    # no Redis version assumed here: both storage branches (HEXPIRE fields on >= 7.4, STRING + EX
    # elsewhere) and their TTLs are tested in test_nli_cache.py, the branch probed from the server
    assert cache.clear("nina") == 1 and cache.get_many("nina", [key]) == {}
    connector.close()
