"""The six-step memory lint as a Prefect flow: each step of :mod:`agtos.memory.lint_pipeline` becomes
a Prefect task; the nightly deployment lints every known user."""

from __future__ import annotations

from typing import Any

import prefect.runtime as prefect_runtime
from prefect import flow, task
from prefect.cache_policies import NONE

import agtos.flows  # noqa: F401 - Prefect defaults
from agtos.flows.runtime import runtime
from agtos.memory.lint_pipeline import (
    LintSteps,
    load,
    maintain,
    maintain_run,
    persist,
    queued_run,
    step_contradictions,
    step_decay,
    step_merge,
    step_orphans,
    step_prune,
    step_stale,
)

_opts: dict[str, Any] = {"cache_policy": NONE, "persist_result": False}
PREFECT_STEPS = LintSteps(
    task(name="load-and-check", retries=2, retry_delay_seconds=1, **_opts)(load),
    task(name="1-stale", **_opts)(step_stale),
    task(name="2-decay", **_opts)(step_decay),
    task(name="3-merge-redundant", **_opts)(step_merge),
    task(name="4-orphan-episodes", **_opts)(step_orphans),
    task(name="5-contradictions", retries=2, retry_delay_seconds=5, **_opts)(step_contradictions),
    task(name="6-prune", **_opts)(step_prune),
    task(name="persist-report", retries=3, retry_delay_seconds=[1, 4, 16], **_opts)(persist),
)


@flow(name="memory-lint", log_prints=False, validate_parameters=False)
def lint_flow(user_id: str | None = None, run_id: str | None = None) -> list[dict[str, Any]]:
    """Lint one user, or every known user who has not opted out (the nightly deployment); with ``run_id``,
    the run the API queued for ``user_id`` (its status record follows the sweep)."""
    rt = runtime()
    if user_id and run_id:
        stored, since_ms = queued_run(rt, user_id, run_id)
        if stored is None:  # forgotten since the API queued it: not run, and its record not written again
            return []
        run = stored.model_copy(update={"flow_run_id": str(prefect_runtime.flow_run.id)})
        done = maintain_run(rt, run, PREFECT_STEPS, since_ms=since_ms)
        return [done.report.model_dump()] if done.report else []
    # every known user but those who opted out of persistence (their kept memory is not rewritten: the
    # HTTP route and the CLI refuse them too)
    users = [user_id] if user_id else [uid for uid in rt.users.known() if not rt.privacy.is_opted_out(uid)]
    return [maintain(rt, uid, PREFECT_STEPS).model_dump() for uid in users]
