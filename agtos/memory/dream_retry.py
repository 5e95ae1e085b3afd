"""The maintenance sweep's retry of a Dreamer run that gave up or failed (the user's "dream pending" mark).

A session end marks the user before its Dreamer run and the run that succeeds clears the mark
(:mod:`agtos.memory.dreamer`). The lint sweep (``POST /api/memory/maintain``, the nightly lint over every
user) runs the Dreamer first for a user still marked, inside the sweep's own ResourceGuard wait, so its
conclusions are linted with the rest: once per sweep (no hot loop), until a run succeeds or the mark
expires (``MARKER_TTL_S``, 7 days). An LLM Dreamer the guard still defers for its own slot, or a run
that fails again, leaves the mark for the next sweep; a user who opted out loses it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from agtos.memory.dreamer_pipeline import run_dreamer

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
        report = run_dreamer(rt, user_id)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        log.warning("pending Dreamer run for %s failed again (%s); left for the next sweep", user_id, error)
        return {"status": "failed", "error": error}
    rt.dream_markers.clear_pending(user_id, token)
    return {"status": "ran", "conclusions": len(report.conclusions), "source": report.source}
