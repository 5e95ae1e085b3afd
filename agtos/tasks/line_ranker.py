"""A learned re-ranker of a context's candidate turns (pure): a logistic model over features the
pipeline already has for each turn the search found (issue 14, items 6/7).

Each candidate is described by :func:`features` (its hybrid score and rank, its episode's rank in
the search, whether the question names its speaker, its length, whether it only asks or greets,
the query words it shares, its neighbours' scores, dates / numbers / names against the question
word, its age); :func:`rerank` scores them with the weights in :data:`WEIGHTS` (a dot product, no
model file, nothing downloaded). The weights are fitted offline by
``benchmarks/eval/line_ranker_cv.py`` (scikit-learn, dev-only) with evidence turns as the label.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet

from agtos.schemas import StoredTurn
from agtos.tasks.bm25 import query_terms

FEATURES = (
    "score",  # the hybrid (RRF) score, 0-1
    "score_share",  # score / the pool's best
    "rank",  # 1 / log2(rank + 2), rank 0-based in the pool
    "episode_rank",  # 1 / (1 + rank of the turn's episode among the search's episodes), 0 when absent
    "episode_share",  # share of the pool from the same episode
    "asked_other",  # the question names speakers and this one is not among them
    "asked_self",  # the question names this turn's speaker
    "length",  # log(1 + words)
    "question",  # ends with a question mark
    "short",  # fewer than 6 words
    "overlap",  # share of the query's terms the turn holds
    "neighbour_score",  # best score of the turn before / after it, when in the pool
    "dated",  # a resolved date or a year / month / weekday in it
    "number",  # a digit or a number word
    "names",  # capitalised words not at a sentence start (share of words)
    "when_dated",  # "when" question x dated
    "count_number",  # "how many / how long / how much" x number
    "where_who_names",  # "where / who / which" question x names
    "photo",  # a shared photo's caption
    "opening",  # among the first 3 turns of its session
    "age",  # 0 (oldest candidate) .. 1 (newest)
)
#: fitted by benchmarks/eval/line_ranker_cv.py (standardised features folded in); 0s: the ranker is off
WEIGHTS: dict[str, float] = {}
BIAS = 0.0

_NUMBER = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|hundred|dozen|couple)\b",
    re.IGNORECASE,
)
_DATE = re.compile(
    r"\b(?:19|20)\d\d\b|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\b|"
    r"\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|yesterday|tomorrow|tonight|weekend|"
    r"last|next|ago)\b",
    re.IGNORECASE,
)
_CAPITAL = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+")
_WORDS = re.compile(r"\w+")
_PHOTO = "[shares a photo:"


def question_kind(query: str) -> AbstractSet[str]:
    """The question words that shape what an answer looks like: ``when``, ``count``, ``where_who``."""
    q = query.lower()
    out = set()
    if re.search(r"\bwhen\b|\bwhat (?:year|month|day|date)\b|\bhow long ago\b", q):
        out.add("when")
    if re.search(r"\bhow (?:many|much|long|often|old)\b", q):
        out.add("count")
    if re.search(r"\b(?:where|who|whom|which)\b", q):
        out.add("where_who")
    return out


def features(
    turns: Sequence[StoredTurn],
    scores: Sequence[float],
    query: str,
    asked: AbstractSet[str],
    episode_ranks: Mapping[str, int],
) -> list[list[float]]:
    """One row of :data:`FEATURES` per candidate turn (``scores``: their hybrid scores, best first;
    ``asked``: the speakers the question names, lower case; ``episode_ranks``: 0-based)."""
    n = len(turns)
    if not n:
        return []
    best = max(scores) or 1.0
    q_terms = set(query_terms(query))
    kind = question_kind(query)
    by_place = {(t.episode_id, t.position): s for t, s in zip(turns, scores, strict=True)}
    per_episode: dict[str, int] = {}
    for t in turns:
        per_episode[t.episode_id] = per_episode.get(t.episode_id, 0) + 1
    times = [t.timestamp for t in turns]
    oldest, span = min(times), (max(times) - min(times)) or 1
    rows = []
    for rank, (t, s) in enumerate(zip(turns, scores, strict=True)):
        text = t.content
        words = len(_WORDS.findall(text)) or 1
        ep_rank = episode_ranks.get(t.episode_id)
        who = (t.name or "").lower()
        dated = 1.0 if t.dates or _DATE.search(text) else 0.0
        number = 1.0 if _NUMBER.search(text) else 0.0
        names = min(1.0, 5 * len(_CAPITAL.findall(text)) / words)
        neighbours = [by_place.get((t.episode_id, t.position + d), 0.0) for d in (-1, 1)]
        rows.append(
            [
                s,
                s / best,
                1 / math.log2(rank + 2),
                0.0 if ep_rank is None else 1 / (1 + ep_rank),
                per_episode[t.episode_id] / n,
                1.0 if asked and who not in asked else 0.0,
                1.0 if asked and who in asked else 0.0,
                math.log1p(words),
                1.0 if text.rstrip().endswith("?") else 0.0,
                1.0 if words < 6 else 0.0,
                len(q_terms & set(query_terms(text))) / len(q_terms) if q_terms else 0.0,
                max(neighbours),
                dated,
                number,
                names,
                dated * ("when" in kind),
                number * ("count" in kind),
                names * ("where_who" in kind),
                1.0 if _PHOTO in text else 0.0,
                1.0 if t.position < 3 else 0.0,
                (t.timestamp - oldest) / span,
            ]
        )
    return rows


def rerank(
    rows: Sequence[Sequence[float]], weights: Mapping[str, float] | None = None, bias: float | None = None
) -> list[float]:
    """Each row's probability of holding evidence under the logistic model (default: :data:`WEIGHTS`)."""
    w = [(weights if weights is not None else WEIGHTS).get(f, 0.0) for f in FEATURES]
    b = BIAS if bias is None else bias
    return [1 / (1 + math.exp(-max(-60.0, min(60.0, b + sum(x * c for x, c in zip(r, w, strict=True)))))) for r in rows]


def enabled() -> bool:
    """Whether weights are shipped (else the context keeps the search's own order)."""
    return any(WEIGHTS.values())
