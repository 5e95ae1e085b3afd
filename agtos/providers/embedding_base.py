"""What every embedder shares: the :class:`Embedder` interface, its error, unit-norm rows, length
buckets for batched inference and the LRU cache of single-text (query) embeddings."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

import numpy as np


class EmbeddingError(RuntimeError):
    """The embedding model could not be loaded, or the provider failed or answered garbage."""


class EmbeddingTimeout(EmbeddingError):
    """A remote embedder accepted the request but did not answer in time."""


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


def check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("embed() takes a list of texts; use embed_one() for a single string")
    return list(texts)


class QueryCache:
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
