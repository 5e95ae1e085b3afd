"""Which text should the turn index hold? Evidence-turn recall@k of BM25, vector and their RRF
over candidate index units, on a LoCoMo-layout set of real conversations (realtalk-dev).

Per conversation every turn is one document (all sessions together, as one user's index holds
them); a question's score is the share of its evidence turns among the top-k distinct turns.
``anchor`` counts the hit turn only; ``shown`` also its neighbours (what a lookup returns with it).

    python -m benchmarks.turn_units [../shared/datasets/realtalk-dev/realtalk-dev.json] [--k 5]

The data set is read from its path (never copied into the repository); absent, the script says so
and exits 0.

realtalk-dev (4 chats, 1,761 turns, 284 questions), recall@5 of the evidence turns, anchor / shown:

    unit                 BM25          vector        hybrid (RRF)
    turn                 0.442/0.525   0.269/0.372   0.389/0.478
    speaker+turn         0.473/0.556   0.299/0.363   0.432/0.493
    dated speaker+turn   0.481/0.567   0.315/0.372   0.428/0.494   <- the index unit (tasks/verbatim_turns.py)
    previous+turn        0.455/0.526   0.219/0.374   0.345/0.503
    turn+next            0.408/0.531   0.270/0.364   0.366/0.500
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from agtos.providers.embeddings import build_embedder
from agtos.schemas import Role, StoredTurn, Turn
from agtos.tasks.bm25 import rank_texts
from agtos.tasks.dates import format_turn, speaker
from agtos.tasks.ranking import reciprocal_rank_fusion
from agtos.tasks.verbatim_turns import stored_turns

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "realtalk-dev" / "realtalk-dev.json"


def said(t: StoredTurn) -> str:
    return f"{speaker(t)}: {t.content}"


# unit name -> text of the unit anchored on turn i of a conversation's turn list
UNITS: dict[str, Callable[[list[StoredTurn], int], str]] = {
    "turn": lambda ts, i: ts[i].content,
    "speaker+turn": lambda ts, i: said(ts[i]),
    "dated speaker+turn": lambda ts, i: format_turn(ts[i]),
    "previous+turn": lambda ts, i: "\n".join(said(t) for t in ts[max(0, i - 1) : i + 1]),
    "turn+next": lambda ts, i: "\n".join(said(t) for t in ts[i : i + 2]),
}


def load(path: Path) -> list[dict[str, Any]]:
    """Per conversation: its turns (StoredTurn, with ``dia_id`` order) and its questions."""
    out = []
    for sample in json.loads(path.read_text()):
        conv = sample["conversation"]
        turns: list[StoredTurn] = []
        ids: list[str] = []
        n = 1
        while f"session_{n}" in conv:
            raw = conv[f"session_{n}"]
            session = [
                Turn(
                    role=Role.user if t["speaker"] == conv["speaker_a"] else Role.assistant,
                    name=t["speaker"],
                    content=(t["text"] + (f" [photo: {t['blip_caption']}]" if t.get("blip_caption") else "")),
                    timestamp=int(datetime.fromisoformat(t["timestamp"]).replace(tzinfo=UTC).timestamp() * 1000),
                )
                for t in raw
            ]
            for st in stored_turns(sample["sample_id"], f"ep-{n}", f"session_{n}", session):
                turns.append(st.model_copy(update={"position": len(turns)}))
            ids += [t["dia_id"] for t in raw]
            n += 1
        questions = [q for q in sample["qa"] if q.get("evidence")]
        out.append({"id": sample["sample_id"], "turns": turns, "dia_ids": ids, "questions": questions})
    return out


def recall(ranked: list[int], evidence: set[int], k: int, spread: int) -> float:
    seen: set[int] = set()
    for i in ranked[:k]:
        seen.update(range(i - spread, i + spread + 1))
    return len(evidence & seen) / len(evidence)


def run(path: Path, k: int) -> dict[str, Any]:
    data = load(path)
    embedder = build_embedder()
    results: dict[str, Any] = {}
    started = time.perf_counter()
    questions = [q["question"] for conv in data for q in conv["questions"]]
    qvecs = embedder.embed(questions)
    for name, unit in UNITS.items():
        scores: dict[str, list[float]] = {
            f"{m} {w}": [] for m in ("bm25", "vector", "hybrid") for w in ("anchor", "shown")
        }
        row = 0
        for conv in data:
            turns, pos_of = conv["turns"], {d: i for i, d in enumerate(conv["dia_ids"])}
            texts = [unit(turns, i) for i in range(len(turns))]
            docs = {str(i): text for i, text in enumerate(texts)}
            vecs = embedder.embed(texts)
            vecs = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
            for q in conv["questions"]:
                evidence = {pos_of[e] for e in q["evidence"] if e in pos_of}
                qv = qvecs[row] / np.linalg.norm(qvecs[row])
                row += 1
                if not evidence:
                    continue
                pool = 4 * k
                keyword = [int(d) for d, _ in rank_texts(q["question"], docs, pool)]
                dense = [int(i) for i in np.argsort(-(vecs @ qv))[:pool]]
                fused = [
                    int(d) for d, _ in reciprocal_rank_fusion([[str(i) for i in dense], [str(i) for i in keyword]])
                ]
                for method, ranked in (("bm25", keyword), ("vector", dense), ("hybrid", fused)):
                    scores[f"{method} anchor"].append(recall(ranked, evidence, k, 0))
                    scores[f"{method} shown"].append(recall(ranked, evidence, k, 1))
        results[name] = {key: round(float(np.mean(v)), 3) for key, v in scores.items()}
        print(f"{name:22s} " + "  ".join(f"{key} {v:.3f}" for key, v in results[name].items()), flush=True)
    n_turns = sum(len(c["turns"]) for c in data)
    return {
        "k": k,
        "conversations": len(data),
        "turns": n_turns,
        "questions": sum(len(c["questions"]) for c in data),
        "seconds": round(time.perf_counter() - started, 1),
        "recall": results,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--k", type=int, default=5)
    args = parser.parse_args(argv)
    if not args.path.is_file():
        print(f"no data set at {args.path}: nothing to measure")
        return 0
    print(json.dumps(run(args.path, args.k), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
