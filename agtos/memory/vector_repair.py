"""Vectors for the records stored for keyword search only (the embedder was down).

:func:`~agtos.memory.ingestion_pipeline.run_ingestion` notes them in
:class:`~agtos.storage.pending_vectors.PendingVectors`, and so do the other writers (memories created,
edited or imported, the Dreamer's conclusions) through
:meth:`~agtos.memory.semantic.SemanticMemory.embed_then_write`; :func:`fill_pending` (after a successful
ingestion: the worker's jobs, an inline session end) and :func:`fill_user` (the lint sweep) embed
them later, a batch per embedding call, with their texts as stored now, and write the vectors as
ingestion does: an episode with stored turns gets its turns' units embedded (the ``turn`` index)
and a vector made of them and of its facts in the batch, others (memories, conclusions) an embedding
of their text, and an entity (noted by :meth:`~agtos.memory.entity_graph.EntityGraph._name_vector`)
an embedding of its current name (the ``entity`` index: dedup by similarity). Records forgotten or
expired meanwhile are skipped; if the embedder still fails, the rest stay pending. Nothing is
written for a user who opted out: their pending records are dropped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from agtos.memory.ingestion_pipeline import EMBEDDER_DEGRADED, IngestionReport, episode_rows_first, pending_vectors
from agtos.providers.embeddings import EmbeddingError
from agtos.schemas import Conclusion, Entity, Episode, Memory
from agtos.schemas.records import now_ms
from agtos.storage.keys import record_id_pattern
from agtos.storage.pending_vectors import PendingRecord
from agtos.storage.turns import turn_doc_id
from agtos.tasks.text import episode_text
from agtos.tasks.verbatim_turns import TurnBatch, TurnUnit, turn_units

if TYPE_CHECKING:
    from agtos.memory.services import Services

log = logging.getLogger(__name__)

FILL_BATCH = 32  # records per embedding call
FILL_TEXTS = 256  # texts per embedding call (an episode brings one per turn unit): fewer records when they are long
AFTER_INGESTION_RECORDS = 32  # filled after a successful ingestion (one batch: a job, or a request, waits on it)
SWEEP_RECORDS = 512  # filled per user by a lint sweep
USERS_PER_FILL = 16  # users looked at after an ingestion


@dataclass
class FillReport:
    """What a fill did: records given vectors, records skipped (gone meanwhile), and why it stopped early."""

    filled: int = 0
    skipped: int = 0
    error: str | None = None

    def add(self, other: FillReport) -> None:
        self.filled += other.filled
        self.skipped += other.skipped
        self.error = self.error or other.error


def fill_pending(rt: Services, max_records: int = AFTER_INGESTION_RECORDS) -> FillReport:
    """Fill up to ``max_records`` pending records of any users (a random few of those waiting)."""
    report = FillReport()
    for user_id in pending_vectors(rt).users(USERS_PER_FILL):
        left = max_records - report.filled - report.skipped
        if left <= 0 or report.error:
            break
        report.add(fill_user(rt, user_id, left))
    return report


def fill_after_ingestion(rt: Services, ingested: IngestionReport) -> None:
    """:func:`fill_pending` once an ingestion embedded its batch (the embedder answers again); a
    failure is logged, never the job's: the pending records wait for the next try."""
    if not ingested.stored or ingested.degraded == EMBEDDER_DEGRADED:
        return
    try:
        filled = fill_pending(rt)
    except Exception:
        log.exception("pending vectors not filled")
        return
    if filled.filled or filled.skipped:
        log.info("pending vectors: %d records filled, %d gone", filled.filled, filled.skipped)


def fill_user(rt: Services, user_id: str, max_records: int = SWEEP_RECORDS) -> FillReport:
    """Fill up to ``max_records`` of one user's pending records, oldest first, at most ``FILL_BATCH``
    records and ``FILL_TEXTS`` texts per embedding call. Nothing is written for a user who opted out:
    their pending records are dropped (and they leave the list of users waiting)."""
    report = FillReport()
    pending = pending_vectors(rt)
    if rt.privacy.is_opted_out(user_id, fresh=True):
        pending.drop_user(user_id)
        return report
    since = {user_id: rt.privacy.clock_ms()}
    try:
        _fill_batches(rt, user_id, max_records, report)
    finally:  # forgot everything meanwhile: the vectors written since are deleted again
        rt.privacy.late_writes_removed(since)
    return report


def _fill_batches(rt: Services, user_id: str, max_records: int, report: FillReport) -> None:
    pending = pending_vectors(rt)
    while report.filled + report.skipped < max_records:
        batch = pending.oldest(user_id, min(FILL_BATCH, max_records - report.filled - report.skipped))
        if not batch:
            break
        try:
            handled, filled = _fill(rt, user_id, batch)
        except (EmbeddingError, ValueError) as exc:  # ValueError: vectors the index refuses (its dimension)
            log.warning("pending vectors of %d records not filled: %s", len(batch), exc)
            report.error = "embedder unavailable" if isinstance(exc, EmbeddingError) else "vectors refused"
            break
        report.filled += filled
        report.skipped += len(handled) - filled
        if not pending.clear(user_id, handled):
            break


def _fill(rt: Services, user_id: str, batch: list[PendingRecord]) -> tuple[list[PendingRecord], int]:
    """Embed and index the first records of ``batch`` whose texts fit in ``FILL_TEXTS`` (one record at
    least), in one embedding call; returns the records handled and how many of them still exist."""
    semantic = rt.semantic
    stores = {ns: semantic.store(ns) for ns in ("episode", "memory", "conclusion")}
    raws = {
        ns: store.get_many(user_id, [r.record_id for r in batch if r.namespace == ns]) for ns, store in stores.items()
    }
    found_episodes = {i: Episode.model_validate_json(raw) for i, raw in raws["episode"].items()}
    found_memories = {i: Memory.model_validate_json(raw) for i, raw in raws["memory"].items()}
    found_conclusions = {i: Conclusion.model_validate_json(raw) for i, raw in raws["conclusion"].items()}
    found_entities = _live_entities(rt, user_id, [r.record_id for r in batch if r.namespace == "entity"])
    units_of: dict[str, list[TurnUnit]] = {}
    for unit in turn_units(semantic.turns.of_episodes(user_id, list(found_episodes))):
        units_of.setdefault(unit.episode_id, []).append(unit)
    handled: list[PendingRecord] = []
    episodes: list[Episode] = []
    memories: list[Memory] = []
    conclusions: list[Conclusion] = []
    entities: list[Entity] = []
    n_texts = 0
    for record in batch:
        episode = found_episodes.get(record.record_id) if record.namespace == "episode" else None
        memory = found_memories.get(record.record_id) if record.namespace == "memory" else None
        conclusion = found_conclusions.get(record.record_id) if record.namespace == "conclusion" else None
        entity = found_entities.get(record.record_id) if record.namespace == "entity" else None
        cost = (len(units_of.get(record.record_id, [])) or 1) if episode else int(bool(memory or conclusion or entity))
        if handled and n_texts + cost > FILL_TEXTS:
            break
        handled.append(record)
        n_texts += cost
        episodes += [episode] if episode else []
        memories += [memory] if memory else []
        conclusions += [conclusion] if conclusion else []
        entities += [entity] if entity else []
    units = [u for e in episodes for u in units_of.get(e.id, [])]
    own = [e for e in episodes if e.id not in units_of]
    texts = [episode_text(e) for e in own] + [m.text for m in memories] + [u.text for u in units]
    if not texts and not conclusions and not entities:
        return handled, 0
    n_own = len(texts) + len(conclusions)  # then the conclusions' rows, the entity names' last
    embedded = semantic.embedder.embed(texts + [c.text for c in conclusions] + [e.name for e in entities])
    if conclusions:
        stores["conclusion"].vectors.add_many(user_id, [c.id for c in conclusions], embedded[len(texts) : n_own])
    if texts:
        _index_ingested(rt, user_id, episodes, own, memories, units, embedded[: len(texts)])
    gone = _entity_names(rt, user_id, entities, embedded[n_own:]) if entities else 0
    written = {"episode": [e.id for e in episodes], "memory": [m.id for m in memories]}
    written["conclusion"] = [c.id for c in conclusions]
    filled = len(episodes) + len(memories) + len(conclusions) + len(entities)
    return handled, filled - gone - _forgotten_meanwhile(rt, user_id, written)


def _live_entities(rt: Services, user_id: str, ids: list[str]) -> dict[str, Entity]:
    """The live (not deleted) entities among ``ids``."""
    return {i: e for i, e in rt.entities.store.get_many(user_id, ids).items() if not e.deleted} if ids else {}


def _entity_names(rt: Services, user_id: str, entities: list[Entity], embedded: np.ndarray) -> int:
    """Write the entities' name vectors, then remove those of the entities deleted or forgotten
    meanwhile (returns how many) and of those renamed meanwhile, noted again (their new name's turn):
    an old name's vector does not stay beside the new name (dedup would match its look-alikes). As
    :meth:`~agtos.memory.entity_graph.EntityGraph._checked_vector`, the check follows the write: a
    rename's own vector written between them goes too, and the entity waits for the next batch (noted
    after the removal, so the note outlives it)."""
    index = rt.entities.vector_index()
    if index is None:
        raise EmbeddingError("embedder unavailable")
    index.add_many(user_id, [e.id for e in entities], embedded)
    now = _live_entities(rt, user_id, [e.id for e in entities])
    gone = [e.id for e in entities if e.id not in now]
    renamed = [e.id for e in entities if e.id in now and now[e.id].name != e.name]
    if gone or renamed:
        index.remove_many(user_id, gone + renamed)
    pending_vectors(rt).add(user_id, [("entity", i) for i in renamed], now_ms(), stored=True)
    return len(gone)


def _forgotten_meanwhile(rt: Services, user_id: str, written: dict[str, list[str]]) -> int:
    """Remove the vectors just written for records forgotten while they were computed; returns how
    many. A forget deletes the record before its index entries: a record still there now is safe
    (a forget from now on removes the vector written)."""
    semantic, gone = rt.semantic, 0
    for namespace, ids in written.items():
        store = semantic.store(namespace)
        missing = sorted(set(ids) - set(store.get_many(user_id, ids)))
        if missing:
            store.vectors.remove_many(user_id, missing)
        if namespace == "episode":
            for episode_id in missing:
                semantic.turns.delete_episode(user_id, episode_id)
        gone += len(missing)
    return gone


def _index_ingested(
    rt: Services,
    user_id: str,
    episodes: list[Episode],
    own: list[Episode],
    memories: list[Memory],
    units: list[TurnUnit],
    embedded: np.ndarray,
) -> None:
    """Write episode, memory and turn-unit vectors as ingestion does (``embedded``: the ``own``
    episodes' rows, the memories', the units')."""
    semantic = rt.semantic
    rows = episode_rows_first(episodes, own, memories, TurnBatch([], units), embedded)
    n_episodes, n_memories = len(episodes), len(memories)
    if episodes:
        semantic.store("episode").vectors.add_many(user_id, [e.id for e in episodes], rows[:n_episodes])
    if memories:
        semantic.store("memory").vectors.add_many(
            user_id, [m.id for m in memories], rows[n_episodes : n_episodes + n_memories]
        )
    unit_ids = [turn_doc_id(u.episode_id, u.position, u.chunk) for u in units]
    picked = [i for i, doc_id in enumerate(unit_ids) if record_id_pattern().fullmatch(doc_id)]  # as TurnStore.save
    if picked:
        unit_rows = rows[n_episodes + n_memories :]
        semantic.turns.vectors.add_many(user_id, [unit_ids[i] for i in picked], unit_rows[picked])
