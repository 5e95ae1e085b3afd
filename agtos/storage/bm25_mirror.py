"""One user's in-process BM25 mirror: postings as packed arrays, scored with numpy.

Rows are append-only: re-adding a document tombstones its old row and appends a new one;
tombstones are compacted away once they outnumber live rows. Scores are exact Okapi BM25
with the same formula as :mod:`agtos.tasks.bm25` (every posting of every query term is
read, no cap). Callers hold ``mirror.lock`` around every method.
"""

from __future__ import annotations

import threading
from array import array
from dataclasses import dataclass, field

import numpy as np

from agtos.tasks import bm25

COMPACT_MIN_DEAD = 1_024
#: a search's floor (a lower bound of its worst hit's score) is read from about this many candidates
#: per hit asked for: only the scores from it up are selected among (exact, fewer to sort)
FLOOR_SAMPLE = 4
#: only the rows of the terms a hit needs are scored when they hold at most 1/SPARSE of the query's postings
SPARSE = 8


def encode_terms(tf: dict[str, int]) -> str:
    """``{"redis": 2, "port": 1}`` → ``"redis:2 port:1"`` (terms never contain ``:`` or spaces)."""
    return " ".join(f"{term}:{count}" for term, count in tf.items())


def decode_terms(raw: bytes | str | None) -> dict[str, int]:
    """Inverse of :func:`encode_terms`; a bare ``term`` (older format) counts once."""
    if not raw:
        return {}
    text = raw.decode() if isinstance(raw, bytes) else raw
    out: dict[str, int] = {}
    for token in text.split():
        term, _, count = token.partition(":")
        out[term] = int(count) if count.isdigit() else 1
    return out


@dataclass
class _Postings:
    """One term's postings, rows ascending (rows are appended in order, compaction keeps it); the
    largest tf and shortest document length among the first ``bounded`` of them (tombstones
    included; :meth:`refresh` takes in the postings added since): with them, :meth:`bound` is at
    least the term's score in any of its documents."""

    rows: array = field(default_factory=lambda: array("i"))
    tfs: array = field(default_factory=lambda: array("f"))
    max_tf: float = 0.0
    min_length: float = float("inf")
    bounded: int = 0

    def refresh(self, lengths: np.ndarray) -> None:
        """Take the postings added since the last call into ``max_tf`` and ``min_length`` (at search
        time, in bulk: not one comparison per posting written)."""
        if self.bounded < len(self.rows):
            rows = np.frombuffer(self.rows, dtype=np.int32)[self.bounded :]
            self.max_tf = max(self.max_tf, float(np.frombuffer(self.tfs, dtype=np.float32)[self.bounded :].max()))
            self.min_length = min(self.min_length, float(lengths[rows].min()))
            self.bounded = len(self.rows)

    def bound(self, term_idf: float, avg_len: float) -> float:
        """An upper bound of the term's BM25 score in any of its documents (score rises with tf
        and falls with the length), a hair above it against rounding."""
        norm = 1.0 - bm25.B + bm25.B * (self.min_length / avg_len if avg_len > 0 else 1.0)
        return term_idf * self.max_tf * (bm25.K1 + 1.0) / (self.max_tf + bm25.K1 * norm) * (1.0 + 1e-9)


@dataclass
class BM25Mirror:
    lock: threading.RLock = field(default_factory=threading.RLock)
    loaded: bool = False
    epoch: bytes | None = None  # the Redis index life this mirror belongs to
    version: int = 0  # the Redis write version this mirror reflects
    rows: dict[str, int] = field(default_factory=dict)
    ids: list[str | None] = field(default_factory=list)
    lengths: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    alive: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    postings: dict[str, _Postings] = field(default_factory=dict)
    total_length: float = 0.0
    dead: int = 0

    def reset(self) -> None:
        self.rows, self.ids, self.postings = {}, [], {}
        self.lengths, self.alive = np.zeros(1024, np.float64), np.zeros(1024, bool)
        self.total_length, self.dead = 0.0, 0

    @property
    def size(self) -> int:
        return len(self.rows)

    @property
    def memory_bytes(self) -> int:
        postings = sum(p.rows.itemsize * len(p.rows) * 2 for p in self.postings.values())
        return postings + self.lengths.nbytes + self.alive.nbytes

    def put(self, doc_id: str, tf: dict[str, int]) -> None:
        """Insert or replace a document's term frequencies (no terms: remove it)."""
        self.drop(doc_id)
        length = sum(tf.values())
        if not length:
            return
        row = len(self.ids)
        if row >= len(self.alive):
            grow = max(1024, len(self.alive))
            self.lengths = np.concatenate([self.lengths, np.zeros(grow, np.float64)])
            self.alive = np.concatenate([self.alive, np.zeros(grow, bool)])
        self.ids.append(doc_id)
        self.rows[doc_id] = row
        self.lengths[row], self.alive[row] = length, True
        self.total_length += length
        for term, count in tf.items():
            postings = self.postings.get(term)
            if postings is None:
                postings = self.postings[term] = _Postings()
            postings.rows.append(row)
            postings.tfs.append(count)

    def drop(self, doc_id: str) -> None:
        row = self.rows.pop(doc_id, None)
        if row is None:
            return
        self.ids[row], self.alive[row] = None, False
        self.total_length -= self.lengths[row]
        self.dead += 1
        if self.dead >= max(COMPACT_MIN_DEAD, len(self.rows)):
            self.compact()

    def compact(self) -> None:
        """Drop tombstoned rows from every posting list and renumber the live rows."""
        n = len(self.ids)
        alive = self.alive[:n]
        new_row = np.cumsum(alive, dtype=np.int64) - 1
        for term in list(self.postings):
            old = self.postings[term]
            rows = np.frombuffer(old.rows, dtype=np.int32)
            keep = alive[rows]
            if not keep.any():
                del self.postings[term]
                continue
            old.refresh(self.lengths)
            fresh = _Postings(max_tf=old.max_tf, min_length=old.min_length)  # still bounds: fewer postings
            fresh.rows.frombytes(new_row[rows[keep]].astype(np.int32).tobytes())
            fresh.tfs.frombytes(np.frombuffer(old.tfs, dtype=np.float32)[keep].tobytes())
            fresh.bounded = len(fresh.rows)
            del rows
            self.postings[term] = fresh
        live = np.flatnonzero(alive)
        self.ids = [self.ids[r] for r in live]
        self.rows = {doc_id: row for row, doc_id in enumerate(self.ids) if doc_id is not None}
        capacity = max(1024, len(self.ids) * 2)
        lengths, flags = np.zeros(capacity, np.float64), np.zeros(capacity, bool)
        lengths[: len(live)], flags[: len(live)] = self.lengths[live], True
        self.lengths, self.alive, self.dead = lengths, flags, 0

    def search(self, terms: list[str], limit: int) -> list[tuple[str, float]]:
        """Best-first ``(doc_id, score)`` over documents containing a query term; ties by id."""
        n_docs = len(self.rows)
        if not n_docs or limit <= 0:
            return []
        avg_len = self.total_length / n_docs
        matched: list[_Matched] = []
        for term in dict.fromkeys(terms):
            postings = self.postings.get(term)
            if postings is None:
                continue
            rows = np.frombuffer(postings.rows, dtype=np.int32)
            tfs = np.frombuffer(postings.tfs, dtype=np.float32)
            if self.dead:  # else every posting's row is alive: no mask, no copies
                keep = self.alive[rows]
                rows, tfs = rows[keep], tfs[keep]
            if len(rows):
                term_idf = bm25.idf(n_docs, len(rows))
                postings.refresh(self.lengths)
                matched.append(_Matched(rows, tfs, term_idf, postings.bound(term_idf, avg_len)))
        if not matched:
            return []
        if len(matched) == 1:  # one term: its rows are distinct, its scores the sums
            only = matched[0]
            scores = self._scores(only, only.rows, only.tfs, avg_len)
            candidates, found_scores = _best(only.rows, scores, limit, _chunk_floor(scores, limit))
        else:
            candidates, found_scores = self._best_of_terms(matched, limit, avg_len)
        return self._ranked(candidates, found_scores, limit)

    def _ranked(self, candidates: np.ndarray, scores: np.ndarray, limit: int) -> list[tuple[str, float]]:
        """The first ``limit`` of these rows by score, then id: those above the lowest score sorted
        as (-score, id) tuples (in C, no key function), those at it (ties by the hundred in a corpus
        of repeated texts) by id alone."""
        ids = self.ids  # Python ints and floats in bulk (tolist), not a numpy scalar per candidate
        lowest = scores.min()
        above = scores > lowest
        found = zip((-scores[above]).tolist(), candidates[above].tolist(), strict=True)
        # a score negated twice is itself
        hits = sorted((negated, doc_id) for negated, r in found if (doc_id := ids[r]) is not None)
        out = [(doc_id, -negated) for negated, doc_id in hits[:limit]]
        if len(out) < limit:
            tied = sorted(doc_id for r in candidates[~above].tolist() if (doc_id := ids[r]) is not None)
            out += [(doc_id, float(lowest)) for doc_id in tied[: limit - len(out)]]
        return out

    def _scores(self, term: _Matched, rows: np.ndarray, tfs: np.ndarray, avg_len: float) -> np.ndarray:
        """The term's BM25 score in each of these rows (``tfs``: its tf there)."""
        tf = tfs.astype(np.float64)
        norm = 1.0 - bm25.B + bm25.B * (self.lengths[rows] / avg_len if avg_len > 0 else 1.0)
        return term.idf * tf * (bm25.K1 + 1.0) / (tf + bm25.K1 * norm)

    def _sums(self, matched: list[_Matched], rows: np.ndarray, avg_len: float) -> np.ndarray:
        """The scores of these distinct rows (ascending), summed in the order of the terms: bit for bit
        what a sum over every posting gives (a term a row lacks adds nothing)."""
        sums = np.zeros(len(rows), np.float64)
        for term in matched:
            at = np.minimum(np.searchsorted(term.rows, rows), len(term.rows) - 1)
            has = term.rows[at] == rows
            sums[has] += self._scores(term, rows[has], term.tfs[at[has]], avg_len)
        return sums

    def _best_of_terms(self, matched: list[_Matched], limit: int, avg_len: float) -> tuple[np.ndarray, np.ndarray]:
        """:func:`_best` of several terms' summed scores. A floor (at most the ``limit``-th best score)
        is read from about :data:`FLOOR_SAMPLE` × ``limit`` rows of the rarest terms; a document
        with only terms whose bounds add up to less than it cannot be a hit (MaxScore), so when the
        other terms have few postings only their rows are scored, else every posting is."""
        wanted = FLOOR_SAMPLE * limit
        head: list[np.ndarray] = []
        for term in sorted(matched, key=lambda m: len(m.rows)):
            head.append(term.rows[: wanted - sum(map(len, head))])
            if sum(map(len, head)) >= wanted:
                break
        sample = head[0] if len(head) == 1 else np.unique(np.concatenate(head))  # one term's rows: distinct
        floor = _kth_best(self._sums(matched, sample, avg_len), limit) if len(sample) >= limit else 0.0
        optional: set[int] = set()
        reach = 0.0
        for i in sorted(range(len(matched)), key=lambda i: matched[i].bound):
            reach += matched[i].bound
            if reach >= floor:
                break
            optional.add(i)
        needed = [m.rows for i, m in enumerate(matched) if i not in optional]
        if optional and SPARSE * sum(map(len, needed)) <= sum(len(m.rows) for m in matched):
            rows = needed[0] if len(needed) == 1 else np.unique(np.concatenate(needed))
            return _best(rows, self._sums(matched, rows, avg_len), limit, floor)
        rows = np.concatenate([m.rows for m in matched])
        scores = np.bincount(rows, weights=np.concatenate([self._scores(m, m.rows, m.tfs, avg_len) for m in matched]))
        return _best(None, scores, limit, floor)


@dataclass(frozen=True)
class _Matched:
    """A query term's live postings in one search: rows ascending, tfs, idf and score bound."""

    rows: np.ndarray
    tfs: np.ndarray
    idf: float
    bound: float


def _chunk_floor(scores: np.ndarray, limit: int) -> float:
    """A lower bound of the ``limit``-th best of ``scores`` (one term's): the ``limit``-th best of the
    maxima of :data:`FLOOR_SAMPLE` × ``limit`` runs of it (each maximum a distinct element); 0 when
    there are not that many."""
    runs = FLOOR_SAMPLE * limit
    if len(scores) < 2 * runs:
        return 0.0
    maxima = np.maximum.reduceat(scores, np.arange(0, len(scores), len(scores) // runs))
    return _kth_best(maxima, limit)


def _best(rows: np.ndarray | None, scores: np.ndarray, limit: int, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """The rows whose score is at least the ``limit``-th best (ties included) and their scores;
    ``rows``: the row of each score (None: the score's index is its row, 0: no match); ``floor``: at
    most that ``limit``-th best score (only the scores from it up are selected among)."""
    above = np.flatnonzero(scores >= floor) if floor > 0 else np.flatnonzero(scores)
    candidates = above if rows is None else rows[above]
    found = scores[above]
    if len(found) > limit:
        kth = _kth_best(found, limit)
        best = found >= kth
        candidates, found = candidates[best], found[best]
    return candidates, found


def _kth_best(values: np.ndarray, k: int) -> float:
    """The ``k``-th largest of ``values`` (``len(values) >= k``)."""
    return float(np.partition(values, len(values) - k)[len(values) - k])
