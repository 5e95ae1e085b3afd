"""Export stored memory to a Parquet snapshot (one file per record kind plus ``manifest.json``).

Users are read one by one through the stores' public reads, in batches, and appended to the
Parquet files as they come. The snapshot is built in a temporary directory next to ``out_dir``
and renamed into place only once complete, so a reader never sees half an export.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from agtos.schemas.records import now_ms
from agtos.storage.keys import check_user_id
from agtos.storage.maintenance_store import REPORTS_KEPT
from agtos.tasks.parquet_snapshot import MANIFEST, SnapshotWriter, build_manifest, chunks

if TYPE_CHECKING:
    from agtos.memory.services import Services

BATCH = 500

Batches = Iterator[tuple[str, Sequence[BaseModel]]]


def export_snapshot(
    services: Services,
    out_dir: Path,
    users: list[str] | None = None,
    on_user: Callable[[str], None] | None = None,
) -> dict[str, int]:
    """Write every known user's records (or ``users``') under ``out_dir``; returns rows per kind.

    ``on_user`` is called after each user is written (progress reporting). An existing ``out_dir``
    is replaced only if it is empty or a previous snapshot (has a manifest).
    """
    out_dir = Path(out_dir).absolute()
    targets = [check_user_id(u) for u in (users if users is not None else services.users.known())]
    _check_replaceable(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=out_dir.parent))
    try:
        with SnapshotWriter(tmp) as writer:
            for user_id in targets:
                for kind, rows in user_batches(services, user_id):
                    writer.write(kind, rows)
                if on_user is not None:
                    on_user(user_id)
        manifest = build_manifest(writer.counts, len(targets), now_ms())
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        _swap_into_place(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dict(writer.counts)


def user_batches(services: Services, user_id: str) -> Batches:
    """``(kind, records)`` batches of one user, read lazily."""
    for batch in chunks(services.episodes.iter_all(user_id, batch_size=BATCH), BATCH):
        yield "episodes", batch
        yield "turns", services.semantic.turns.of_episodes(user_id, [e.id for e in batch])
    yield from _memories(services, user_id)
    yield "conclusions", services.conclusions.all(user_id)
    yield from _entity_graph(services, user_id)
    profile = services.profiles.get(user_id)
    if profile.updated_at > 0:  # a stored profile (the store returns a blank one with 0 otherwise)
        yield "profiles", [profile]
    reports = services.maintenance.history(user_id, limit=REPORTS_KEPT)
    yield "maintenance_reports", list(reversed(reports))  # oldest sweep first


def memory_keys(services: Services, user_id: str) -> list[str]:
    """Record keys of the user's semantic memories (SCAN; index and collection keys skipped)."""
    return services.reads.memory_keys(user_id)


def _memories(services: Services, user_id: str) -> Batches:
    for keys in chunks(memory_keys(services, user_id), BATCH):
        yield "memories", services.reads.memories(user_id, keys)


def _entity_graph(services: Services, user_id: str) -> Batches:
    """Live entities, page by page, then the relationships leaving them."""
    store = services.entities.store
    offset, seen_rels = 0, set[str]()
    while True:
        ids, total = store.page(user_id, None, offset, BATCH)
        if not ids:
            return
        found = store.get_many(user_id, ids)
        entities = [found[i] for i in ids if i in found and not found[i].deleted]
        yield "entities", entities
        rel_ids = [r for e in entities for r in store.edge_ids(user_id, e.id)[0] if r not in seen_rels]
        seen_rels.update(rel_ids)
        rels = store.rels(user_id, rel_ids)
        yield "relationships", [rels[r] for r in rel_ids if r in rels]
        offset += len(ids)
        if offset >= total:
            return


def _check_replaceable(out_dir: Path) -> None:
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise FileExistsError(f"{out_dir} exists and is not a directory")
    if any(out_dir.iterdir()) and not (out_dir / MANIFEST).is_file():
        raise FileExistsError(f"{out_dir} is not empty and holds no snapshot; refusing to replace it")


def _swap_into_place(tmp: Path, out_dir: Path) -> None:
    """Rename the finished snapshot to ``out_dir`` (a previous one is moved aside, then removed)."""
    _check_replaceable(out_dir)
    if not out_dir.exists():
        tmp.rename(out_dir)
        return
    old = out_dir.with_name(f".{out_dir.name}.old-{uuid.uuid4().hex[:8]}")
    out_dir.rename(old)
    try:
        tmp.rename(out_dir)
    except OSError:
        old.rename(out_dir)
        raise
    shutil.rmtree(old, ignore_errors=True)
