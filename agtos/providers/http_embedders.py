"""Embedders behind an HTTP API: Ollama's ``/api/embed`` and the OpenAI-compatible ``/embeddings``
(OpenAI, OpenRouter, vLLM, llama.cpp...), with batching, answer checks and dimension discovery."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import httpx
import numpy as np

from agtos.providers.embedding_base import (
    CircuitBreaker,
    EmbeddingError,
    EmbeddingTimeout,
    QueryCache,
    check_texts,
    l2_normalise,
)
from agtos.providers.llm import DEFAULT_BASE_URLS
from agtos.tasks.url_credentials import mask_urls, split_userinfo

log = logging.getLogger(__name__)

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


class HTTPEmbedder:
    """Shared plumbing of the HTTP embedders: batching, validation, errors, dim discovery.

    A query (:meth:`embed_one`) and the dimension probe wait at most ``query_timeout_s``, batches
    ``timeout_s`` unless the caller bounds them (:meth:`embed`'s ``timeout_s``, while serving a
    request); every call goes through one :class:`CircuitBreaker` (``breaker_failures`` silent or
    failed calls in a row open it for ``breaker_cooldown_s``), so a service that stops answering
    holds one call per cool-down, not every search."""

    path = ""

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str = "",
        *,
        name: str,
        timeout_s: float = 30.0,
        query_timeout_s: float = 2.0,
        breaker_failures: int = 2,
        breaker_cooldown_s: float = 10.0,
        batch_size: int = 64,
        cache_size: int = 256,
    ) -> None:
        if not base_url:
            raise ValueError(f"embedding provider {name!r} needs a base_url")
        self.name = name
        self.model = model
        # credentials in the URL travel as Basic auth, so no log line or error names them
        self.base_url, auth = split_userinfo(base_url.rstrip("/"))
        self.shown_url = mask_urls(base_url.rstrip("/"))  # what messages name: http://user:***@host:port
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.query_timeout_s = min(query_timeout_s, timeout_s)
        self.breaker = CircuitBreaker(name, breaker_failures, breaker_cooldown_s)
        self.batch_size = max(1, batch_size)
        self.cache = QueryCache(cache_size)
        self._dim: int | None = None
        self._client = httpx.Client(timeout=timeout_s, auth=auth)

    @property
    def dim(self) -> int:
        """The dimension the service returned; probed with one request if none was made yet.

        The probe waits at most ``query_timeout_s`` (it runs on a search's first use of the embedder).
        If it fails, a well-known model's published dimension is used, else ``EmbeddingError`` propagates.
        """
        if self._dim is None:
            try:
                self._vectors(["dimension probe"], timeout_s=self.query_timeout_s)
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

    def ping(self, timeout_s: float) -> None:
        """Embed one short text within ``timeout_s`` (bounded by the configured timeout); raises
        ``EmbeddingError`` when the service does not answer in time or answers garbage, and at once
        while the circuit breaker is open (``/health`` then says degraded)."""
        self._vectors(["health probe"], timeout_s=min(timeout_s, self.timeout_s))

    def _post(self, payload: dict[str, Any], timeout_s: float | None = None) -> Any:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        url = self.shown_url + self.path
        timeout = httpx.USE_CLIENT_DEFAULT if timeout_s is None else httpx.Timeout(timeout_s)
        self.breaker.allow()
        try:
            response = self._client.post(self.base_url + self.path, json=payload, headers=headers, timeout=timeout)
        except httpx.TimeoutException as exc:
            self.breaker.failed()
            waited = self.timeout_s if timeout_s is None else timeout_s
            raise EmbeddingTimeout(f"{self.name} embedding request to {url}: no answer within {waited:g} s") from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:  # InvalidURL: e.g. a typo in the port
            self.breaker.failed()
            raise EmbeddingError(f"{self.name} embedding request to {url} failed: {mask_urls(str(exc))}") from exc
        except BaseException:  # the breaker must not wait for a trial call that never reports
            self.breaker.failed()
            raise
        # a 5xx or 429 says the service cannot serve now; any other answer shows it is there
        if response.status_code >= 500 or response.status_code == 429:
            self.breaker.failed()
        else:
            self.breaker.succeeded()
        if response.status_code >= 400:
            raise EmbeddingError(
                f"{self.name} embedding request to {url} failed: HTTP {response.status_code} {response.text[:200]!r}"
            )
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise EmbeddingError(f"{self.name} answered {url} with invalid JSON: {response.text[:200]!r}") from exc

    def _request(self, texts: list[str], timeout_s: float | None = None) -> Any:
        """Raw vectors (a list of lists) for one batch, in input order."""
        raise NotImplementedError

    def _vectors(self, texts: list[str], timeout_s: float | None = None) -> np.ndarray:
        raw = self._request(texts, timeout_s)
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

    def embed(self, texts: list[str], timeout_s: float | None = None) -> np.ndarray:
        """``(len(texts), dim)`` float32 unit rows, in ``batch_size`` requests, each waiting at most the
        call timeout (the worker's batches). Given ``timeout_s`` (while serving a request), the whole call
        waits at most that long (capped by the call timeout), each request what is left of it; a silent
        service then raises ``EmbeddingTimeout``, a circuit-breaker failure like any other."""
        items = check_texts(texts)
        if not items:
            dim = self._dim or KNOWN_DIMS.get(self.model.rsplit("/", 1)[-1].split(":", 1)[0], 0)
            return np.zeros((0, dim), dtype=np.float32)
        deadline = None if timeout_s is None else time.monotonic() + min(timeout_s, self.timeout_s)
        parts = []
        for i in range(0, len(items), self.batch_size):
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise EmbeddingTimeout(f"{self.name} embedding of {len(items)} texts: not done within {timeout_s:g} s")
            parts.append(self._vectors(items[i : i + self.batch_size], timeout_s=left))
        return np.concatenate(parts, axis=0)

    def embed_one(self, text: str) -> np.ndarray:
        """``(dim,)`` float32 unit vector (a query: it waits at most ``query_timeout_s``), served from
        the LRU cache when seen recently."""
        cached = self.cache.get(text)
        if cached is not None:
            return cached
        vector = self._vectors([text], timeout_s=self.query_timeout_s)[0]
        self.cache.put(text, vector)
        return vector


class OllamaEmbedder(HTTPEmbedder):
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

    def _request(self, texts: list[str], timeout_s: float | None = None) -> Any:
        body = self._post({"model": self.model, "input": texts}, timeout_s)
        try:
            return body["embeddings"]
        except (KeyError, TypeError) as exc:
            raise EmbeddingError(f"ollama answered without 'embeddings': {body!r:.200}") from exc


class OpenAICompatibleEmbedder(HTTPEmbedder):
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

    def _request(self, texts: list[str], timeout_s: float | None = None) -> Any:
        body = self._post({"model": self.model, "input": texts}, timeout_s)
        try:
            data = sorted(body["data"], key=lambda item: int(item["index"]))
            return [item["embedding"] for item in data]
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbeddingError(f"{self.name} answered without data[].embedding/index: {body!r:.200}") from exc
