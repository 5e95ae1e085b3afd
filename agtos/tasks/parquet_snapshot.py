"""Snapshot export steps: records → arrow tables (the contract in :mod:`agtos.schemas.arrow`) → Parquet.

One Parquet file per record kind, appended batch by batch (one row group per batch), so an export
never holds more than one user's batch in memory. Every file is written even when it stays empty,
so readers can always query all of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel

from agtos.schemas.arrow import (
    CONCLUSION_SCHEMA,
    ENTITY_SCHEMA,
    EPISODE_SCHEMA,
    MEMORY_SCHEMA,
    PROFILE_SCHEMA,
    RELATIONSHIP_SCHEMA,
    REPORT_SCHEMA,
    STORED_TURN_SCHEMA,
    to_table,
)

MANIFEST = "manifest.json"
FORMAT_VERSION = 1

KINDS: dict[str, pa.Schema] = {
    "episodes": EPISODE_SCHEMA,
    "turns": STORED_TURN_SCHEMA,
    "memories": MEMORY_SCHEMA,
    "conclusions": CONCLUSION_SCHEMA,
    "entities": ENTITY_SCHEMA,
    "relationships": RELATIONSHIP_SCHEMA,
    "profiles": PROFILE_SCHEMA,
    "maintenance_reports": REPORT_SCHEMA,
}

T = TypeVar("T")


def parquet_name(kind: str) -> str:
    """The file name of one record kind in a snapshot."""
    if kind not in KINDS:
        raise KeyError(f"unknown record kind {kind!r}")
    return f"{kind}.parquet"


def records_table(rows: Sequence[BaseModel], schema: pa.Schema) -> pa.Table:
    """Records as a table conforming to ``schema`` (an empty table for no rows)."""
    return to_table(list(rows), schema) if rows else schema.empty_table()


def chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of at most ``size``."""
    if size <= 0:
        raise ValueError("size must be positive")
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def build_manifest(counts: dict[str, int], users: int, exported_at_ms: int) -> dict[str, Any]:
    """The snapshot's ``manifest.json``: when, how many rows of what, and under which schema."""
    return {
        "format_version": FORMAT_VERSION,
        "exported_at": datetime.fromtimestamp(exported_at_ms / 1000, UTC).isoformat(timespec="seconds"),
        "exported_at_ms": exported_at_ms,
        "users": users,
        "counts": {kind: counts.get(kind, 0) for kind in KINDS},
        "files": {kind: parquet_name(kind) for kind in KINDS},
        "schemas": {kind: (schema.metadata or {}).get(b"record", b"").decode() for kind, schema in KINDS.items()},
    }


class SnapshotWriter:
    """Open Parquet writers for every kind in ``directory``; ``write`` appends a batch of records."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.counts: dict[str, int] = dict.fromkeys(KINDS, 0)
        # non-compliant nested names keep list items called "item", so files read back as the exact schema
        self._writers = {
            kind: pq.ParquetWriter(directory / parquet_name(kind), schema, use_compliant_nested_type=False)
            for kind, schema in KINDS.items()
        }

    def write(self, kind: str, rows: Sequence[BaseModel]) -> int:
        """Append ``rows`` to the kind's file; returns how many were written."""
        if not rows:
            return 0
        self._writers[kind].write_table(records_table(rows, KINDS[kind]))
        self.counts[kind] += len(rows)
        return len(rows)

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()

    def __enter__(self) -> SnapshotWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
