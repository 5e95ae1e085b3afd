"""Great Expectations suites for the batch tables that cross flow boundaries.

A failed expectation raises :class:`DataCheckFailed` with a readable message *before*
anything is written, so a flow task fails cleanly instead of storing bad data.
"""

from __future__ import annotations

import logging
import os
import threading
from functools import lru_cache
from typing import Any

import polars as pl

from agtos.schemas import ConclusionType, EpisodeType

log = logging.getLogger(__name__)
_lock = threading.Lock()


class DataCheckFailed(ValueError):
    """A batch table broke one of its expectations."""


def _expectations(table: str, params: dict[str, Any]) -> list[Any]:
    import great_expectations as gx

    e = gx.expectations
    if table == "conclusions":
        return [
            e.ExpectColumnValuesToNotBeNull(column="id"),
            e.ExpectColumnValuesToBeUnique(column="id"),
            e.ExpectColumnValuesToNotBeNull(column="text"),
            e.ExpectColumnValuesToBeBetween(column="confidence", min_value=0.0, max_value=1.0),
            e.ExpectColumnValuesToBeInSet(column="type", value_set=[t.value for t in ConclusionType]),
        ]
    if table == "episodes":
        return [
            e.ExpectColumnValuesToNotBeNull(column="id"),
            e.ExpectColumnValuesToBeUnique(column="id"),
            e.ExpectColumnValuesToBeBetween(column="importance", min_value=0.0, max_value=1.0),
            e.ExpectColumnValuesToBeInSet(column="type", value_set=[t.value for t in EpisodeType]),
        ]
    if table == "pairs":
        return [
            e.ExpectColumnValuesToNotBeNull(column="a_id"),
            e.ExpectColumnValuesToNotBeNull(column="b_id"),
            e.ExpectColumnPairValuesAToBeGreaterThanB(column_A="b_id", column_B="a_id"),
            e.ExpectColumnValuesToBeBetween(
                column="jaccard", min_value=float(params.get("threshold", 0.0)), max_value=1.0
            ),
        ]
    raise ValueError(f"no data checks for table {table!r}")


@lru_cache(maxsize=1)
def _context() -> Any:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    try:
        context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    except Exception:
        log.debug("could not switch off GX progress bars", exc_info=True)
    return context


def validate_table(table: str, frame: pl.DataFrame, **params: Any) -> int:
    """Validate ``frame`` against the table's suite; returns the row count checked."""
    if frame.is_empty():
        return 0
    import great_expectations as gx

    with _lock:
        context = _context()
        source_name = f"agtos-{table}"
        try:
            source = context.data_sources.get(source_name)
        except (KeyError, ValueError):
            source = context.data_sources.add_pandas(source_name)
        try:
            asset = source.get_asset(table)
        except (LookupError, ValueError):
            asset = source.add_dataframe_asset(table)
        batch_def = next(iter(asset.batch_definitions), None) or asset.add_batch_definition_whole_dataframe("all")
        suite = gx.ExpectationSuite(name=f"{table}-check", expectations=_expectations(table, params))
        result = batch_def.get_batch(batch_parameters={"dataframe": frame.to_pandas()}).validate(suite)
    if not result.success:
        problems = []
        for item in result.results:
            if not item.success:
                cfg = item.expectation_config
                where = cfg.kwargs.get("column") or f"{cfg.kwargs.get('column_A')}/{cfg.kwargs.get('column_B')}"
                sample = (item.result or {}).get("partial_unexpected_list", [])[:3]
                problems.append(f"{cfg.type} on {where} (e.g. {sample})")
        raise DataCheckFailed(f"{table} table failed data checks: " + "; ".join(problems))
    return frame.height
