"""The six-step memory lint over the services.

(1) stale detection → (2) confidence decay of stale conclusions → (3) redundancy merge
(Jaccard pairs selected in batch by DuckDB/Polars) of conclusions, and of current memories of one
kind (each merge is in both memories' histories, origin ``lint``) → (4) orphan episodes → (5) contradiction
detection (3-stage pipeline) → (6) prune low confidence. Every step works on an in-memory
working set; only the final ``persist`` step writes, after the data checks passed, so a
failing step leaves Redis untouched. ``run_lint`` is the single composition, run inline by the
API and with the steps as Prefect tasks by the flow (agtos.flows.lint_flow).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from agtos.config import MaintenanceConfig
from agtos.memory.conclusion_lock import conclusions_held
from agtos.memory.contradiction_pipeline import detect_contradictions
from agtos.memory.dream_retry import retry_pending_dream
from agtos.memory.dreamer_pipeline import load_recent_episodes, refresh_profile
from agtos.memory.resource_guard import run_when_safe
from agtos.memory.service_errors import MaintenanceDisabledError
from agtos.memory.vector_repair import fill_user
from agtos.schemas import Conclusion, Episode, MaintenanceReport, Memory
from agtos.schemas.api import MaintenanceRun
from agtos.schemas.records import now_ms
from agtos.tasks import lint_steps
from agtos.tasks.data_checks import validate_table
from agtos.tasks.pair_selection import redundant_pairs

if TYPE_CHECKING:
    from agtos.memory.services import Services

log = logging.getLogger(__name__)
CONTRADICTION_EVENT = "memory.contradiction.detected"


@dataclass
class LintState:
    """The working set every step reads and updates; nothing is written until ``persist``."""

    user_id: str
    now_ms: int
    conclusions: dict[str, Conclusion]
    episodes: list[Episode]
    removed: dict[str, str] = field(default_factory=dict)  # id -> why (merged into X / pruned)
    changed: set[str] = field(default_factory=set)
    steps: list[dict[str, Any]] = field(default_factory=list)
    contradictions: list[dict[str, Any]] = field(default_factory=list)
    pipeline: dict[str, Any] = field(default_factory=dict)
    before: int = 0
    run_id: str | None = None  # the API run this sweep answers (summary.runId)
    dream: dict[str, Any] | None = None  # the pending Dreamer run retried first (summary.pendingDream)
    memories: dict[str, Memory] = field(default_factory=dict)  # current memories (semantic facts/preferences)
    memory_merges: list[tuple[str, str]] = field(default_factory=list)  # (survivor id, duplicate id)
    loaded: dict[str, Conclusion] = field(default_factory=dict)  # the conclusions as read (see ``persist``)

    def record(self, name: str, started: float, ids: list[str], **extra: Any) -> None:
        self.steps.append(
            {"step": name, "count": len(ids), "ids": ids[:100], "ms": round((time.perf_counter() - started) * 1000, 2)}
            | extra
        )


def _frame(rows: list[dict[str, Any]], columns: list[str]) -> pl.DataFrame:
    return pl.DataFrame({c: [r[c] for r in rows] for c in columns}) if rows else pl.DataFrame()


def load(rt: Services, user_id: str) -> LintState:
    """Read the user's conclusions and episodes and validate both tables."""
    conclusions = rt.conclusions.all(user_id)
    episodes = list(rt.episodes.iter_all(user_id))
    validate_table("conclusions", _frame([c.model_dump() for c in conclusions], ["id", "text", "confidence", "type"]))
    validate_table("episodes", _frame([e.model_dump() for e in episodes], ["id", "importance", "type"]))
    state = LintState(user_id, now_ms(), {c.id: c for c in conclusions}, episodes, before=len(conclusions))
    state.loaded = dict(state.conclusions)
    state.memories = _current_memories(rt, user_id)
    return state


def _current_memories(rt: Services, user_id: str) -> dict[str, Memory]:
    store = rt.semantic.store("memory")
    raws = store.get_many(user_id, list(store.bm25.ids(user_id)))
    return {m.id: m for m in map(Memory.model_validate_json, raws.values()) if m.current}


def step_stale(state: LintState, cfg: MaintenanceConfig) -> LintState:
    started = time.perf_counter()
    stale = lint_steps.find_stale(state.conclusions.values(), state.now_ms, cfg.staleThresholdDays)
    for c in stale:
        state.conclusions[c.id] = c
        state.changed.add(c.id)
    state.record("stale", started, [c.id for c in stale])
    return state


def step_decay(state: LintState, cfg: MaintenanceConfig) -> LintState:
    started = time.perf_counter()
    decayed = lint_steps.decay_confidence([c for c in state.conclusions.values() if c.stale], cfg.decayFactor)
    for c in decayed:
        state.conclusions[c.id] = c
        state.changed.add(c.id)
    state.record("decay", started, [c.id for c in decayed], factor=cfg.decayFactor)
    return state


def step_merge(state: LintState, cfg: MaintenanceConfig) -> LintState:
    """Near-duplicates (Jaccard ≥ threshold) merged: higher confidence wins, sources combined."""
    started = time.perf_counter()
    ids = list(state.conclusions)
    pairs = redundant_pairs(ids, [state.conclusions[i].text for i in ids], cfg.jaccardThreshold)
    validate_table("pairs", pairs, threshold=cfg.jaccardThreshold)
    merged_ids: list[str] = []
    for a_id, b_id in pairs.select("a_id", "b_id").iter_rows():
        a_id, b_id = _survivor(state, a_id), _survivor(state, b_id)
        if a_id == b_id:
            continue
        winner = lint_steps.merge_pair(state.conclusions[a_id], state.conclusions[b_id], at_ms=state.now_ms)
        loser = b_id if winner.id == a_id else a_id
        state.conclusions[winner.id] = winner
        del state.conclusions[loser]
        state.removed[loser] = f"merged into {winner.id}"
        state.changed.add(winner.id)
        merged_ids.append(loser)
    memory_pairs = _merge_memories(state, cfg.jaccardThreshold)
    state.record(
        "merge",
        started,
        merged_ids,
        pairs=pairs.height,
        memoryPairs=memory_pairs,
        memoriesMerged=len(state.memory_merges),
        memoryIds=[loser for _, loser in state.memory_merges][:100],
    )
    return state


def _merge_memories(state: LintState, threshold: float) -> int:
    """Pairs of current memories of one kind with Jaccard ≥ ``threshold`` (the rule a POST of a
    memory applies): the one stored first survives. Returns the pairs found."""
    ids = sorted(state.memories, key=lambda i: (state.memories[i].created_at, i))
    pairs = redundant_pairs(ids, [state.memories[i].text for i in ids], threshold)
    validate_table("pairs", pairs, threshold=threshold)
    gone: dict[str, str] = {}
    for a_id, b_id in pairs.select("a_id", "b_id").iter_rows():
        while a_id in gone:
            a_id = gone[a_id]
        while b_id in gone:
            b_id = gone[b_id]
        a, b = state.memories[a_id], state.memories[b_id]
        if a_id == b_id or a.kind != b.kind:
            continue
        survivor, duplicate = (a, b) if (a.created_at, a.id) <= (b.created_at, b.id) else (b, a)
        gone[duplicate.id] = survivor.id
        state.memory_merges.append((survivor.id, duplicate.id))
    return pairs.height


def _survivor(state: LintState, conclusion_id: str) -> str:
    """Follow 'merged into' links so chains of duplicates end at one survivor."""
    while conclusion_id in state.removed:
        conclusion_id = state.removed[conclusion_id].removeprefix("merged into ")
    return conclusion_id


def step_orphans(state: LintState, cfg: MaintenanceConfig) -> LintState:
    started = time.perf_counter()
    orphans = lint_steps.find_orphan_episodes(state.episodes, state.conclusions.values(), cfg.orphanImportanceThreshold)
    state.record("orphans", started, [e.id for e in orphans], threshold=cfg.orphanImportanceThreshold)
    return state


def step_contradictions(rt: Services, state: LintState, cfg: MaintenanceConfig) -> LintState:
    """The 3-stage pipeline: cosine candidates → NLI cross-encoder → batched LLM judge."""
    started = time.perf_counter()
    confirmed, state.pipeline = detect_contradictions(rt, list(state.conclusions.values()), cfg)
    state.contradictions = confirmed
    state.record("contradictions", started, [f"{c['a']}|{c['b']}" for c in confirmed])
    return state


def step_prune(state: LintState, cfg: MaintenanceConfig) -> LintState:
    started = time.perf_counter()
    result = lint_steps.prune(state.conclusions.values(), cfg.pruneConfidenceThreshold)
    for c in result.pruned:
        del state.conclusions[c.id]
        state.removed[c.id] = "pruned"
    state.record("prune", started, [c.id for c in result.pruned], threshold=cfg.pruneConfidenceThreshold)
    return state


def prune_expired(rt: Services, user_id: str) -> dict[str, int]:
    """Index entries of episodes and turns whose TTL ran out (search drops the ones it meets;
    this sweeps the rest), per namespace."""
    return {namespace: rt.semantic.store(namespace).prune(user_id) for namespace in ("episode", "turn")}


def _root(state: LintState, conclusion_id: str) -> str:
    """The survivor a conclusion was merged into (itself when it was not merged)."""
    while (why := state.removed.get(conclusion_id, "")).startswith("merged into "):
        conclusion_id = why.removeprefix("merged into ")
    return conclusion_id


def _written_meanwhile(rt: Services, state: LintState) -> set[str]:
    """The merge groups (named by their survivor) with a conclusion another writer (a Dreamer run, an
    episode's forget, a delete) changed since ``load``: the lint's version of them is out of date."""
    touched = sorted(state.changed | set(state.removed))
    now = rt.conclusions.get_many(state.user_id, touched)
    return {_root(state, i) for i in touched if now.get(i) != state.loaded.get(i)}


def _merge_memories_found(rt: Services, state: LintState) -> int:
    """Fold each duplicate memory found into its survivor, in pair order (a chain folds into its first);
    a pair either of which another writer changed since ``load`` (an edit, a session end's new source, a
    forget) is left for the next sweep. Returns how many were left."""
    left = 0
    for survivor_id, duplicate_id in state.memory_merges:
        survivor, duplicate = state.memories[survivor_id], state.memories[duplicate_id]
        merged = rt.semantic.merge_duplicate(survivor, duplicate, origin="lint")
        if merged is None:
            left += 1
        else:
            state.memories[survivor_id] = merged
    return left


def persist(rt: Services, state: LintState, started_ms: int) -> MaintenanceReport:
    """Write changed conclusions, delete removed ones, rebuild the profile's derived lines from what is
    left (as the Dreamer and an episode's forget do), store the report, fire contradiction events.
    The conclusions are written under the conclusions lock, and those another writer changed since the
    lint read them (with what was merged with them) are left as that writer left them, for the next sweep:
    writing the lint's copy lost a Dreamer's new sources or wrote a forgotten episode back."""
    kept = [state.conclusions[i] for i in state.changed if i in state.conclusions]
    validate_table("conclusions", _frame([c.model_dump() for c in kept], ["id", "text", "confidence", "type"]))
    store = rt.conclusions
    with conclusions_held(rt, state.user_id):
        moved = _written_meanwhile(rt, state)
        for conclusion_id in state.removed:
            if _root(state, conclusion_id) not in moved:
                store.delete(state.user_id, conclusion_id)
        # texts are unchanged (merges keep the winner's), so indexes stay valid
        store.save_records([c for c in kept if c.id not in moved])
    memories_moved = _merge_memories_found(rt, state)
    if state.changed or state.removed:  # profile lines cite conclusions: a stale, merged or pruned one's goes
        refresh_profile(rt, state.user_id, load_recent_episodes(rt, state.user_id))
    expired = prune_expired(rt, state.user_id)
    filled = fill_user(rt, state.user_id)  # records stored while the embedder was down get their vectors
    summary = {
        "status": "completed",
        "conclusionsBefore": state.before,
        "conclusionsAfter": len(state.conclusions),
        "memoriesMerged": len(state.memory_merges) - memories_moved,
        "changedMeanwhile": len(moved),
        "memoriesChangedMeanwhile": memories_moved,
        **{s["step"]: s["count"] for s in state.steps},
        "contradictionPipeline": state.pipeline,
        "expiredIndexEntries": expired,
        "vectorsFilled": {"filled": filled.filled, "gone": filled.skipped, "error": filled.error},
        "durationMs": now_ms() - started_ms,
        **({"runId": state.run_id} if state.run_id else {}),
        **({"pendingDream": state.dream} if state.dream else {}),
    }
    report = MaintenanceReport(timestamp=started_ms, user_id=state.user_id, summary=summary, steps=state.steps)
    rt.maintenance.save(report)
    for pair in state.contradictions:
        if rt.maintenance.mark_emitted(state.user_id, f"{pair['a']}|{pair['b']}"):
            rt.events.emit(CONTRADICTION_EVENT, {"user_id": state.user_id, **pair})
    return report


@dataclass(frozen=True)
class LintSteps:
    load: Callable[..., LintState]
    stale: Callable[..., LintState]
    decay: Callable[..., LintState]
    merge: Callable[..., LintState]
    orphans: Callable[..., LintState]
    contradictions: Callable[..., LintState]
    prune: Callable[..., LintState]
    persist: Callable[..., MaintenanceReport]


INLINE_STEPS = LintSteps(
    load, step_stale, step_decay, step_merge, step_orphans, step_contradictions, step_prune, persist
)


def run_lint(
    rt: Services, user_id: str, steps: LintSteps = INLINE_STEPS, run_id: str | None = None
) -> MaintenanceReport:
    """One user's sweep, all six steps; raises MaintenanceDisabledError when switched off."""
    cfg = rt.settings.maintenance
    if not cfg.enabled:
        raise MaintenanceDisabledError("memory maintenance is disabled (AGTOS_MAINTENANCE_ENABLED=false)")
    started_ms = now_ms()
    since = {user_id: rt.privacy.clock_ms()}  # a forget-all during the sweep: what it wrote goes too
    dream = retry_pending_dream(rt, user_id)  # a session end's run that gave up or failed: its conclusions linted too
    state = steps.load(rt, user_id)
    state.run_id, state.dream = run_id, dream
    state = steps.stale(state, cfg)
    state = steps.decay(state, cfg)
    state = steps.merge(state, cfg)
    state = steps.orphans(state, cfg)
    state = steps.contradictions(rt, state, cfg)
    state = steps.prune(state, cfg)
    report = steps.persist(rt, state, started_ms)
    rt.privacy.late_writes_removed(since)
    return report


def maintain(
    rt: Services,
    user_id: str,
    steps: LintSteps = INLINE_STEPS,
    sleep: Callable[[float], None] = time.sleep,
    run_id: str | None = None,
) -> MaintenanceReport:
    """Lint gated by the ResourceGuard: wait (retries × delay) while deferred, then skip."""
    cfg = rt.settings.maintenance
    if not cfg.enabled:
        raise MaintenanceDisabledError("memory maintenance is disabled (AGTOS_MAINTENANCE_ENABLED=false)")
    outcome = run_when_safe(
        rt.guard,
        lambda: run_lint(rt, user_id, steps, run_id),
        retries=cfg.guard_retries,
        delay_s=cfg.guard_delay_s,
        sleep=sleep,
        slot=rt.settings.llm_slot("maintenance"),
    )
    if outcome.ran and outcome.result is not None:
        return outcome.result
    deferred = {"status": "deferred", "reasons": outcome.reasons, "attempts": outcome.attempts}
    return MaintenanceReport(user_id=user_id, summary=deferred | ({"runId": run_id} if run_id else {}))


def queued_run(rt: Services, user_id: str, run_id: str) -> tuple[MaintenanceRun | None, int]:
    """The run the API queued (None: forgotten since, by a forget-all or an opt-out that forgot) and when it
    was read, the ``since_ms`` of :func:`maintain_run`: read first, so a forget-all landing after the read
    deletes what the run writes, its record included."""
    since_ms = rt.privacy.clock_ms()
    return rt.maintenance.get_run(user_id, run_id), since_ms


def maintain_run(
    rt: Services,
    run: MaintenanceRun,
    steps: LintSteps = INLINE_STEPS,
    sleep: Callable[[float], None] = time.sleep,
    since_ms: int | None = None,
) -> MaintenanceRun:
    """Carry out a requested run: running, then completed/deferred with the report, or failed
    with the error (re-raised); each state is saved for ``GET /api/memory/maintain/runs/{id}``.
    ``sleep`` waits between the guard's checks (:func:`maintain`). ``since_ms``: when the caller read the
    run's record (the Redis clock, :meth:`clock_ms`; default now): a forget-all after it deletes what the
    run writes, its record included."""
    since = {run.user_id: rt.privacy.clock_ms() if since_ms is None else since_ms}
    run = run.model_copy(update={"status": "running", "started_at": now_ms()})
    rt.maintenance.save_run(run)
    try:
        rt.privacy.require_persistence(run.user_id)
        report = maintain(rt, run.user_id, steps, sleep, run.run_id)
    except Exception as exc:
        failed = {"status": "failed", "error": f"{type(exc).__name__}: {exc}", "finished_at": now_ms()}
        rt.maintenance.save_run(run.model_copy(update=failed))
        rt.privacy.late_writes_removed(since)
        raise
    run = run.model_copy(update={"status": report.summary["status"], "report": report, "finished_at": now_ms()})
    rt.maintenance.save_run(run)
    rt.privacy.late_writes_removed(since)
    return run
