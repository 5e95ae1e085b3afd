"""Ingestion: session/episode in → summarise → NER → distil memories → embed → index → entities.

``run_ingestion`` is the one composition of the steps. The Prefect flow (agtos.flows.ingestion_flow)
runs it with the steps as Prefect tasks (retries, observability); the API's session-end path runs
it with the plain functions below, so one request does not pay a flow run's overhead.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import Field

from agtos.memory.episodic import build_episode
from agtos.memory.privacy_controls import NotFoundError
from agtos.providers.embeddings import EmbeddingError
from agtos.schemas import Episode, IngestItem, Memory
from agtos.schemas.api import ApiModel
from agtos.schemas.records import now_ms
from agtos.storage.pending_vectors import PendingVectors
from agtos.tasks.distil import distil_memories
from agtos.tasks.entity_records import entity_text
from agtos.tasks.text import episode_text
from agtos.tasks.verbatim_turns import TurnBatch, batch_turns, episode_vectors

if TYPE_CHECKING:
    from agtos.memory.services import Services

log = logging.getLogger(__name__)

EMBEDDER_DEGRADED = "embedder unavailable, stored for keyword search only"


FORGOTTEN = "the user forgot everything after it was taken"
OPTED_OUT = "user opted out of persistence"
FORGOTTEN_WHILE_STORED = "the user forgot the episode while it was stored"


class IngestionReport(ApiModel):
    """What a batch ingestion did (the ingestion flow's result: ``model_dump(by_alias=True)``, camelCase)."""

    received: int = 0
    stored: int = 0
    memories: int = 0
    entities: int = 0
    skipped: list[dict[str, str]] = Field(default_factory=list)
    episode_ids: list[str] = Field(default_factory=list)
    degraded: str | None = None


@dataclass(frozen=True)
class IngestionSteps:
    summarise: Callable[..., tuple[list[Episode], list[dict[str, str]]]]
    recognise: Callable[..., tuple[list[Episode], list[list[Any]]]]
    distil: Callable[..., list[Memory]]
    embed: Callable[..., np.ndarray]
    index: Callable[..., Indexed]
    entities: Callable[..., int]


def summarise_items(rt: Services, items: list[IngestItem]) -> tuple[list[Episode], list[dict[str, str]]]:
    """Sessions become episodes (save heuristics applied); ready episodes pass through."""
    episodes: list[Episode] = []
    skipped: list[dict[str, str]] = []
    for item in items:
        if item.episode is not None:
            episodes.append(item.episode)
            continue
        draft = build_episode(item.user_id, item.session_id, item.turns, rt.summariser)
        if draft.decision.save:
            episodes.append(draft.episode)
        else:
            skipped.append({"sessionId": item.session_id, "reason": draft.decision.reason})
    return episodes, skipped


def recognise_entities(rt: Services, episodes: list[Episode]) -> tuple[list[Episode], list[list[Any]]]:
    """Entity mentions of each episode, and the episodes with their entity names set.

    The mentions are handed on to the entity step, so NER runs once per episode.
    """
    recognizer = rt.recognizer
    if recognizer is None or not episodes:
        return episodes, [[] for _ in episodes]
    mentions = recognizer.recognize_many([entity_text(e) for e in episodes])
    named = [
        e.model_copy(update={"entities": list(dict.fromkeys(m.text for m in found))[:256]})
        for e, found in zip(episodes, mentions, strict=True)
    ]
    return named, mentions


def distil(rt: Services, episodes: list[Episode]) -> list[Memory]:
    """Facts and preferences of the batch as semantic memories (one per fact of each episode: the
    writer merges a fact said in several episodes in their order, :func:`distil_memories`)."""
    return distil_memories(episodes)


def embed_texts(rt: Services, texts: list[str]) -> np.ndarray:
    """One embedding call for the whole batch, each distinct text embedded once (a fact or a short
    turn said in several sessions of a batch: its rows are copies of one row)."""
    distinct = list(dict.fromkeys(texts))
    if len(distinct) == len(texts):
        return rt.semantic.embedder.embed(texts)
    row = {text: at for at, text in enumerate(distinct)}
    return rt.semantic.embedder.embed(distinct)[[row[t] for t in texts]]


@dataclass(frozen=True)
class Indexed:
    """What the index step wrote: memories written, and the users it wrote nothing for (opted out)."""

    memories: int
    refused: frozenset[str]


def index_batch(
    rt: Services,
    episodes: list[Episode],
    memories: list[Memory],
    vectors: np.ndarray | None,
    turns: TurnBatch,
    *,
    dreaming: frozenset[str] = frozenset(),
) -> Indexed:
    """Store episodes, memories and the episodes' verbatim turns in Redis and every index.
    ``vectors``: the episode rows, then the memory rows, then the turn units' rows.

    Each user's episode records are written first, in one atomic step with the check of the opt-out
    list (:meth:`EpisodeStore.save_unless_opted_out`): for a user who opted out by then nothing of the
    batch is written (no stored episode is overwritten: an import's grown session keeps its earlier
    version), and the user is named in ``refused``. A user in ``dreaming`` (session ends: the Dreamer
    reads their episodes next) is marked "dream pending" in that same step (:mod:`agtos.storage.dream_markers`)."""
    refused = frozenset(
        u
        for u in dict.fromkeys(e.user_id for e in episodes)
        if not _save_unless_opted_out(rt, u, episodes, u in dreaming)
    )
    rows = [
        at
        for at, user_id in enumerate(
            [*(e.user_id for e in episodes), *(m.user_id for m in memories), *(u.user_id for u in turns.units)]
        )
        if user_id not in refused
    ]
    vectors = None if vectors is None else vectors[rows]
    episodes = [e for e in episodes if e.user_id not in refused]
    memories = [m for m in memories if m.user_id not in refused]
    units = [u for u in turns.units if u.user_id not in refused]
    turns = TurnBatch([t for t in turns.turns if t.user_id not in refused], units)
    n = len(episodes) + len(memories)
    written = rt.semantic.store_batch(episodes, memories, None if vectors is None else vectors[:n], saved=True)
    if turns.turns:
        rt.semantic.turns.save(turns.turns, turns.units, None if vectors is None else vectors[n:])
    return Indexed(written, refused)


def _save_unless_opted_out(rt: Services, user_id: str, episodes: list[Episode], dreaming: bool) -> bool:
    own = [e for e in episodes if e.user_id == user_id]
    mark = rt.dream_markers.new_mark(user_id) if dreaming else None
    return rt.episodes.save_unless_opted_out(user_id, own, rt.opt_outs.key, mark)


def upsert_entities(rt: Services, episodes: list[Episode], mentions: list[list[Any]]) -> int:
    """Entities and relationships of the stored episodes into the entity graph (deduplicated)."""
    if rt.recognizer is None or not episodes:
        return 0
    return rt.entities.ingest(episodes, mentions).entities


INLINE_STEPS = IngestionSteps(summarise_items, recognise_entities, distil, embed_texts, index_batch, upsert_entities)


def dreaming_steps(users: Iterable[str]) -> IngestionSteps:
    """:data:`INLINE_STEPS` for session ends: ``users`` are marked "dream pending" with their episodes'
    write, so a Dreamer run that never starts (Redis away, the process killed after the store) is left to
    the maintenance sweep (:mod:`agtos.memory.dream_retry`)."""
    return replace(INLINE_STEPS, index=functools.partial(index_batch, dreaming=frozenset(users)))


def episode_rows_first(
    episodes: list[Episode], own: list[Episode], memories: list[Memory], turns: TurnBatch, embedded: np.ndarray
) -> np.ndarray:
    """``embedded`` (the ``own`` episodes' rows, the memories', the turn units') as ``index_batch``
    takes it: a row per episode first, an episode with turns getting one made of its turns' and
    facts' vectors (:func:`episode_vectors`) instead of an embedding of its summary."""
    rest = embedded[len(own) :]
    if not episodes:
        return rest
    made = episode_vectors(turns.units, rest[len(memories) :], memories, rest[: len(memories)])
    made |= dict(zip((e.id for e in own), embedded[: len(own)], strict=True))
    return np.concatenate([np.stack([made[e.id] for e in episodes]), rest])


def run_ingestion(rt: Services, items: list[IngestItem], steps: IngestionSteps = INLINE_STEPS) -> IngestionReport:
    """The ingestion DAG: summarise → NER → distil → embed (one batch call) → index → entities.

    If embedding still fails after its retries, the batch is indexed for keyword search
    only, the report says so and its episodes and memories are noted as waiting for vectors
    (:func:`note_missing_vectors`; :mod:`agtos.memory.vector_repair` fills them in later).
    """
    report = IngestionReport(received=len(items))
    start = rt.privacy.clock_ms()
    items = without_forgotten(report, items, start, rt.privacy.forget_marks(i.user_id for i in items))
    episodes, skipped = steps.summarise(rt, items)
    report.skipped += skipped
    if not episodes:
        return report
    episodes, mentions = steps.recognise(rt, episodes)
    memories = steps.distil(rt, episodes)
    turns = TurnBatch.of(batch_turns(items, episodes))
    with_turns = {u.episode_id for u in turns.units}
    own = [e for e in episodes if e.id not in with_turns]  # an episode without turns: its text is embedded
    texts = [episode_text(e) for e in own] + [m.text for m in memories] + [u.text for u in turns.units]
    vectors: np.ndarray | None
    try:
        vectors = episode_rows_first(episodes, own, memories, turns, steps.embed(rt, texts))
    except EmbeddingError as exc:  # the reason goes to the log only: it names the service's URL
        log.warning("embedder unavailable, %d episodes stored for keyword search only: %s", len(episodes), exc)
        report.degraded = EMBEDDER_DEGRADED
        vectors = None
    indexed = steps.index(rt, episodes, memories, vectors, turns)
    report.memories = indexed.memories
    refused = indexed.refused  # opted out before the batch wrote: nothing of theirs was written
    report.skipped += [{"sessionId": e.session_id, "reason": OPTED_OUT} for e in episodes if e.user_id in refused]
    mentions = [m for e, m in zip(episodes, mentions, strict=True) if e.user_id not in refused]
    episodes = [e for e in episodes if e.user_id not in refused]
    memories = [m for m in memories if m.user_id not in refused]
    if vectors is None:  # after the records exist: a fill running meanwhile would skip them as gone
        note_missing_vectors(rt, episodes, memories)
    report.stored = len(episodes)
    report.episode_ids = [e.id for e in episodes]
    try:
        report.entities = steps.entities(rt, episodes, mentions)
    except Exception:  # derived data: the stored batch stands without it (no 5xx, no re-ingest)
        log.exception("entity graph not updated for %d episodes", len(episodes))
        report.degraded = report.degraded or "entity graph not updated (the server log has the reason)"
    # forgot everything while this batch was written: what it wrote for them is deleted again
    gone = rt.privacy.late_writes_removed(dict.fromkeys((e.user_id for e in episodes), start))
    if gone:
        without_forgotten(report, items, start, dict.fromkeys(gone, start))
        report.episode_ids = [e.id for e in episodes if e.user_id not in gone]
        report.stored = len(report.episode_ids)
    vanished = forget_vanished(rt, [e for e in episodes if e.id in set(report.episode_ids)])
    if vanished:
        report.skipped += [{"sessionId": e.session_id, "reason": FORGOTTEN_WHILE_STORED} for e in vanished]
        report.episode_ids = [i for i in report.episode_ids if i not in {e.id for e in vanished}]
        report.stored = len(report.episode_ids)
    return report


def forget_vanished(rt: Services, episodes: list[Episode]) -> list[Episode]:
    """The batch's ``episodes`` whose record is gone after every write of the run (one MGET per user):
    forgotten one by one while the batch wrote (the record first, then the index entries, turns, facts
    and entities written after it). Each is forgotten again, so nothing the run wrote for it stays."""
    by_user: dict[str, list[str]] = {}
    for episode in episodes:
        by_user.setdefault(episode.user_id, []).append(episode.id)
    kept = {(u, i) for u, ids in by_user.items() for i in rt.episodes.existing_ids(u, ids)}
    vanished = [e for e in episodes if (e.user_id, e.id) not in kept]
    for episode in vanished:
        with contextlib.suppress(NotFoundError):  # the run wrote nothing for it after the forget
            rt.privacy.forget_item(episode.user_id, "episode", episode.id)
    return vanished


def without_forgotten(
    report: IngestionReport, items: list[IngestItem], start: int, marks: dict[str, int]
) -> list[IngestItem]:
    """``items`` less those whose user forgot everything (``marks``: user id → ms) after the item
    was taken (its ``since_ms``, else ``start``); those are noted as skipped."""
    gone = [i for i in items if marks.get(i.user_id, -1) >= (start if i.since_ms is None else i.since_ms)]
    if not gone:
        return items
    report.skipped += [{"sessionId": i.session_id, "reason": FORGOTTEN} for i in gone]
    return [i for i in items if i not in gone]


def pending_vectors(rt: Services) -> PendingVectors:
    """The per-user sets of records stored without vectors."""
    return PendingVectors(rt.connector, rt.keys)


def note_missing_vectors(rt: Services, episodes: list[Episode], memories: list[Memory]) -> None:
    """Note a batch stored without vectors (its episodes, their turns with them, and its memories), per user."""
    by_user: dict[str, list[tuple[str, str]]] = {}
    for episode in episodes:
        by_user.setdefault(episode.user_id, []).append(("episode", episode.id))
    for memory in memories:
        by_user.setdefault(memory.user_id, []).append(("memory", memory.id))
    pending, at = pending_vectors(rt), now_ms()
    for user_id, records in by_user.items():
        pending.add(user_id, records, at, stored=True)  # one forgotten meanwhile: no note names it
