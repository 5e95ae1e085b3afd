"""Redundant-conclusion pairs: token-set Jaccard similarity >= a threshold, selected in batch.

Texts become a ``(doc, token)`` table (Polars), ranked in one global rare-first token order.
Prefix filtering then makes the self-join small *and exact*: if ``J(A, B) >= t`` then
``|A ∩ B| >= t * |A|``, so two such sets must share a token among the first
``|A| - ceil(t * |A|) + 1`` tokens of each in that order. DuckDB joins those prefixes (with
the size filter ``t * |A| <= |B| <= |A| / t``) and verifies every candidate with the exact
shared-token count: ``jaccard = shared / (|A| + |B| - shared)``.

Tokens are all word tokens of :func:`agtos.tasks.text.words` (stopwords included), so
"likes coffee" and "does not like coffee" keep their negation apart.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import duckdb
import polars as pl

from agtos.tasks.text import _WORD, words

DEFAULT_THRESHOLD = 0.85
_EPS = 1e-9  # slack so float rounding of t * n can only lengthen a prefix, never shorten it
PAIR_SCHEMA = {"a_id": pl.String, "b_id": pl.String, "jaccard": pl.Float64}

_CANDIDATES_SQL = """
WITH probe AS (
    SELECT doc, rank, pos, n FROM ranked WHERE pos <= n - ceil($t * n - $eps) + 1
),
indexed AS (
    SELECT doc, rank, pos, n FROM ranked WHERE pos <= n - ceil($t2 * n - $eps) + 1
),
cand AS (
    SELECT DISTINCT p.doc AS a, q.doc AS b, p.n AS na, q.n AS nb
    FROM probe p JOIN indexed q ON p.rank = q.rank
    WHERE (q.n < p.n OR (q.n = p.n AND q.doc < p.doc))
      AND q.n >= $t * p.n - $eps
      AND 1 + least(p.n - p.pos, q.n - q.pos) >= ceil($t1 * (p.n + q.n) - $eps)
),
overlap AS (
    SELECT c.a, c.b, c.na, c.nb, count(*) AS shared
    FROM cand c
    JOIN ranked ta ON ta.doc = c.a
    JOIN ranked tb ON tb.doc = c.b AND tb.rank = ta.rank
    GROUP BY c.a, c.b, c.na, c.nb
)
SELECT a, b, shared::DOUBLE / (na + nb - shared)::DOUBLE AS jaccard
FROM overlap
WHERE shared::DOUBLE / (na + nb - shared)::DOUBLE >= $t
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
    frame = pl.DataFrame({"text": list(texts)}, schema={"text": pl.String}).with_row_index("doc")
    return (
        frame.select("doc", token=pl.col("text").str.to_lowercase().str.extract_all(_WORD.pattern))
        .explode("token")
        .drop_nulls("token")
        .unique(["doc", "token"])
    )


def ranked_tokens(tokens: pl.DataFrame) -> pl.DataFrame:
    """``(doc, rank, pos, n)``: global rare-first token rank, its position in the doc, doc size."""
    order = (
        tokens.group_by("token")
        .agg(df=pl.len())
        .sort(["df", "token"])
        .with_row_index("rank")
        .select("token", "rank")
    )
    return (
        tokens.join(order, on="token")
        .select("doc", "rank")
        .with_columns(
            pos=pl.col("rank").rank("ordinal").over("doc"),
            n=pl.len().over("doc"),
        )
    )


def redundant_pairs(
    ids: Sequence[str], texts: Sequence[str], threshold: float = DEFAULT_THRESHOLD
) -> pl.DataFrame:
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
        con.register("ranked", ranked)
        found = con.sql(_CANDIDATES_SQL, params=_params(threshold)).pl()
    id_map = pl.DataFrame(
        {"doc": range(len(ids)), "id": list(ids)}, schema={"doc": pl.UInt32, "id": pl.String}
    )
    found = (
        found.with_columns(pl.col("a").cast(pl.UInt32), pl.col("b").cast(pl.UInt32))
        .join(id_map.rename({"doc": "a", "id": "x"}), on="a")
        .join(id_map.rename({"doc": "b", "id": "y"}), on="b")
    )
    return (
        found.select(
            a_id=pl.min_horizontal("x", "y"),
            b_id=pl.max_horizontal("x", "y"),
            jaccard=pl.col("jaccard"),
        )
        .sort(["a_id", "b_id"])
        .cast(PAIR_SCHEMA)  # type: ignore[arg-type]
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
