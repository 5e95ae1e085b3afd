"""What every embedder shares: the :class:`Embedder` interface, its error, unit-norm rows, length
buckets for batched inference, the LRU cache of single-text (query) embeddings and the circuit
breaker of a remote embedder."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

log = logging.getLogger(__name__)


class EmbeddingError(RuntimeError):
    """The embedding model could not be loaded, or the provider failed or answered garbage."""


class EmbeddingTimeout(EmbeddingError):
    """A remote embedder accepted the request but did not answer in time."""


class EmbeddingCircuitOpen(EmbeddingError):
    """A remote embedder failed or went silent just now: calls fail at once until its cool-down ends."""


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


class CircuitBreaker:
    """Fails calls at once for ``cooldown_s`` after ``failures`` failures in a row (0: never), so a
    silent service holds one call per cool-down instead of every caller; then one trial call goes
    through (half-open): an answer closes the breaker, a failure opens it for another cool-down.

    A caller asks :meth:`allow` before each call and reports :meth:`succeeded` or :meth:`failed`."""

    def __init__(
        self, name: str, failures: int = 2, cooldown_s: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.name = name
        self.threshold = failures
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._lock = threading.Lock()
        self._failures = 0
        self._open_until: float | None = None  # None: closed
        self._trial = False  # a half-open trial call is in flight

    @property
    def state(self) -> str:
        """``closed``, ``open`` (in its cool-down: calls fail at once) or ``half-open`` (a trial may go)."""
        with self._lock:
            if self._open_until is None:
                return "closed"
            return "open" if self._clock() < self._open_until else "half-open"

    def allow(self) -> None:
        """Return if a call may go out now (closed, or this is the half-open trial), else raise
        :class:`EmbeddingCircuitOpen`."""
        with self._lock:
            if self._open_until is None:
                return
            wait = self._open_until - self._clock()
            if wait <= 0 and not self._trial:
                self._trial = True
                return
        retry = f"retrying in {wait:.1f} s" if wait > 0 else "a retry is in flight"
        raise EmbeddingCircuitOpen(f"{self.name} embedder did not answer just now; {retry}")

    def succeeded(self) -> None:
        with self._lock:
            was_open = self._open_until is not None
            self._failures, self._open_until, self._trial = 0, None, False
        if was_open:
            log.warning("%s embedder answers again: circuit closed", self.name)

    def failed(self) -> None:
        with self._lock:
            self._failures += 1
            self._trial = False
            if self.threshold <= 0 or self._failures < self.threshold:
                return
            opens = self._open_until is None
            self._open_until = self._clock() + self.cooldown_s
        if opens:
            log.warning(
                "%s embedder failed %d time(s) in a row: calls fail at once, retried every %g s",
                self.name,
                self.threshold,
                self.cooldown_s,
            )
