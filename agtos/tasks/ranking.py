"""Ranking, in one place (pure): RRF, expansion fusion, 0-1 score scaling and recency re-ranking.

The storage layer fuses its vector and BM25 lists with :func:`fuse_scored` (equal scores share a rank); semantic
memory fuses the lists of a query's rephrasings with :func:`fuse_expansions`; search, context and
ask scale scores with :func:`display_score`, re-rank episodes with :func:`rerank_by_recency` and
search with :func:`without_speakers` (the query without the names of the people who speak).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import groupby
from operator import itemgetter
from typing import Any, Protocol, TypeVar

from agtos.tasks.text import content_words, fold

DEFAULT_K = 60
RECENCY_WEIGHT = 0.02  # a month newer gains 1 %: about one rank near the top of an RRF list
PRESENT_RECENCY_WEIGHT = 0.1  # for questions about the present state, where the latest session wins
_PRESENT = re.compile(
    r"\b(now|nowadays|these days|currently|current|at the moment|at present|latest|most recent|still|anymore|"
    r"any more|today)\b",
    re.IGNORECASE,
)
RECENCY_HALF_LIFE_DAYS = 30.0
EXPANSION_WEIGHT = 2.0  # the original query's weight against each rephrasing's 1
_DAY_MS = 86_400_000
_POSSESSIVE = r"(?:['\u2019]s?)?"
_CALENDAR = frozenset(
    "january february march april may june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday".split()
)


class Identified(Protocol):
    @property
    def id(self) -> str: ...


class Timed(Protocol):
    @property
    def score(self) -> float: ...

    @property
    def timestamp(self) -> int: ...


H = TypeVar("H", bound=Identified)
T = TypeVar("T", bound=Timed)
V = TypeVar("V")


def reciprocal_rank_fusion(
    ranked_lists: list[list[str]],
    k: int = DEFAULT_K,
    weights: Sequence[float] | None = None,
) -> list[tuple[str, float]]:
    """Fuse ranked lists: ``score(id) = Σ w_i / (k + rank_i)``, ranks starting at 1.

    An id repeated inside one list counts at its best rank only. The result is
    sorted by score, best first; ties keep the order in which ids first appear
    (list 0 top to bottom, then list 1, ...).
    """
    return _fused(
        [[(doc_id, rank) for rank, doc_id in enumerate(ranked, start=1)] for ranked in ranked_lists], k, weights
    )


def fuse_scored(
    scored_lists: list[list[tuple[str, float]]],
    k: int = DEFAULT_K,
    weights: Sequence[float] | None = None,
) -> list[tuple[str, float]]:
    """:func:`reciprocal_rank_fusion` of best-first ``(id, score)`` lists, each id at its :func:`shared_ranks`
    rank: ids of exactly equal score fuse the same whatever their order in the list (an order by id would
    make two users' results differ: issue 14)."""
    return _fused([shared_ranks(scored) for scored in scored_lists], k, weights)


def shared_ranks(scored: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    """The ids of a best-first ``(id, score)`` list with their ranks from 1, a run of equal scores sharing
    its mean rank (fractional ranking: scores 3, 2, 2, 1 rank 1, 2.5, 2.5, 4). The mean keeps each tied id's
    RRF share about what a random order among the tied would give it on average; the tie's first rank would
    credit each of them with the best place (identical turns said in many sessions would all rank first)."""
    ranked: list[tuple[str, float]] = []
    for _, run in groupby(scored, key=itemgetter(1)):
        ids = [doc_id for doc_id, _ in run]
        shared = len(ranked) + (len(ids) + 1) / 2
        ranked.extend((doc_id, shared) for doc_id in ids)
    return ranked


def _fused(
    ranked_lists: list[list[tuple[str, float]]], k: int, weights: Sequence[float] | None
) -> list[tuple[str, float]]:
    """``Σ w_i / (k + rank_i)`` over lists of ``(id, rank)``, an id at its first rank in each list; best first,
    ties in first-appearance order."""
    if k < 0:
        raise ValueError("k must be >= 0")
    if weights is None:
        weights = [1.0] * len(ranked_lists)
    elif len(weights) != len(ranked_lists):
        raise ValueError(f"got {len(weights)} weights for {len(ranked_lists)} lists")
    scores: dict[str, float] = {}
    for ranked, weight in zip(ranked_lists, weights, strict=True):
        seen: set[str] = set()
        for doc_id, rank in ranked:
            if doc_id in seen:
                continue
            seen.add(doc_id)
            scores[doc_id] = scores.get(doc_id, 0.0) + weight / (k + rank)
    # sorted() is stable, reverse=True too, so equal scores keep first-appearance (insertion) order
    return sorted(scores.items(), key=itemgetter(1), reverse=True)


#: a record's JSON fields read for its place among hits of equal score (:func:`content_order`): when it was said
#: (a turn's or an episode's ``timestamp``, a fact's ``valid_from``; not a write time such as ``updated_at``,
#: which differs between two users given the same data), then its words
SAID_AT_FIELDS = ("timestamp", "valid_from")
TEXT_FIELDS = ("content", "text", "summary", "name")


def content_order(payload: str | None) -> tuple[float, str, int]:
    """The sort key of a hit among hits of exactly equal score: the later said first, then by its words
    (and a turn's position): read from the record's JSON, never from its id (issue 14: equal-score hits
    ordered by id came out in another order for another user given the same data)."""
    try:
        record = json.loads(payload) if payload else {}
    except ValueError:
        record = {}
    if not isinstance(record, dict):
        record = {}
    said = next((v for f in SAID_AT_FIELDS if isinstance(v := record.get(f), int | float)), 0)
    text = next((v for f in TEXT_FIELDS if isinstance(v := record.get(f), str)), "")
    position = record.get("position")
    return -float(said), text, position if isinstance(position, int) else 0


def ties_ordered(hits: Sequence[V], score: Callable[[V], float], key: Callable[[V], Any]) -> list[V]:
    """Best-first ``hits`` with each run of exactly equal ``score`` sorted by ``key`` (the others keep their place)."""
    out: list[V] = []
    for _, run in groupby(hits, key=score):
        tied = list(run)
        out += sorted(tied, key=key) if len(tied) > 1 else tied
    return out


def fuse_evidence(
    owners: Mapping[str, Sequence[str]],
    weights: Mapping[str, float],
    k: int = DEFAULT_K,
    depth: int = 1,
    scored: Mapping[str, Sequence[float]] | None = None,
) -> list[tuple[str, float]]:
    """Weighted RRF of evidence lists by the record each piece of evidence belongs to.

    ``owners[name]`` is one ranked evidence list given as the owner of each item (e.g. the
    episode of each turn hit, best first); each owner gets ``w / (k + rank)`` for each of its
    first ``depth`` items in that list (``depth=1``: an owner ranks by its best evidence).
    ``scored[name]``: that list's scores, best first, items of equal score sharing their
    :func:`shared_ranks` rank. Best first; ties keep the order of first appearance (list by list).
    """
    if k < 0 or depth < 1:
        raise ValueError("need k >= 0 and depth >= 1")
    scores: dict[str, float] = {}
    for name, ranked in owners.items():
        weight, counted = weights[name], dict[str, int]()
        listed = scored.get(name) if scored else None
        places = enumerate(ranked, start=1) if listed is None else _places(ranked, listed)
        for rank, owner in places:
            if counted.get(owner, 0) >= depth:
                continue
            counted[owner] = counted.get(owner, 0) + 1
            scores[owner] = scores.get(owner, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=itemgetter(1), reverse=True)


def _places(ranked: Sequence[str], listed: Sequence[float]) -> list[tuple[float, str]]:
    """``(rank, owner)`` of a scored evidence list, equal scores sharing a rank."""
    return [(rank, owner) for owner, rank in shared_ranks(zip(ranked, listed, strict=True))]


def max_evidence_score(weights: Mapping[str, float], depth: int = 1, k: int = DEFAULT_K) -> float:
    """The :func:`fuse_evidence` score of an owner whose items rank first in every list."""
    return sum(w / (k + rank) for w in weights.values() for rank in range(1, depth + 1))


def max_fused_score(weights: Sequence[float], k: int = DEFAULT_K) -> float:
    """The RRF score of a document ranked first in every list (to scale scores to 0-1)."""
    return sum(weights) / (k + 1)


def fuse_expansions(lists: list[list[H]], limit: int) -> list[H]:
    """One list as is; several (original + expansions) by weighted RRF, keeping each hit's own score."""
    if len(lists) == 1:
        return lists[0]
    weights = [EXPANSION_WEIGHT] + [1.0] * (len(lists) - 1)
    fused = reciprocal_rank_fusion([[hit.id for hit in hits] for hits in lists], weights=weights)
    first_seen: dict[str, H] = {}
    for hits in lists:
        for hit in hits:
            first_seen.setdefault(hit.id, hit)
    return [first_seen[doc_id] for doc_id, _ in fused[:limit]]


def display_score(raw: float, mode: str, max_hybrid: float | None = None) -> float:
    """Scores in 0-1 for every mode: hybrid RRF is divided by its maximum (rank 1 in both lists)."""
    if mode == "hybrid":
        return round(min(1.0, raw / (max_hybrid or 2 / (DEFAULT_K + 1))), 4)
    if mode == "bm25":
        return round(raw / (raw + 1.0), 4)  # squash the unbounded BM25 score
    return round(raw, 4)


def recency_weight(query: str) -> float:
    """How much recency counts for ``query``: :data:`PRESENT_RECENCY_WEIGHT` when it asks about
    the present state ("now", "these days", "currently", "latest", "still"), where a later session
    updates an earlier one; else :data:`RECENCY_WEIGHT`, which only breaks near ties."""
    return PRESENT_RECENCY_WEIGHT if _PRESENT.search(query) else RECENCY_WEIGHT


def rerank_by_recency(hits: list[T], weight: float | None = None) -> list[T]:
    """Stable re-sort by score × (1 - w + w × 2^(-age behind the newest candidate / half-life)),
    ``w``: ``weight``, by default :data:`RECENCY_WEIGHT`.

    Ages are absolute (days), so records stored moments apart weigh the same, and a session a
    month newer than another gains at most w/2 of its score.
    """
    if len(hits) < 2:
        return hits
    newest = max(h.timestamp for h in hits)
    w = RECENCY_WEIGHT if weight is None else weight

    def weighted(hit: T) -> float:
        days_behind = (newest - hit.timestamp) / _DAY_MS
        return hit.score * (1 - w + w * 0.5 ** (days_behind / RECENCY_HALF_LIFE_DAYS))

    return sorted(hits, key=weighted, reverse=True)


def _composed(text: str) -> str:
    """``text`` in Unicode's composed form: "Zoe" + a combining diaeresis is written "Zoë"."""
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def _names_pattern(names: Iterable[str]) -> re.Pattern[str] | None:
    # a name that folds to nothing (a lone combining mark) would make a pattern that matches the empty string
    wanted = sorted(
        {_composed(n.strip()) for n in names if fold(n).strip() and n.strip().lower() not in _CALENDAR},
        key=len,
        reverse=True,
    )
    if not wanted:
        return None
    return re.compile(r"(?<!\w)(?:" + "|".join(map(_unaccented, wanted)) + r")" + _POSSESSIVE + r"(?!\w)", re.I)


def _unaccented(name: str) -> str:
    """A name's pattern that matches it also written without its accents ("Zoë": "Zoë" or "Zoe"); a mark that
    NFC cannot compose with its letter (Yoruba "Bọ̀dé": "ọ" + a combining grave) folds to nothing: optional."""
    return "".join(f"(?:{re.escape(c)}|{re.escape(fold(c))})" if fold(c) != c.lower() else re.escape(c) for c in name)


def without_speakers(query: str, names: Iterable[str]) -> str:
    """``query`` without the names of the conversations' speakers (``"What are Gina's and Jon's
    pets?"`` → ``"What are and pets?"``), or ``query`` itself when no content word would be left.

    Every stored turn is already attributed to its speaker, and a name the question carries
    matches most strongly the turns that say the name (greetings, "Night Gina!"): it swamps the
    words that say what is asked, in the embedding and in BM25 alike. Other names (a sister, a
    city, a band) are kept, and so are words that are names only by chance: a name is left out
    where the query writes it capitalised, and never when it is a month or a day ("May")."""
    pattern = _names_pattern(names)
    if pattern is None:
        return query
    stripped = " ".join(pattern.sub(lambda m: " " if m[0][0].isupper() else m[0], _composed(query)).split())
    return stripped if content_words(stripped) else query


def named_speakers(query: str, names: Iterable[str]) -> set[str]:
    """The ``names`` the query names as :func:`without_speakers` reads them (capitalised, not a month
    or a day), lower-cased: the people it asks about."""
    # "Zoe" names the speaker "Zoë"; "IŞIL" the speaker "Işıl" (upper case first: a dotless ı is an I)
    canonical = {_name_key(n.strip()): n.strip().lower() for n in names if n}
    pattern = _names_pattern(names)
    found = pattern.finditer(_composed(query)) if pattern is not None else ()
    said = (re.sub(_POSSESSIVE + "$", "", m[0]) for m in found if m[0][0].isupper())
    return {canonical[key] for key in map(_name_key, said) if key in canonical}


def _name_key(name: str) -> str:
    """A name as :func:`named_speakers` compares it: upper-cased, then folded (accents and case)."""
    return fold(name.upper())
