"""Prefect deployments of the three flows; the nightly lint's timezone comes from configuration.

``agtos flows serve`` serves them from this process (a Prefect server must be reachable at
``PREFECT_API_URL``); ``prefect deploy --all`` with the repository's prefect.yaml registers
the same deployments for a process work pool served by ``prefect worker start``.
"""

from __future__ import annotations

from typing import Any

from prefect.schedules import Cron

from agtos.config import Settings
from agtos.flows.dreamer_flow import dreamer_flow
from agtos.flows.ingestion_flow import ingestion_flow
from agtos.flows.lint_flow import lint_flow

NIGHTLY_LINT_CRON = "0 3 * * *"


def build_deployments(settings: Settings | None = None) -> list[Any]:
    """Ingestion and Dreamer on demand; the lint nightly at 03:00 in AGTOS_MAINTENANCE_TIMEZONE."""
    settings = settings or Settings.from_env()
    timezone = settings.maintenance.timezone
    return [
        ingestion_flow.to_deployment(name="ingestion", tags=["agtos"], parameters={"items": []}),
        dreamer_flow.to_deployment(name="dreamer", tags=["agtos"]),
        lint_flow.to_deployment(
            name="nightly-lint",
            tags=["agtos", "maintenance"],
            schedules=[Cron(NIGHTLY_LINT_CRON, timezone=timezone)],
            description=f"Six-step memory lint of every user, {NIGHTLY_LINT_CRON} ({timezone}).",
        ),
    ]


def serve_deployments(settings: Settings | None = None) -> None:
    """Register the deployments and run their flow runs from this process (blocks)."""
    from prefect import serve

    serve(*build_deployments(settings))
