"""Leave-one-conversation-out check of the learned turn re-ranker (:mod:`agtos.tasks.line_ranker`).

Works on the conversations ``benchmarks.eval.api_eval --key-prefix P`` replayed and kept: per
question, one :func:`agtos.memory.recall.recall` (cached), each candidate turn's features and its
label (an evidence turn of the question); then, per held-out conversation, a logistic regression
(scikit-learn, the ``eval`` extra) fitted on the other conversations' candidates re-ranks the
held-out questions' turns, and the whole ``build_context`` answers through the same assembly. The
score is the answer-present rule of :mod:`benchmarks.eval.answers` on a 1,000-token context (and
2,000), beside the context without the ranker, in the same run.

    nice -n 10 .venv/bin/python -m benchmarks.eval.line_ranker_cv --key-prefix tb-realtalk-dev \\
        --dataset ../shared/datasets/realtalk-dev/realtalk-dev.json --redis-url redis://127.0.0.1:6379/3

``--fit-all PATH``: also fit on every conversation and write the weights (raw-feature scale) as JSON.
``--weights PATH``: no fitting; score the dataset with these weights (a model fitted elsewhere).
Variants: ``--pool-tokens 12`` (an 80-turn pool for 1,000 tokens), ``--label answer|either``, ``--blend
0.5`` (RRF with the default order), ``--model trees`` (gradient-boosted trees), ``--raw-scores`` (each
turn's own cosine and BM25 score as two more features), ``--oracle`` (the pool's evidence turns first:
the ceiling of any re-ranking). README "Recall on long conversations" has the figures.
"""

from __future__ import annotations

# harness first: it sets PREFECT_HOME before agtos.flows is imported
from benchmarks.eval.harness import DEFAULT_REDIS_URL, agtos_session_id, agtos_user_id, make_settings  # isort: skip

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bm25s
import numpy as np

from agtos.memory import context_builder
from agtos.memory.coordinator import MemoryCoordinator
from agtos.memory.recall import Found, recall
from agtos.tasks import line_ranker
from agtos.tasks.dates import annotate
from benchmarks.eval.answers import answer_present, content_tokens, text_tokens
from benchmarks.eval.api_eval import kind_of, turn_timestamps
from benchmarks.eval.baselines import RawTurn, RawTurnRetriever
from benchmarks.eval.dataset import Dataset, Haystack, Question, load_dataset

BUDGETS = (1_000, 2_000)


def evidence_keys(haystack: Haystack) -> dict[tuple[str, str], str]:
    """(agtos session id, turn text) -> the dataset's turn id (``D3:5``)."""
    out = {}
    for sid, turns in zip(haystack.haystack_session_ids, haystack.haystack_sessions, strict=True):
        for n, t in enumerate(turns, start=1):
            out[(agtos_session_id(sid), t.content[:100_000])] = t.dia_id or f"{sid}:{n}"
    return out


class CachedRecall:
    """``recall`` with its answers kept per (user, query, pool): the ranker only re-orders what it found."""

    def __init__(self) -> None:
        self.cache: dict[tuple[str, str, int | None], Found] = {}

    def __call__(
        self, rt: Any, user_id: str, query: str, limit: int, mode: Any = None, turns: Any = None, **kw: Any
    ) -> Found:
        key = (user_id, query, turns)
        if key not in self.cache:
            self.cache[key] = recall(rt, user_id, query, limit, mode, turns, **kw)
        return self.cache[key]


def fit_trees(x: np.ndarray, y: np.ndarray) -> Callable[..., list[float]]:
    """A small gradient-boosted model (scikit-learn) as ``line_ranker.rerank``: is a non-linear ranker
    worth a tree dump at run time?"""
    from sklearn.ensemble import HistGradientBoostingClassifier

    model = HistGradientBoostingClassifier(
        max_iter=150, learning_rate=0.05, max_leaf_nodes=15, min_samples_leaf=40, class_weight="balanced"
    ).fit(x, y)
    return lambda rows, *_a: model.predict_proba(np.array(rows, dtype=float))[:, 1].tolist() if rows else []


def fit(x: np.ndarray, y: np.ndarray, c: float) -> tuple[dict[str, float], float]:
    """Logistic regression on standardised features; the weights returned act on the raw features."""
    from sklearn.linear_model import LogisticRegression

    mean, std = x.mean(axis=0), x.std(axis=0)
    std[std == 0] = 1.0
    model = LogisticRegression(C=c, class_weight="balanced", max_iter=2_000).fit((x - mean) / std, y)
    coef = model.coef_[0] / std
    bias = float(model.intercept_[0] - (coef * mean).sum())
    return {f: round(float(w), 6) for f, w in zip(line_ranker.FEATURES, coef, strict=True)}, round(bias, 6)


def blended(beta: float, k: float = 10.0) -> Callable[[Found, str, set[str]], list[float]]:
    """``turn_relevance`` as reciprocal-rank fusion of the default order (weight 1 - ``beta``) and
    the ranker's (``beta``)."""
    original = context_builder.turn_relevance

    def relevance(found: Found, query: str, asked: set[str]) -> list[float]:
        learned = original(found, query, asked)
        weights, line_ranker.WEIGHTS = line_ranker.WEIGHTS, {}
        try:
            default = original(found, query, asked)
        finally:
            line_ranker.WEIGHTS = weights
        out = [0.0] * len(learned)
        for share, scores in ((beta, learned), (1 - beta, default)):
            for rank, i in enumerate(sorted(range(len(scores)), key=lambda i: -scores[i])):
                out[i] += share / (k + rank)
        return out

    return relevance


class Study:
    def __init__(self, dataset: Dataset, rt: Any, pool_tokens: int, label: str = "evidence") -> None:
        self.dataset, self.rt, self.pool_tokens, self.label = dataset, rt, pool_tokens, label
        self.cached = CachedRecall()
        self.current = dataset.questions[0]
        context_builder.recall = self.cached  # type: ignore[assignment]
        self.keys = {h.haystack_id: evidence_keys(h) for h in dataset.haystacks}

    def contexts(
        self,
        questions: list[Question],
        weights: dict[str, float],
        bias: float,
        scorer: Callable[..., Any] | None = None,
    ) -> dict[str, dict[int, bool]]:
        """Per question: the answer in the context of each budget, with these ranker weights (or ``scorer``)."""
        line_ranker.WEIGHTS, line_ranker.BIAS = weights, bias
        default = line_ranker.rerank
        if scorer is not None:
            line_ranker.rerank = scorer  # type: ignore[assignment]
        out = {}
        for q in questions:
            user = agtos_user_id(q.haystack_id)
            self.current = q
            row = {}
            for b in BUDGETS:
                # the pool the ranker reads: budget / pool_tokens turns (the default context: / 25)
                context_builder.CONTEXT_TURN_TOKENS = self.pool_tokens if weights else 25
                text = context_builder.build_context(self.rt, user, q.question, None, b, 10)["context"]
                row[b] = answer_present(q.answer, text)
            out[q.question_id] = row
        context_builder.CONTEXT_TURN_TOKENS = 25
        line_ranker.WEIGHTS, line_ranker.BIAS = {}, 0.0
        line_ranker.rerank = default  # type: ignore[assignment]
        return out

    def oracle(self, found: Found, query: str, asked: set[str]) -> list[float]:
        """``turn_relevance`` that knows the answer: the current question's evidence turns first (the
        ceiling of any re-ranking of this pool), then the search's order."""
        keys, evidence = self.keys[self.current.haystack_id], set(self.current.evidence)
        return [float(keys.get((m.turn.session_id, m.turn.content), "") in evidence) + m.score / 2 for m in found.turns]

    def rows(self, q: Question) -> tuple[list[list[float]], list[int]]:
        """The candidate turns' features and labels of the 1,000-token context's pool: 1 for an evidence
        turn (``label`` evidence), a turn holding half the answer's words that the question has not
        (answer), or either (either)."""
        user = agtos_user_id(q.haystack_id)
        self.current = q
        turns = min(200, max(10, 1_000 // self.pool_tokens))
        found = self.cached(self.rt, user, q.question, 10, None, turns, memories=10, conclusions=10, neighbours=1)
        asked = found.asked(q.question)
        ranks = {h.episode.id: r for r, h in enumerate(found.episodes)}
        x = line_ranker.features(
            [m.turn for m in found.turns], [m.score for m in found.turns], q.question, asked, ranks
        )
        keys, evidence = self.keys[q.haystack_id], set(q.evidence)
        y = [int(keys.get((m.turn.session_id, m.turn.content), "") in evidence) for m in found.turns]
        if self.label == "evidence":
            return x, y
        wanted = set(content_tokens(q.answer)) - text_tokens(q.question)
        holds = [
            int(bool(wanted) and len(wanted & text_tokens(annotate(m.turn.content, m.turn.dates))) >= len(wanted) / 2)
            for m in found.turns
        ]
        return x, holds if self.label == "answer" else [max(a, b) for a, b in zip(y, holds, strict=True)]


class RawScores:
    """Two more features, from the baselines over the raw log: each candidate's own cosine with the
    question (the service's embedder) and its BM25 score (``bm25s``) over the best one: would the
    ranker gain if ``recall`` passed on the separate scores of each turn?"""

    NAMES = ("raw_cosine", "raw_bm25")

    def __init__(self, study: Study, embedder: Any) -> None:
        self.study, self.embedder = study, embedder
        self.plain = line_ranker.features
        self.retrievers: dict[str, tuple[RawTurnRetriever, dict[tuple[str, str], int]]] = {}
        self.scores: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for hay in study.dataset.haystacks:
            raw, where = [], {}
            for sid, turns, stamps in zip(
                hay.haystack_session_ids, hay.haystack_sessions, turn_timestamps(hay), strict=True
            ):
                for n, (t, ts) in enumerate(zip(turns, stamps, strict=True), start=1):
                    if t.content.strip():
                        where[(agtos_session_id(sid), t.content[:100_000])] = len(raw)
                        raw.append(RawTurn(sid, t.dia_id or f"{sid}:{n}", t.name or t.role, ts, t.content))
            self.retrievers[hay.haystack_id] = (RawTurnRetriever(raw, embedder), where)

    def _scores(self, q: Question) -> tuple[np.ndarray, np.ndarray]:
        if q.question_id not in self.scores:
            retriever, _ = self.retrievers[q.haystack_id]
            assert retriever._vectors is not None
            cosine = retriever._vectors @ np.asarray(self.embedder.embed_one(q.question), dtype=np.float32)
            bm25 = np.zeros(len(retriever.lines))
            tokens = bm25s.tokenize([q.question], stopwords="en", show_progress=False, return_ids=False)
            if tokens[0]:
                docs, found = retriever._bm25.retrieve(tokens, k=len(retriever.lines), show_progress=False)
                bm25[docs[0]] = found[0] / (found[0].max() or 1.0)
            self.scores[q.question_id] = (cosine, bm25)
        return self.scores[q.question_id]

    def features(self, turns: Any, scores: Any, query: str, asked: Any, ranks: Any) -> list[list[float]]:
        rows = self.plain(turns, scores, query, asked, ranks)
        q = self.study.current
        cosine, bm25 = self._scores(q)
        where = self.retrievers[q.haystack_id][1]
        for row, t in zip(rows, turns, strict=True):
            i = where.get((t.session_id, t.content))
            row += [float(cosine[i]), float(bm25[i])] if i is not None else [0.0, 0.0]
        return rows

    def install(self) -> None:
        line_ranker.FEATURES = (*line_ranker.FEATURES, *self.NAMES)
        line_ranker.features = self.features  # type: ignore[assignment]


def ranker_cpu(study: Study, questions: list[Question], repeats: int = 3) -> dict[str, float]:
    """CPU per context of the turns' relevance (1,000-token pools, found already): the default rule
    and the ranker (features + logistic score, all weights 1), best of ``repeats``."""
    turns = min(200, max(10, 1_000 // study.pool_tokens))
    founds = [(study.cached.cache[(agtos_user_id(q.haystack_id), q.question, turns)], q.question) for q in questions]
    out = {}
    for name, weights in (("default", {}), ("ranker", dict.fromkeys(line_ranker.FEATURES, 1.0))):
        line_ranker.WEIGHTS = weights
        best = float("inf")
        for _ in range(repeats):
            started = time.process_time()
            for found, query in founds:
                context_builder.turn_relevance(found, query, found.asked(query))
            best = min(best, time.process_time() - started)
        out[name] = round(1_000 * best / len(founds), 3)
    line_ranker.WEIGHTS = {}
    return out


def run(args: argparse.Namespace, progress: Callable[[str], None]) -> dict[str, Any]:
    dataset = load_dataset(args.dataset)
    work = Path(tempfile.mkdtemp(prefix="line-ranker-"))
    coordinator = MemoryCoordinator(make_settings(args.redis_url, args.key_prefix, work))
    study = Study(dataset, coordinator.services, args.pool_tokens, args.label)
    if args.raw_scores:
        RawScores(study, coordinator.services.semantic.embedder).install()
    if args.blend < 1:
        context_builder.turn_relevance = blended(args.blend)  # type: ignore[assignment]
    started = time.process_time()
    base = study.contexts(dataset.questions, {}, 0.0)
    progress(f"baseline contexts: {time.process_time() - started:.0f} s CPU")
    data = {q.question_id: study.rows(q) for q in dataset.questions}
    hays = [h.haystack_id for h in dataset.haystacks]
    results: dict[str, Any] = {
        "pool_tokens": args.pool_tokens,
        "C": args.c,
        "label": args.label,
        "blend": args.blend,
        "model": args.model,
        "oracle": args.oracle,
        "raw_scores": args.raw_scores,
        "folds": {},
    }
    ranked: dict[str, dict[int, bool]] = {}
    if args.oracle:  # the ceiling: the evidence turns of the pool first
        context_builder.turn_relevance = study.oracle  # type: ignore[assignment]
        ranked = study.contexts(dataset.questions, {"score": 1.0}, 0.0)
    elif args.weights:
        model = json.loads(Path(args.weights).read_text())
        ranked = study.contexts(dataset.questions, model["weights"], model["bias"])
    else:
        for held in hays:
            train = [data[q.question_id] for q in dataset.questions if q.haystack_id != held]
            x = np.array([r for xs, _ in train for r in xs], dtype=float)
            y = np.array([v for _, ys in train for v in ys])
            weights, bias = fit(x, y, args.c)
            test = [q for q in dataset.questions if q.haystack_id == held]
            trees = fit_trees(x, y) if args.model == "trees" else None
            fold = study.contexts(test, weights, bias, trees)
            ranked |= fold
            results["folds"][held] = {
                "n": len(test),
                "positives_train": int(y.sum()),
                **{f"ctx{b}": _share([fold[q.question_id][b] for q in test]) for b in BUDGETS},
                **{f"base_ctx{b}": _share([base[q.question_id][b] for q in test]) for b in BUDGETS},
                "weights": weights,
                "bias": bias,
            }
            progress(
                f"fold {held}: {results['folds'][held]['ctx1000']} (without: {results['folds'][held]['base_ctx1000']})"
            )
    results["ranker_cpu_ms"] = ranker_cpu(study, dataset.questions)
    kinds = sorted({kind_of(q.question_type) for q in dataset.questions})
    results["overall"] = {
        f"{name}{b}": _share([r[q.question_id][b] for q in dataset.questions])
        for name, r in (("base_ctx", base), ("ranked_ctx", ranked))
        for b in BUDGETS
    }
    if results["folds"]:
        results["overall"]["fold_mean_ctx1000"] = round(
            statistics.mean(f["ctx1000"] for f in results["folds"].values()), 4
        )
        results["overall"]["fold_mean_base_ctx1000"] = round(
            statistics.mean(f["base_ctx1000"] for f in results["folds"].values()), 4
        )
    results["by_kind"] = {
        k: {
            name: _share([r[q.question_id][1_000] for q in dataset.questions if kind_of(q.question_type) == k])
            for name, r in (("base", base), ("ranked", ranked))
        }
        for k in kinds
    }
    top = [sum(ys[:8]) / max(1, len(ys[:8])) for _, ys in data.values()]
    results["evidence_share_top8_search"] = round(statistics.mean(top), 4)
    if args.fit_all:
        x = np.array([r for xs, _ in data.values() for r in xs], dtype=float)
        y = np.array([v for _, ys in data.values() for v in ys])
        weights, bias = fit(x, y, args.c)
        Path(args.fit_all).write_text(json.dumps({"weights": weights, "bias": bias}, indent=1) + "\n")
    coordinator.close()
    return results


def _share(values: list[bool]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.eval.line_ranker_cv", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--key-prefix", required=True, help="the api_eval --key-prefix P plus -<dataset stem>")
    parser.add_argument("--redis-url", default=os.environ.get("AGTOS_EVAL_REDIS_URL", DEFAULT_REDIS_URL))
    parser.add_argument("--pool-tokens", type=int, default=25, help="the ranked pool: budget / this many turns")
    parser.add_argument("--c", type=float, default=1.0, help="inverse L2 strength of the logistic regression")
    parser.add_argument("--label", choices=("evidence", "answer", "either"), default="evidence")
    parser.add_argument("--blend", type=float, default=1.0, help="RRF share of the ranker's order (1: it alone)")
    parser.add_argument("--model", choices=("logistic", "trees"), default="logistic")
    parser.add_argument("--oracle", action="store_true", help="the pool's evidence turns first (a ceiling)")
    parser.add_argument("--raw-scores", action="store_true", help="add each turn's raw cosine and BM25 score")
    parser.add_argument("--fit-all", type=Path, help="write the weights fitted on every conversation here")
    parser.add_argument("--weights", type=Path, help="score with these weights instead of cross-validating")
    parser.add_argument("--out", type=Path, help="write the results JSON here")
    args = parser.parse_args(argv)
    results = run(args, lambda m: print(m, file=sys.stderr, flush=True))
    text = json.dumps(results, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(json.dumps({k: v for k, v in results.items() if k != "folds"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
