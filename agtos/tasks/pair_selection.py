"""Redundant-conclusion pairs: token-set Jaccard similarity >= a threshold, selected in batch.

Texts become a ``(doc, token)`` table (Polars), ranked in one global rare-first token order.
DuckDB then self-joins short *prefixes* of each set (AllPairs prefix filtering, exact: if
``J(A, B) >= t`` with ``|B| <= |A|``, the two share a token among the first
``|A| - ceil(t|A|) + 1`` tokens of A and the first ``|B| - ceil(2t/(1+t)|B|) + 1`` of B), keeps
only candidates that pass the size filter, the positional filter and a 2 x 64-bit signature
bound (a bit set in A's signature but not in B's proves one token of A is missing from B),
and Polars verifies the survivors with the exact count: ``shared / (|A| + |B| - shared)``.
The result equals the naive double loop's; the filters only decide how much work is done.

Tokens are all word tokens of :func:`agtos.tasks.text.words` (stopwords included), so
"likes coffee" and "does not like coffee" keep their negation apart.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import duckdb
import polars as pl

from agtos.tasks.text import _word_pattern, fold, words

DEFAULT_THRESHOLD = 0.85
_EPS = 1e-9  # slack so float rounding of t * n can only lengthen a prefix, never shorten it
PAIR_SCHEMA = pl.Schema({"a_id": pl.String, "b_id": pl.String, "jaccard": pl.Float64})

_CANDIDATES_SQL = """
WITH sig AS (
    SELECT doc,
           bit_or(1::UBIGINT << (rank % 64)::INTEGER) AS s1,
           bit_or(1::UBIGINT << (hash(rank) % 64)::INTEGER) AS s2
    FROM ranked GROUP BY doc
),
probe AS (
    SELECT r.doc, r.rank, r.pos, r.n, s.s1, s.s2 FROM ranked r JOIN sig s USING (doc)
    WHERE r.pos <= r.n - ceil($t * r.n - $eps) + 1
),
indexed AS (
    SELECT r.doc, r.rank, r.pos, r.n, s.s1, s.s2 FROM ranked r JOIN sig s USING (doc)
    WHERE r.pos <= r.n - ceil($t2 * r.n - $eps) + 1
)
SELECT DISTINCT p.doc AS a, q.doc AS b, p.n AS na, q.n AS nb
FROM probe p JOIN indexed q ON p.rank = q.rank
WHERE (q.n < p.n OR (q.n = p.n AND q.doc < p.doc))
  AND q.n >= $t * p.n - $eps
  AND 1 + least(p.n - p.pos, q.n - q.pos) >= ceil($t1 * (p.n + q.n) - $eps)
  AND least(p.n - bit_count(p.s1 & ~q.s1), q.n - bit_count(q.s1 & ~p.s1),
            p.n - bit_count(p.s2 & ~q.s2), q.n - bit_count(q.s2 & ~p.s2))
      >= ceil($t1 * (p.n + q.n) - $eps)
"""


def _params(t: float) -> dict[str, float]:
    """``t``; ``t1 = t / (1 + t)`` (overlap per combined size); ``t2 = 2t / (1 + t)`` (index prefix)."""
    return {"t": t, "t1": t / (1 + t), "t2": 2 * t / (1 + t), "eps": _EPS}


def token_set(text: str) -> frozenset[str]:
    """The distinct word tokens of ``text``."""
    return frozenset(words(text))


def jaccard(a: Collection[str], b: Collection[str]) -> float:
    """|A ∩ B| / |A ∪ B| of two token collections (0.0 when both are empty)."""
    sa, sb = set(a), set(b)
    union = len(sa | sb)
    return len(sa & sb) / union if union else 0.0


def _check_ids(ids: Sequence[str], texts: Sequence[str]) -> None:
    if len(ids) != len(texts):
        raise ValueError("ids and texts must have the same length")
    if len(set(ids)) != len(ids):
        raise ValueError("conclusion ids must be unique")


def token_table(texts: Sequence[str]) -> pl.DataFrame:
    """Distinct ``(doc, token)`` rows, ``doc`` being the text's position (same tokens as ``words``)."""
    frame = pl.DataFrame({"text": [fold(t) for t in texts]}, schema={"text": pl.String}).with_row_index("doc")
    return (
        frame.select("doc", token=pl.col("text").str.extract_all(_word_pattern().pattern))
        .explode("token")
        .drop_nulls("token")
        .unique(["doc", "token"])
    )


def ranked_tokens(tokens: pl.DataFrame) -> pl.DataFrame:
    """``(doc, rank, pos, n)``: global rare-first token rank, its position in the doc, doc size."""
    order = (
        tokens.group_by("token").agg(df=pl.len()).sort(["df", "token"]).with_row_index("rank").select("token", "rank")
    )
    return (
        tokens.join(order, on="token")
        .select("doc", "rank")
        .with_columns(
            pos=pl.col("rank").rank("ordinal").over("doc").cast(pl.Int32),
            n=pl.len().over("doc").cast(pl.Int32),
        )
    )


def redundant_pairs(ids: Sequence[str], texts: Sequence[str], threshold: float = DEFAULT_THRESHOLD) -> pl.DataFrame:
    """All pairs with token-set Jaccard >= ``threshold`` as ``(a_id, b_id, jaccard)``, ``a_id < b_id``.

    Texts without any token never pair. Exact (same result as :func:`naive_pairs`).
    """
    _check_ids(ids, texts)
    if not 0.0 < threshold <= 1.0:
        raise ValueError("threshold must be within (0, 1]")
    if len(ids) < 2:
        return pl.DataFrame(schema=PAIR_SCHEMA)
    ranked = ranked_tokens(token_table(texts))
    with duckdb.connect() as con:
        con.execute("SET enable_progress_bar = false")
        con.register("ranked", ranked)
        candidates = con.sql(_CANDIDATES_SQL, params=_params(threshold)).pl()
    return _to_ids(_verify(candidates, ranked, threshold), ids)


def _verify(candidates: pl.DataFrame, ranked: pl.DataFrame, threshold: float) -> pl.DataFrame:
    """Exact Jaccard of each candidate ``(a, b, na, nb)``; rows below ``threshold`` dropped."""
    tokens = ranked.select("doc", "rank")
    shared = (
        candidates.join(tokens, left_on="a", right_on="doc")
        .join(tokens, left_on=["b", "rank"], right_on=["doc", "rank"])
        .group_by("a", "b", "na", "nb")
        .agg(shared=pl.len())
    )
    score = pl.col("shared").cast(pl.Float64) / (pl.col("na") + pl.col("nb") - pl.col("shared")).cast(pl.Float64)
    return shared.select("a", "b", jaccard=score).filter(pl.col("jaccard") >= threshold)


def _to_ids(pairs: pl.DataFrame, ids: Sequence[str]) -> pl.DataFrame:
    """Doc positions to conclusion ids, each pair ordered ``a_id < b_id``, rows sorted."""
    id_map = pl.DataFrame({"doc": range(len(ids)), "id": list(ids)}, schema={"doc": pl.Int64, "id": pl.String})
    named = (
        pairs.with_columns(pl.col("a", "b").cast(pl.Int64))
        .join(id_map.rename({"doc": "a", "id": "x"}), on="a")
        .join(id_map.rename({"doc": "b", "id": "y"}), on="b")
    )
    return (
        named.select(a_id=pl.min_horizontal("x", "y"), b_id=pl.max_horizontal("x", "y"), jaccard="jaccard")
        .sort(["a_id", "b_id"])
        .cast(PAIR_SCHEMA)
    )


def naive_pairs(
    ids: Sequence[str], texts: Sequence[str], threshold: float = DEFAULT_THRESHOLD
) -> list[tuple[str, str, float]]:
    """Reference double loop (O(n²)); for benchmarks and tests only."""
    _check_ids(ids, texts)
    sets = [token_set(t) for t in texts]
    out: list[tuple[str, str, float]] = []
    for i in range(len(ids)):
        for j in range(i + 1, len(ids)):
            if not sets[i] or not sets[j]:
                continue
            score = len(sets[i] & sets[j]) / len(sets[i] | sets[j])
            if score >= threshold:
                a, b = sorted((ids[i], ids[j]))
                out.append((a, b, score))
    return sorted(out)


def pairs_as_tuples(frame: pl.DataFrame) -> list[tuple[str, str, float]]:
    """Rows of a :func:`redundant_pairs` frame as sorted tuples."""
    return sorted(frame.iter_rows())
