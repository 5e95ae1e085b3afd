"""Embedders: the real bundled ONNX MiniLM model, and the HTTP ones against the local stub."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from agtos.config import EmbeddingConfig, Settings
from agtos.providers import embeddings as emb
from agtos.providers.embeddings import (
    EmbeddingError,
    OllamaEmbedder,
    OnnxMiniLMEmbedder,
    OpenAICompatibleEmbedder,
    build_embedder,
    l2_normalise,
)
from agtos.providers.onnx_quantize import check_quantize
from tests.stub_servers import StubModelServer, hash_embedding

HIKING = "I love hiking in the mountains"
TREKKING = "Mountain trekking is my favourite hobby"
TAXES = "The quarterly tax report is due"


@pytest.fixture(scope="module")
def minilm() -> OnnxMiniLMEmbedder:
    embedder = OnnxMiniLMEmbedder()
    embedder.load()
    return embedder


@pytest.fixture
def stub() -> Iterator[StubModelServer]:
    with StubModelServer() as server:
        yield server


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for suffix in ("PROVIDER", "MODEL", "BASE_URL", "API_KEY", "TIMEOUT_S", "THREADS"):
        monkeypatch.delenv(f"AGTOS_EMBEDDING_{suffix}", raising=False)
    return monkeypatch


def expected(texts: list[str], dim: int = 64) -> np.ndarray:
    return l2_normalise(np.array([hash_embedding(t, dim) for t in texts]))


# -- ONNX MiniLM (real model) ----------------------------------------------------------------


def test_onnx_shape_dtype_and_unit_norm(minilm: OnnxMiniLMEmbedder) -> None:
    vectors = minilm.embed([HIKING, TAXES, "", "short"])
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert minilm.dim == 384 and minilm.name == "onnx"


def test_onnx_batch_equals_single(minilm: OnnxMiniLMEmbedder) -> None:
    texts = [HIKING, "a much longer sentence about databases, indexes and query planners", TAXES, "hi"]
    small_batches = OnnxMiniLMEmbedder(batch_size=3)
    small_batches._session, small_batches._tokenizer = minilm._ensure_loaded()  # share the model
    batch = small_batches.embed(texts)
    singles = np.stack([minilm.embed([t])[0] for t in texts])
    np.testing.assert_allclose(batch, singles, atol=1e-4)
    np.testing.assert_allclose(minilm.embed(texts), singles, atol=1e-4)


# Short, medium and long texts (the long ones past the 256-token window) in a mixed order.
MIXED_LENGTHS = [
    "hi",
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "ok",
    "Melanie: " + "We camped by the lake, roasted marshmallows and told stories until the fire died down. " * 30,
    "Jon: I lost my job at the bank, so I am opening a dance studio of my own next month.",
    "Gina: Door Dash let me go last Friday. " * 12,
    "thanks!",
    "Evan: " + "The quarterly tax report is due and the spreadsheets do not add up. " * 45,
]


def test_length_buckets_sort_and_cap_texts_and_padded_tokens() -> None:
    lengths = [5, 300, 7, 6, 100, 5]
    assert emb.length_buckets(lengths, 2, 256) == [[0, 5], [3, 2], [4], [1]]
    assert emb.length_buckets(lengths, 8, 256) == [[0, 5, 3, 2], [4], [1]]  # 5 x 100 > 256, 300 alone
    assert emb.length_buckets(lengths, 8, 10_000) == [[0, 5, 3, 2, 4, 1]]
    assert emb.length_buckets([], 8, 256) == []


def test_onnx_length_buckets_give_the_one_at_a_time_vectors_in_input_order(minilm: OnnxMiniLMEmbedder) -> None:
    bucketed = OnnxMiniLMEmbedder(batch_size=3, batch_tokens=512)  # several buckets, long texts alone
    bucketed._session, bucketed._tokenizer = minilm._ensure_loaded()  # share the model
    singles = np.stack([minilm.embed([t])[0] for t in MIXED_LENGTHS])
    for vectors in (bucketed.embed(MIXED_LENGTHS), minilm.embed(MIXED_LENGTHS)):
        cosines = np.sum(vectors * singles, axis=1)
        assert cosines.min() >= 0.9999, cosines
    assert singles[3] @ singles[7] < 0.9  # rows swapped between two long texts would show


def test_onnx_semantic_similarity(minilm: OnnxMiniLMEmbedder) -> None:
    hiking, trekking, taxes = minilm.embed([HIKING, TREKKING, TAXES])
    assert hiking @ trekking > 0.5
    assert hiking @ trekking > hiking @ taxes + 0.3
    assert hiking @ trekking > trekking @ taxes + 0.3


def test_onnx_empty_list_and_long_text(minilm: OnnxMiniLMEmbedder) -> None:
    empty = minilm.embed([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32
    long_text = minilm.embed_one("word " * 3000)  # truncated to 256 tokens
    assert long_text.shape == (384,)
    assert abs(float(np.linalg.norm(long_text)) - 1.0) < 1e-5


def test_onnx_rejects_a_bare_string(minilm: OnnxMiniLMEmbedder) -> None:
    with pytest.raises(TypeError):
        minilm.embed("not a list")  # type: ignore[arg-type]


def test_onnx_query_cache(minilm: OnnxMiniLMEmbedder) -> None:
    first = minilm.embed_one("what are my hobbies?")
    hits = minilm.cache.hits
    first[:] = 0.0  # callers get copies: mutating one must not poison the cache
    again = minilm.embed_one("what are my hobbies?")
    assert minilm.cache.hits == hits + 1
    np.testing.assert_allclose(again, minilm.embed(["what are my hobbies?"])[0], atol=1e-6)


def test_onnx_lazy_load_is_once_and_thread_safe(monkeypatch: pytest.MonkeyPatch) -> None:
    embedder = OnnxMiniLMEmbedder(cache_size=0)
    loads: list[int] = []
    real_load = embedder._load_session

    def counting_load() -> object:
        loads.append(1)
        return real_load()

    monkeypatch.setattr(embedder, "_load_session", counting_load)
    results: list[np.ndarray] = []
    threads = [threading.Thread(target=lambda i=i: results.append(embedder.embed_one(f"t{i}"))) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(loads) == 1 and len(results) == 4


def test_closing_the_services_releases_the_model_and_a_later_embed_loads_it_again(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Services.close`` (a coordinator's close) lets go of the ONNX session: a process that builds
    many (the suite: one per test) no longer holds a model per closed one until a full collection."""
    from agtos.memory.services import Services

    services = Services(settings)
    embedder = services.semantic.embedder
    assert isinstance(embedder, OnnxMiniLMEmbedder)
    loads: list[int] = []
    real_load = embedder._load_session
    monkeypatch.setattr(embedder, "_load_session", lambda: loads.append(1) or real_load())
    first = embedder.embed(["a dog named Rex"])
    services.close()
    assert embedder._session is None and embedder._tokenizer is None
    again = embedder.embed(["a dog named Rex"])  # closed, not broken: loaded again
    assert loads == [1, 1]
    np.testing.assert_allclose(again, first, atol=1e-6)


def test_onnx_checksum_mismatch_is_a_clear_error() -> None:
    embedder = OnnxMiniLMEmbedder(expected_sha256="0" * 64)
    with pytest.raises(EmbeddingError, match=r"sha256.*reinstall"):
        embedder.embed(["x"])


# -- Ollama ---------------------------------------------------------------------------------


def test_ollama_wire_format_and_normalisation(stub: StubModelServer) -> None:
    embedder = OllamaEmbedder(base_url=stub.url, api_key="secret")
    texts = ["the cat sat", "the cat sat down", "stock market news"]
    vectors = embedder.embed(texts)
    (request,) = stub.requests
    assert (request.method, request.path) == ("POST", "/api/embed")
    assert request.body == {"model": "nomic-embed-text", "input": texts}
    assert request.headers["authorization"] == "Bearer secret"
    assert vectors.shape == (3, 64) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    assert embedder.dim == 64  # discovered from the response, not the 768 default
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_ollama_batches_keep_order_and_cache_queries(stub: StubModelServer) -> None:
    embedder = OllamaEmbedder("all-minilm", stub.url, batch_size=2)
    texts = [f"text number {i} {'x' * i}" for i in range(5)]
    np.testing.assert_allclose(embedder.embed(texts), expected(texts), atol=1e-6)
    assert [len(r.body["input"]) for r in stub.requests] == [2, 2, 1]
    assert "authorization" not in stub.requests[0].headers
    embedder.embed_one("repeat me")
    embedder.embed_one("repeat me")
    assert len(stub.requests) == 4


def test_ollama_errors(stub: StubModelServer) -> None:
    embedder = OllamaEmbedder(base_url=stub.url)
    stub.fail_next(500)
    with pytest.raises(EmbeddingError, match="HTTP 500"):
        embedder.embed(["x"])
    stub.malformed_next()
    with pytest.raises(EmbeddingError, match="invalid JSON"):
        embedder.embed(["x"])
    stub.fail_next(404)
    with pytest.raises(EmbeddingError):
        embedder.embed_one("x")


def test_http_dim_probe_and_fallback(stub: StubModelServer) -> None:
    assert OllamaEmbedder("some-custom-model", stub.url).dim == 64
    assert len(stub.requests) == 1
    down_url = stub.url
    stub.stop()
    assert OllamaEmbedder(base_url=down_url, timeout_s=2).dim == 768  # known model, server down
    with pytest.raises(EmbeddingError, match="failed"):
        _ = OllamaEmbedder("some-custom-model", down_url, timeout_s=2).dim
    empty = OllamaEmbedder(base_url=down_url).embed([])
    assert empty.shape == (0, 768)  # no request for nothing


# -- OpenAI-compatible ------------------------------------------------------------------------


def test_openai_wire_format_sorts_by_index(stub: StubModelServer) -> None:
    stub.api_key = "sk-test"
    stub.reverse_embeddings = True
    embedder = OpenAICompatibleEmbedder("text-embedding-3-small", stub.url + "/v1", "sk-test")
    texts = ["alpha beta", "gamma delta", "alpha gamma"]
    vectors = embedder.embed(texts)
    (request,) = stub.requests
    assert request.path == "/v1/embeddings"
    assert request.body == {"model": "text-embedding-3-small", "input": texts}
    assert request.headers["authorization"] == "Bearer sk-test"
    np.testing.assert_allclose(vectors, expected(texts), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


def test_openai_errors(stub: StubModelServer) -> None:
    stub.api_key = "sk-right"
    with pytest.raises(EmbeddingError, match="HTTP 401"):
        OpenAICompatibleEmbedder("m", stub.url, "sk-wrong").embed(["x"])
    embedder = OpenAICompatibleEmbedder("m", stub.url, "sk-right")
    stub.fail_next(500)
    with pytest.raises(EmbeddingError, match="HTTP 500"):
        embedder.embed(["x"])
    stub.malformed_next()
    with pytest.raises(EmbeddingError):
        embedder.embed(["x"])
    assert embedder.embed(["x"]).shape == (1, 64)


# -- build_embedder ---------------------------------------------------------------------------


def test_build_embedder_default_is_onnx(clean_env: pytest.MonkeyPatch) -> None:
    embedder = build_embedder()
    assert isinstance(embedder, OnnxMiniLMEmbedder) and embedder._session is None  # still lazy
    clean_env.setenv("AGTOS_EMBEDDING_PROVIDER", "local")
    clean_env.setenv("AGTOS_EMBEDDING_THREADS", "1")
    local = build_embedder()
    assert isinstance(local, OnnxMiniLMEmbedder) and local.intra_op_threads == 1
    with pytest.raises(ValueError, match="only runs"):
        build_embedder("onnx", "nomic-embed-text")


def test_build_embedder_from_env(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("AGTOS_EMBEDDING_PROVIDER", "Ollama")
    clean_env.setenv("AGTOS_EMBEDDING_MODEL", "mxbai-embed-large")
    clean_env.setenv("AGTOS_EMBEDDING_BASE_URL", "http://10.0.0.5:11434/")
    embedder = build_embedder()
    assert isinstance(embedder, OllamaEmbedder)
    assert (embedder.model, embedder.base_url) == ("mxbai-embed-large", "http://10.0.0.5:11434")
    clean_env.setenv("AGTOS_EMBEDDING_PROVIDER", "openrouter")
    clean_env.delenv("AGTOS_EMBEDDING_MODEL")
    clean_env.delenv("AGTOS_EMBEDDING_BASE_URL")
    clean_env.setenv("AGTOS_EMBEDDING_API_KEY", "or-key")
    router = build_embedder()
    assert isinstance(router, OpenAICompatibleEmbedder)
    assert (router.name, router.model, router.api_key) == (
        "openrouter",
        "openai/text-embedding-3-small",
        "or-key",
    )
    assert router.base_url == emb.DEFAULT_BASE_URLS["openrouter"]
    explicit = build_embedder("openai", api_key="sk")
    assert (explicit.name, explicit.model) == ("openai", "text-embedding-3-small")


def test_build_embedder_errors(clean_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=r"unknown embedding provider 'word2vec'.*onnx.*ollama.*openai"):
        build_embedder("word2vec")
    with pytest.raises(ValueError, match="API key"):
        build_embedder("openai")
    with pytest.raises(ValueError, match="base_url"):
        build_embedder("openai-compatible", "m")


def test_vector_index_imported_before_the_embedder_does_not_crash() -> None:
    """usearch loaded before onnxruntime segfaults unless tokenizers comes first (vector_shard sees to it)."""
    code = (
        "import agtos.storage.vector_index\n"
        "from agtos.providers.embeddings import OnnxMiniLMEmbedder\n"
        "print(OnnxMiniLMEmbedder().embed(['import order']).shape)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "(1, 384)"


def test_int8_variant_stays_close_to_the_float_model_and_is_derived_once(tmp_path: Path) -> None:
    texts = [
        "My sister Anna lives in Lisbon and works as a nurse.",
        "I prefer tea over coffee in the morning.",
        "The deployment failed because the Redis password was wrong.",
        "We moved the standup to 9:30 because of the new timezone.",
    ]
    exact = OnnxMiniLMEmbedder().embed(texts)
    quick = OnnxMiniLMEmbedder(quantize="int8", derived_dir=tmp_path)
    approx = quick.embed(texts)
    cosines = (exact * approx).sum(axis=1)
    assert cosines.min() > 0.95 and cosines.mean() > 0.98
    assert quick.model.endswith("+dynamic-int8")
    close = quick.embed(["What does my sister do for a living?", "Which drink do I like in the morning?"])
    sims = close @ approx.T
    assert sims[0].argmax() == 0 and sims[1].argmax() == 1  # the related sentence ranks first

    (derived,) = tmp_path.glob("*.onnx")
    stamp = derived.stat().st_mtime_ns
    OnnxMiniLMEmbedder(quantize="int8", derived_dir=tmp_path).embed(["reuses the derived file"])
    assert derived.stat().st_mtime_ns == stamp
    derived.write_bytes(b"not a model")  # a damaged cache file is derived again
    repaired = OnnxMiniLMEmbedder(quantize="int8", derived_dir=tmp_path).embed(texts)
    np.testing.assert_allclose(repaired, approx, atol=1e-5)


def test_quantize_setting_is_validated() -> None:
    assert check_quantize(" INT8 ") == "int8"
    assert check_quantize("none") is None and check_quantize(None) is None
    with pytest.raises(ValueError, match="AGTOS_EMBEDDING_QUANTIZE"):
        check_quantize("fp4")
    with pytest.raises(ValueError, match="AGTOS_EMBEDDING_QUANTIZE"):
        Settings(embedding=EmbeddingConfig(quantize="fp4"))
