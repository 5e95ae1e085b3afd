"""Contradiction stages 1 and 3 against the README's figures: cosine top-5 neighbours, capped at
500, polarity pairs whatever their distance, an LLM judge asked 10 pairs per call. Expected
candidate sets come from a brute-force numpy ranking, not from the code under test."""

from __future__ import annotations

import json
import logging
from itertools import combinations
from typing import Any

import numpy as np
import pytest

from agtos.providers.llm import OllamaProvider
from agtos.tasks.contradiction import (
    Candidate,
    LexicalNegationNLI,
    LLMJudge,
    _polar_pairs,
    candidate_pairs,
    pair_cache_key,
    polarity_clash,
)
from tests.stub_servers import StubModelServer


def unit_vectors(n: int, dim: int = 16, seed: int = 7) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def neutral(n: int) -> tuple[list[str], list[str]]:
    """Ids and texts with no polarity cue (so every candidate is a cosine one)."""
    return [f"c{i:03d}" for i in range(n)], [f"User keeps notebook number {i}" for i in range(n)]


def brute_force(vectors: np.ndarray, top_k: int, rows: range | list[int] | None = None) -> list[tuple[int, int]]:
    """Unordered pairs of each row with its ``top_k`` most similar other rows, most similar first."""
    sims = vectors.astype(np.float64) @ vectors.T.astype(np.float64)
    pairs: set[tuple[int, int]] = set()
    for i in range(len(vectors)) if rows is None else rows:
        order = [j for j in np.argsort(-sims[i], kind="stable") if j != i][:top_k]
        pairs.update((min(i, j), max(i, j)) for j in order)
    return sorted(pairs, key=lambda p: -sims[p])


def as_pairs(found: list[Candidate], ids: list[str]) -> list[tuple[int, int]]:
    row = {doc_id: i for i, doc_id in enumerate(ids)}
    return [(row[c.a], row[c.b]) for c in found]


def test_cosine_candidates_are_the_top_5_neighbours_capped_at_500() -> None:
    ids, texts = neutral(300)
    vectors = unit_vectors(300)
    found = candidate_pairs(ids, vectors, texts)  # the defaults: top-5, cap 500
    assert as_pairs(found, ids) == brute_force(vectors, 5)[:500]
    assert all(c.reason == "cosine" and c.a < c.b for c in found)
    i, j = as_pairs(found, ids)[0]
    assert found[0].similarity == pytest.approx(float(vectors[i] @ vectors[j]), abs=1e-5)
    nearest = candidate_pairs(ids, vectors, texts, top_k=1, cap=10_000, chunk=7)  # small blocks change nothing
    assert sorted(as_pairs(nearest, ids)) == sorted(brute_force(vectors, 1))


def test_only_the_query_rows_look_for_neighbours() -> None:
    ids, texts = neutral(40)
    vectors = unit_vectors(40, seed=3)
    found = candidate_pairs(ids, vectors, texts, query_rows=[0, 5, 9])
    assert sorted(as_pairs(found, ids)) == sorted(brute_force(vectors, 5, [0, 5, 9]))


def test_small_sets() -> None:
    ids, texts = neutral(3)
    assert candidate_pairs(ids[:1], unit_vectors(1), texts[:1]) == []
    two = candidate_pairs(ids[:2], unit_vectors(2), texts[:2])
    assert [(c.a, c.b) for c in two] == [("c000", "c001")]
    # a chain 0 - 1 - 2: top-5 of 3 texts is every other text, so all three pairs
    chain = np.array([[1.0, 0.0], [0.8, 0.6], [0.28, 0.96]], dtype=np.float32)
    assert sorted((c.a, c.b) for c in candidate_pairs(ids, chain, texts)) == [
        ("c000", "c001"),
        ("c000", "c002"),
        ("c001", "c002"),
    ]


def test_polarity_pairs_are_found_however_far_apart_and_ranked_first() -> None:
    texts = [f"User keeps notebook number {i}" for i in range(6)] + ["User is vegetarian", "User eats steak every day"]
    texts += ["User is not vegetarian", "User grills sausages"]  # a negated antonym cancels: no pair
    ids = [f"c{i}" for i in range(len(texts))]
    eye = np.eye(8, dtype=np.float32)
    vectors = np.zeros((len(texts), 8), dtype=np.float32)
    vectors[6] = eye[1]
    vectors[7] = 0.25 * eye[1] + np.sqrt(1 - 0.25**2) * eye[2]  # cosine 0.25 with c6
    vectors[8] = eye[6]
    vectors[9] = eye[3]  # cosine 0 with c6
    for twin, of, axis in ((0, 6, 4), (1, 7, 5), (2, 9, 6)):  # a near-copy is each one's nearest neighbour
        vectors[twin] = (vectors[of] + 0.1 * eye[axis]) / np.linalg.norm(vectors[of] + 0.1 * eye[axis])
    vectors[3:6] = eye[7]
    found = candidate_pairs(ids, vectors, texts, top_k=1)
    polar = [c for c in found if c.reason == "polarity"]
    assert found[: len(polar)] == polar  # polarity pairs first
    assert [(c.a, c.b, c.reason) for c in polar[:2]] == [("c6", "c7", "polarity"), ("c6", "c9", "polarity")]
    assert [c.similarity for c in polar[:2]] == [pytest.approx(0.25, abs=1e-6), 0.0]
    assert not {("c7", "c8"), ("c8", "c9")} & {(c.a, c.b) for c in found}
    assert {("c0", "c6"), ("c1", "c7"), ("c2", "c9")} <= {(c.a, c.b) for c in found if c.reason == "cosine"}


@pytest.mark.parametrize(
    ("a", "b", "clash"),
    [
        ("User is vegetarian", "User is not vegetarian", True),  # "X" vs "not X", X a lexicon term
        ("User is a morning person", "User is no longer a morning person", True),
        ("User is not vegan", "User is vegetarian", False),
        ("User likes tea", "User never likes coffee", False),  # "likes" alone is no shared topic
    ],
)
def test_negating_a_lexicon_term_is_a_clash(a: str, b: str, clash: bool) -> None:
    assert polarity_clash(a, b) is clash and polarity_clash(b, a) is clash


def test_a_lexicon_term_pairs_at_most_200_of_its_conclusions() -> None:
    texts = [f"User has been vegetarian since year {1800 + i}" for i in range(250)] + ["User eats steak every day"]
    ids = [f"c{i:03d}" for i in range(len(texts))]
    assert _polar_pairs(ids, texts) == {(ids[i], "c250") for i in range(200)}


def test_fallback_nli_scores_are_a_distribution_that_agrees_with_the_label() -> None:
    pairs = [("User loves jazz", "User hates jazz"), ("User loves jazz", "User is tall")]
    verdicts = LexicalNegationNLI().predict(pairs)
    assert [v.label for v in verdicts] == ["contradiction", "neutral"]
    for v in verdicts:
        assert set(v.scores) == {"contradiction", "entailment", "neutral"}
        assert sum(v.scores.values()) == pytest.approx(1.0)
        assert max(v.scores, key=v.scores.__getitem__) == v.label
    assert verdicts[0].scores["contradiction"] > 0.5 and verdicts[1].scores["contradiction"] < 0.5


def verdicts_for(body: dict[str, Any]) -> str:
    """A judge that confirms every listed pair, with a confidence and explanation per pair number."""
    lines = body["messages"][-1]["content"].splitlines()
    return json.dumps(
        {
            "verdicts": [
                {"pair": n, "contradiction": True, "confidence": 0.5 + n / 100, "explanation": f"why {n}"}
                for n in range(len(lines))
            ]
        }
    )


def test_judge_asks_10_pairs_per_call_and_counts_every_rejected_batch(caplog: pytest.LogCaptureFixture) -> None:
    pairs = [(f"a{i}", f"b{i}", f"statement A{i}", f"statement B{i}") for i in range(25)]
    with StubModelServer(chat_responder=verdicts_for) as stub:
        llm = OllamaProvider("ollama", "judge", stub.url)
        judged, unjudged = LLMJudge(llm).judge(pairs)  # the default batch: 10
        calls = stub.requests_to("/api/chat")
        assert [len(c.body["messages"][-1]["content"].splitlines()) for c in calls] == [10, 10, 5]
        for call in calls:  # the instructions as the system message, the listing as the user's, JSON mode
            assert [m["role"] for m in call.body["messages"]] == ["system", "user"] and call.body["format"] == "json"
            assert call.body["messages"][0]["content"].startswith("For each numbered pair of statements")
        assert unjudged == 0 and [(j.a, j.b) for j in judged] == [(a, b) for a, b, _, _ in pairs]
        assert (judged[12].confidence, judged[12].explanation, judged[12].contradiction) == (0.52, "why 2", True)

        stub.requests.clear()
        missing = json.dumps({"verdicts": [{"pair": 0, "contradiction": True, "confidence": 0.9}]})
        stub.queue_chat("no JSON here", verdicts_for, missing)  # batches 1 and 3 rejected, batch 2 judged
        with caplog.at_level(logging.WARNING, logger="agtos.tasks.contradiction"):
            judged, unjudged = LLMJudge(llm).judge(pairs)
        assert unjudged == 15 and [j.a for j in judged] == [f"a{i}" for i in range(10, 20)]
        messages = [r.getMessage() for r in caplog.records]
        assert len(messages) == 2 and all(m.startswith("judge batch rejected (") for m in messages)
        assert messages[0].endswith("); 10 pairs left unjudged") and "not JSON" in messages[0]
        assert messages[1] == (
            "judge batch rejected (verdicts do not cover each pair exactly once); 5 pairs left unjudged"
        )


def test_every_pair_appears_once_in_the_ten_pair_listing() -> None:
    texts = ["User is vegetarian", "User eats steak every day", "User likes jazz", "User hates jazz"]
    listed = [(f"x{i}", f"y{i}", a, b) for i, (a, b) in enumerate(combinations(texts, 2))]
    with StubModelServer(chat_responder=verdicts_for) as stub:
        LLMJudge(OllamaProvider("ollama", "judge", stub.url)).judge(listed)
        content = stub.requests_to("/api/chat")[0].body["messages"][-1]["content"]
    assert content.splitlines() == [f"{n}. A: {a} | B: {b}" for n, (_, _, a, b) in enumerate(listed)]


def test_the_nli_cache_key_is_128_bits_of_sha256_over_model_and_both_texts() -> None:
    """Cached verdicts outlive a restart or an upgrade only if the key format stays put: the first
    32 hex digits of SHA-256("<model>\\0<text a>\\0<text b>") (literal from coreutils' sha256sum)."""
    key = pair_cache_key("onnx-nli:tiny", "User is vegetarian", "User eats steak every day")
    assert key == "67ef1ddea234fd8d9c508086be7ca2a8"
    assert pair_cache_key("onnx-nli:tiny", "User eats steak every day", "User is vegetarian") != key  # ordered
