"""The ingestion pipeline as a Prefect flow: each step of :mod:`agtos.memory.ingestion_pipeline`
becomes a Prefect task (retries, observability) for imports, bulk loads and deployments."""

from __future__ import annotations

from typing import Any

from prefect import flow, task
from prefect.cache_policies import NONE

import agtos.flows  # noqa: F401 - Prefect defaults
from agtos.flows.runtime import runtime
from agtos.memory.ingestion_pipeline import (
    IngestionSteps,
    distil,
    embed_texts,
    index_batch,
    recognise_entities,
    run_ingestion,
    summarise_items,
    upsert_entities,
)
from agtos.schemas import IngestItem

_task_opts: dict[str, Any] = {"cache_policy": NONE, "persist_result": False}
summarise_task = task(name="summarise", retries=2, retry_delay_seconds=1, **_task_opts)(summarise_items)
ner_task = task(name="ner", retries=2, retry_delay_seconds=1, **_task_opts)(recognise_entities)
distil_task = task(name="distil", **_task_opts)(distil)
embed_task = task(name="embed", retries=3, retry_delay_seconds=2, **_task_opts)(embed_texts)
index_task = task(name="index", retries=5, retry_delay_seconds=[1, 2, 4, 8, 16], **_task_opts)(index_batch)
entities_task = task(name="entities", retries=2, retry_delay_seconds=1, **_task_opts)(upsert_entities)
PREFECT_STEPS = IngestionSteps(summarise_task, ner_task, distil_task, embed_task, index_task, entities_task)


@flow(name="ingestion", log_prints=False, validate_parameters=False)
def ingestion_flow(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Batch ingestion as a Prefect flow (imports, bulk loads, deployments)."""
    parsed = [IngestItem.model_validate(item) for item in items]
    return run_ingestion(runtime(), parsed, PREFECT_STEPS).model_dump(by_alias=True)
