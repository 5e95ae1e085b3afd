"""The contradiction step of the lint: stage 1 candidates → stage 2 NLI (cached) → stage 3 judge."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from agtos.config import MaintenanceConfig
from agtos.schemas import Conclusion
from agtos.tasks.contradiction import Candidate, LLMJudge, NLIVerdict, candidate_pairs, pair_cache_key

if TYPE_CHECKING:
    from agtos.memory.services import Services


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 2)


def _vectors(rt: Services, user_id: str, conclusions: list[Conclusion]) -> np.ndarray:
    """Stored conclusion vectors; missing ones embedded now; zeros if no embedder (polarity pairs still work)."""
    ids = [c.id for c in conclusions]
    stored = rt.conclusions.index.vectors.vectors(user_id, ids)
    missing = [c for c in conclusions if c.id not in stored]
    fresh = rt.semantic.embed_or_none([c.text for c in missing])
    if fresh is not None:
        stored.update(zip([c.id for c in missing], fresh, strict=True))
    dim = next((len(v) for v in stored.values()), 1)
    return np.vstack([stored.get(i, np.zeros(dim, dtype=np.float32)) for i in ids]).astype(np.float32)


def detect_contradictions(
    rt: Services, conclusions: list[Conclusion], cfg: MaintenanceConfig
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Confirmed contradictory pairs and the pipeline's six counters plus per-stage latencies."""
    counters = dict.fromkeys(("candidates", "nliChecked", "nliContradictions", "cacheHits", "judged", "confirmed"), 0)
    latency = {"stage1Ms": 0.0, "stage2Ms": 0.0, "stage3Ms": 0.0}
    nli = rt.nli_model
    judge_llm = rt.maintenance_llm
    pipeline: dict[str, Any] = {
        "counters": counters,
        "latencies": latency,
        "nli": nli.name if nli else "disabled",
        "judge": judge_llm.name if judge_llm else None,
    }
    if getattr(nli, "load_error", None):  # AGTOS_NLI_MODEL_DIR is set but its model was refused
        pipeline["nliError"] = nli.load_error  # type: ignore[union-attr]
    if len(conclusions) < 2:
        return [], pipeline
    text = {c.id: c.text for c in conclusions}

    started = time.perf_counter()
    ids = [c.id for c in conclusions]
    recent = sorted(range(len(conclusions)), key=lambda i: conclusions[i].updated_at, reverse=True)
    candidates = candidate_pairs(
        ids,
        _vectors(rt, conclusions[0].user_id, conclusions),
        [text[i] for i in ids],
        cfg.candidate_top_k,
        cfg.candidate_cap,
        query_rows=recent[: cfg.candidate_query_limit],
    )
    counters["candidates"] = len(candidates)
    latency["stage1Ms"] = _ms(started)

    started = time.perf_counter()
    verdicts: dict[tuple[str, str], NLIVerdict] = {}
    flagged: list[Candidate] = candidates
    if nli is not None:
        keys = {(c.a, c.b): pair_cache_key(nli.name, text[c.a], text[c.b]) for c in candidates}
        cached = rt.nli_cache.get_many(conclusions[0].user_id, list(keys.values()))
        counters["cacheHits"] = sum(1 for k in keys.values() if k in cached)
        todo = [c for c in candidates if keys[(c.a, c.b)] not in cached]
        fresh = dict(
            zip(
                [keys[(c.a, c.b)] for c in todo],
                nli.predict([(text[c.a], text[c.b]) for c in todo]) if todo else [],
                strict=True,
            )
        )
        counters["nliChecked"] = len(todo)
        rt.nli_cache.put_many(conclusions[0].user_id, fresh)
        for c in candidates:
            key = keys[(c.a, c.b)]
            verdicts[(c.a, c.b)] = cached.get(key) or fresh[key]
        flagged = [c for c in candidates if verdicts[(c.a, c.b)].label == "contradiction"]
        counters["nliContradictions"] = len(flagged)
    latency["stage2Ms"] = _ms(started)

    started = time.perf_counter()
    judgements: dict[tuple[str, str], Any] = {}
    if judge_llm is not None and flagged:
        judged, _unjudged = LLMJudge(judge_llm, cfg.judge_batch_size).judge(
            [(c.a, c.b, text[c.a], text[c.b]) for c in flagged]
        )
        counters["judged"] = len(judged)
        judgements = {(j.a, j.b): j for j in judged}
        confirmed = [c for c in flagged if (c.a, c.b) in judgements and judgements[(c.a, c.b)].contradiction]
    else:
        confirmed = flagged if nli is not None else []  # no NLI and no judge: nothing can be confirmed
    counters["confirmed"] = len(confirmed)
    latency["stage3Ms"] = _ms(started)

    out = []
    for c in confirmed:
        judgement = judgements.get((c.a, c.b))
        verdict = verdicts.get((c.a, c.b))
        out.append(
            {
                "a": c.a,
                "b": c.b,
                "aText": text[c.a],
                "bText": text[c.b],
                "similarity": round(c.similarity, 4),
                "reason": c.reason,
                "nli": verdict.label if verdict else None,
                "judge": None
                if judgement is None
                else {"confidence": judgement.confidence, "explanation": judgement.explanation},
            }
        )
    return out, pipeline
