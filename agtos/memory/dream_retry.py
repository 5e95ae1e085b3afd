"""The maintenance sweep's retry of a Dreamer run that gave up, failed or never started (the user's "dream
pending" mark), and the manual run that clears the mark it covers.

A session end marks the user with its episode's write and the run that succeeds clears the mark
(:mod:`agtos.memory.dreamer`); so does a manual run (``POST /api/memory/dream``, :func:`dream_now`). The lint
sweep (``POST /api/memory/maintain``, the nightly lint over every user) runs the Dreamer first for a user
still marked, inside the sweep's own ResourceGuard wait, so its conclusions are linted with the rest: once per
sweep (no hot loop), until a run succeeds or the mark expires (``MARKER_TTL_S``, 7 days). An LLM Dreamer the
guard still defers for its own slot, or a run that fails again, leaves the mark for the next sweep; a user who
opted out loses it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from agtos.memory.dreamer_pipeline import DreamReport, run_dreamer

if TYPE_CHECKING:
    from agtos.memory.services import Services

log = logging.getLogger(__name__)


def retry_pending_dream(rt: Services, user_id: str) -> dict[str, Any] | None:
    """Run the Dreamer for ``user_id`` if a run of theirs is pending; what came of it (None: none pending)."""
    token = rt.dream_markers.pending(user_id)
    if token is None:
        return None
    if rt.privacy.is_opted_out(user_id, fresh=True):
        rt.dream_markers.clear_pending(user_id, token)
        return {"status": "dropped", "reason": "opted out"}
    if rt.consolidation_llm is not None:
        decision = rt.guard.check(rt.settings.llm_slot("consolidation"))
        if not decision.safe:
            return {"status": "deferred", "reason": decision.reason}
    try:
        report = dream_now(rt, user_id, token)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        log.warning("pending Dreamer run for %s failed again (%s); left for the next sweep", user_id, error)
        return {"status": "failed", "error": error}
    return {"status": "ran", "conclusions": len(report.conclusions), "source": report.source}


def dream_now(rt: Services, user_id: str, token: str | None = None) -> DreamReport:
    """Run the Dreamer for ``user_id``; once it succeeded, the user's pending mark as it was before the run
    (``token``, else read now) is cleared: the run read every episode marked by then. A mark set since (a
    session end meanwhile) stays for that end's run."""
    token = rt.dream_markers.pending(user_id) if token is None else token
    report = run_dreamer(rt, user_id)
    if token is not None:
        rt.dream_markers.clear_pending(user_id, token)
    return report
