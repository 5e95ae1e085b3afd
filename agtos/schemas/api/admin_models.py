"""Responses of maintenance runs, privacy and imports from other tools."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from agtos.schemas.api.response_base import ApiModel
from agtos.schemas.records import MaintenanceReport, now_ms

# -- maintenance -----------------------------------------------------------------------
RunStatus = Literal["queued", "running", "completed", "deferred", "failed"]


class MaintenanceRun(ApiModel):
    """One requested lint sweep: queued, running, then its report (completed or deferred) or error.

    Stored as is (storage/maintenance_store.py); a completed run's report is also in the history,
    with ``summary.runId`` naming this run.
    """

    run_id: str
    user_id: str
    status: RunStatus = "queued"
    created_at: int = Field(default_factory=now_ms)
    started_at: int | None = None
    finished_at: int | None = None
    report: MaintenanceReport | None = None
    error: str | None = None
    flow_run_id: str | None = Field(default=None, description="the Prefect flow run, when a deployment ran it")


class MaintenanceHistoryOut(ApiModel):
    reports: list[MaintenanceReport]
    count: int


# -- privacy ---------------------------------------------------------------------------
class ForgottenItemOut(ApiModel):
    kind: Literal["episode", "memory", "conclusion", "entity"]
    id: str


class ForgottenDerivedOut(ApiModel):
    """What was learnt from a forgotten episode alone, forgotten with it."""

    memories: int = Field(ge=0)
    conclusions: int = Field(ge=0)
    entities: int = Field(ge=0)


class ForgetItemOut(ApiModel):
    forgotten: ForgottenItemOut
    derived: ForgottenDerivedOut | None = Field(
        default=None,
        description="an episode: the memories, conclusions and entities only it supported, forgotten with it",
    )


class ForgetAllOut(ApiModel):
    forgotten: Literal["all"]
    user_id: str
    keys_deleted: int


class PrivacyOut(ApiModel):
    user_id: str
    opt_out: bool


class PrivacyUpdateOut(PrivacyOut):
    keys_deleted: int = Field(description="keys removed by forget_existing (0 otherwise)")


# -- import ----------------------------------------------------------------------------
class SourceOut(ApiModel):
    """One discovered file (the importer's snake_case summary)."""

    model_config = ConfigDict(alias_generator=None)
    source: str
    path: str
    item_count: int
    warnings: list[str]


class SourcesOut(ApiModel):
    sources: list[SourceOut]
    count: int


class ImportOut(ApiModel):
    sessions: int = Field(description="sessions found in the chosen sources")
    episodes_added: int
    episodes_updated: int = Field(description="sessions imported before whose turns changed since: stored again")
    unchanged: int = Field(
        0, description="sessions imported (or skipped) before with the same turns: not processed again"
    )
    skipped: list[dict[str, str]]
    memories_added: int
    memories_unchanged: int = Field(0, description="memory items stored before (same text): left as they are")
    warnings: list[str]
