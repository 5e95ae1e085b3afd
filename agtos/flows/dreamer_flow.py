"""The Dreamer as a Prefect flow: each step of :mod:`agtos.memory.dreamer_pipeline` becomes a task."""

from __future__ import annotations

from typing import Any

from prefect import flow, task
from prefect.cache_policies import NONE

import agtos.flows  # noqa: F401 - Prefect defaults
from agtos.flows.runtime import runtime
from agtos.memory.dreamer_pipeline import (
    DreamerSteps,
    consolidate,
    load_recent_episodes,
    refresh_profile,
    run_dreamer,
    store_conclusions,
)
from agtos.schemas.api import DreamOut

_opts: dict[str, Any] = {"cache_policy": NONE, "persist_result": False}
PREFECT_STEPS = DreamerSteps(
    task(name="load-episodes", retries=2, retry_delay_seconds=1, **_opts)(load_recent_episodes),
    task(name="consolidate", retries=2, retry_delay_seconds=5, **_opts)(consolidate),
    task(name="store-conclusions", retries=3, retry_delay_seconds=[1, 4, 16], **_opts)(store_conclusions),
    task(name="refresh-profile", retries=2, retry_delay_seconds=1, **_opts)(refresh_profile),
)


@flow(name="dreamer", log_prints=False, validate_parameters=False)
def dreamer_flow(user_id: str) -> dict[str, Any]:
    """Consolidation of one user's recent episodes as a Prefect flow."""
    return DreamOut.model_validate(run_dreamer(runtime(), user_id, PREFECT_STEPS)).model_dump(by_alias=True)
