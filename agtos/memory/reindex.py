"""``agtos reindex``: vectors of the current embedder for records whose vectors another one made.

After ``AGTOS_EMBEDDING_PROVIDER``/``_MODEL`` change, a user's vector indexes still hold the old
embedder's vectors (their *space*, :mod:`agtos.storage.vector_spaces`): searches skip them (keyword
search finds those records) and the first write of new vectors drops them. A reindex switches each
stale index to the current space, then embeds every record of the user that has no vector (episodes
with the units of their stored turns, memories, conclusions), ``BATCH`` records a round, through
:func:`agtos.memory.vector_repair.fill_user` (as vectors missed while the embedder was down), then so
the names of the user's live entities without one (the ``entity`` index, alias dedup by similarity): bounded
memory, idempotent (records with a vector are skipped) and resumable (an index keeps its ``reindex``
note until all its user's records are done). ``/health`` names the users still waiting
(:func:`stale_line`); searches of their records say so (``degraded``, :data:`agtos.memory.recall.STALE_VECTORS`).
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING

from agtos.memory.vector_repair import fill_user
from agtos.schemas.records import now_ms
from agtos.storage.keys import record_id_pattern
from agtos.storage.pending_vectors import PendingVectors
from agtos.storage.redis_conn import as_text
from agtos.storage.turns import turn_doc_id
from agtos.storage.vector_index import VectorIndex
from agtos.storage.vector_spaces import IndexSpace, describe, index_spaces, is_stale
from agtos.tasks.verbatim_turns import turn_units

if TYPE_CHECKING:
    from agtos.memory.services import Services

RECORD_NAMESPACES = ("episode", "memory", "conclusion")  # embedded from their texts (turns with episodes)
ENTITY_NAMESPACE = "entity"  # entity-name vectors (:class:`agtos.memory.entity_graph.EntityGraph`)
TEXT_INDEX_NAMESPACES = (*RECORD_NAMESPACES, "turn")  # the semantic tier's indexes
INDEX_NAMESPACES = (*TEXT_INDEX_NAMESPACES, ENTITY_NAMESPACE)
BATCH = 128  # records noted and embedded a round
STALE_TTL_S = 15.0  # /health reuses a count this long
STALE_FIRST_WAIT_S = 1.0  # the longest /health waits for a process's first count


@dataclass
class ReindexReport:
    """What a reindex did: users done, indexes whose old vectors were dropped, records given vectors,
    records gone meanwhile, and why it stopped early (None: it did not)."""

    users: int = 0
    switched: int = 0
    embedded: int = 0
    skipped: int = 0
    error: str | None = None


def vector_indexes(rt: Services) -> dict[str, VectorIndex] | None:
    """Every vector index the product writes, by namespace (None while the embedder is unavailable)."""
    entities = rt.entities.vector_index()
    if entities is None:
        return None
    return {ns: rt.semantic.store(ns).vectors for ns in TEXT_INDEX_NAMESPACES} | {ENTITY_NAMESPACE: entities}


def current_space(rt: Services) -> str | None:
    """The space of the configured embedder's vectors (None while it is unavailable)."""
    return rt.semantic.store(RECORD_NAMESPACES[0]).vectors.space if rt.semantic.embedder_available() else None


def stale_indexes(rt: Services, users: list[str] | None = None) -> list[IndexSpace]:
    """The users' indexes (every user's by default) that hold another embedder's vectors or whose
    records still wait for a reindex; empty while the embedder is unavailable (no current space)."""
    indexes = vector_indexes(rt)
    if indexes is None:
        return []
    current = {ns: index.space for ns, index in indexes.items()}
    if None in current.values():
        return []
    legacy = {ns: index.legacy_space() for ns, index in indexes.items()}
    found = index_spaces(
        rt.connector, rt.keys, users if users is not None else rt.users.known(), INDEX_NAMESPACES, legacy
    )
    return [i for i in found if is_stale(i.space, i.reindex, current[i.namespace])]


@dataclass
class _StaleCount:
    """One process's last count for ``/health`` and the recount in flight."""

    at: float = float("-inf")
    line: str | None = None
    counted: bool = False
    running: Future[str | None] | None = None


def stale_line(rt: Services, first_wait_s: float = STALE_FIRST_WAIT_S) -> str | None:
    """``/health``'s line on users whose vectors another embedder made (None: there are none). The
    count (a walk of every user's index metas) runs in a worker thread at most every ``STALE_TTL_S``
    seconds; a caller gets the last count at once, only the first one waits (``first_wait_s`` at most)."""
    with _STALE_LOCK:
        count = _STALE.setdefault(rt, _StaleCount())
        if time.monotonic() - count.at >= STALE_TTL_S and count.running is None:
            count.running = _COUNTS.submit(_recount, rt, count)
        running, counted = count.running, count.counted
    if running is not None and not counted:
        with contextlib.suppress(FutureTimeout):  # the count goes on; this caller gets none yet
            running.result(timeout=first_wait_s)
    return count.line


def _recount(rt: Services, count: _StaleCount) -> str | None:
    try:
        line = describe_stale(stale_indexes(rt), current_space(rt))
        with _STALE_LOCK:
            count.at, count.line, count.counted = time.monotonic(), line, True
        return line
    finally:
        with _STALE_LOCK:
            count.running = None


_STALE: weakref.WeakKeyDictionary[Services, _StaleCount] = weakref.WeakKeyDictionary()
_STALE_LOCK = threading.Lock()
_COUNTS = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stale-vectors")


def describe_stale(stale: list[IndexSpace], current: str | None = None) -> str | None:
    """``vectors of 2 users made by ollama:a (384-d): run `agtos reindex``` (None for none): the makers
    are the spaces other than ``current`` of the vectors held and of those a switch dropped."""
    if not stale:
        return None
    users = len({i.user_id for i in stale})
    spaces = {s for i in stale for s in (i.space, i.reindex) if s is not None and s != current}
    makers = ", ".join(describe(space) for space in sorted(spaces or {"?"}))
    return f"vectors of {users} user{'s' if users != 1 else ''} made by {makers}: run `agtos reindex`"


def describe_indexes(stale: list[IndexSpace]) -> str | None:
    """``users waiting per index: entity 2, episode 3, turn 3`` (None for none)."""
    counts = ", ".join(f"{ns} {n}" for ns, n in sorted(Counter(i.namespace for i in stale).items()))
    return f"users waiting per index: {counts}" if counts else None


def reindex(rt: Services, stale: list[IndexSpace], on_user: Callable[[str], None] | None = None) -> ReindexReport:
    """Reindex the users of the ``stale`` indexes (:func:`stale_indexes`), ``on_user(user)`` as each
    starts. Stops at the first embedder failure (``error``): a later run goes on from there."""
    report = ReindexReport()
    waiting: dict[str, list[str]] = {}
    for index in stale:
        waiting.setdefault(index.user_id, []).append(index.namespace)
    for user_id, namespaces in waiting.items():
        if on_user is not None:
            on_user(user_id)
        if not reindex_user(rt, user_id, namespaces, report):
            break
        report.users += 1
    return report


def reindex_user(rt: Services, user_id: str, namespaces: list[str], report: ReindexReport) -> bool:
    """One user's reindex: the stale ``namespaces`` switched to the current space, then every record
    without a vector embedded (``BATCH`` a round); True when all were done (their ``reindex`` notes
    cleared), False when the embedder failed (``report.error``)."""
    if rt.privacy.is_opted_out(user_id, fresh=True):
        return True  # nothing of an opted-out user is written (their indexes stay as they are)
    indexes = vector_indexes(rt)
    if indexes is None:
        report.error = "embedder unavailable"
        return False
    report.switched += sum(indexes[ns].switch(user_id) for ns in namespaces)
    for ns in RECORD_NAMESPACES:
        store = rt.semantic.store(ns)
        for ids in _batches(store.bm25.ids(user_id), BATCH):
            missing = store.vectors.missing(user_id, ids)
            if ns == "episode":
                missing += _lacking_turns(rt, user_id, [i for i in ids if i not in missing])
            if not _fill_noted(rt, user_id, ns, missing, report):
                return False
    # the names of the user's live entities (an entity's aliases name it again), as the repair fills them
    names = (as_text(entity_id) for _, entity_id in rt.connector.scan_hash(rt.entities.store.index(user_id, "alias")))
    for ids in _batches(names, BATCH):
        missing = indexes[ENTITY_NAMESPACE].missing(user_id, list(dict.fromkeys(ids)))
        if not _fill_noted(rt, user_id, ENTITY_NAMESPACE, missing, report):
            return False
    for ns in namespaces:
        indexes[ns].reindex_done(user_id)
    return True


def _fill_noted(rt: Services, user_id: str, namespace: str, missing: list[str], report: ReindexReport) -> bool:
    """Note the user's ``missing`` vectors of ``namespace`` and fill them as the repair does
    (:func:`~agtos.memory.vector_repair.fill_user`); False when the embedder failed (``report.error``)."""
    if not missing:
        return True
    PendingVectors(rt.connector, rt.keys).add_of_users(
        namespace, [(user_id, doc_id) for doc_id in missing], now_ms(), stored=True
    )
    filled = fill_user(rt, user_id, len(missing))
    report.embedded += filled.filled
    report.skipped += filled.skipped
    if filled.error:
        report.error = filled.error
        return False
    return True


def _lacking_turns(rt: Services, user_id: str, episode_ids: list[str]) -> list[str]:
    """The episodes among ``episode_ids`` a unit of whose stored turns has no vector (a reindex stopped
    between an episode's vector and its turns')."""
    turns = rt.semantic.turns
    units = {
        turn_doc_id(u.episode_id, u.position, u.chunk): u.episode_id
        for u in turn_units(turns.of_episodes(user_id, episode_ids))
    }
    indexed = [doc_id for doc_id in units if record_id_pattern().fullmatch(doc_id)]  # as TurnStore.save
    return list(dict.fromkeys(units[doc_id] for doc_id in turns.vectors.missing(user_id, indexed)))


def _batches(ids: Iterator[str], size: int) -> Iterator[list[str]]:
    while batch := list(islice(ids, size)):
        yield batch
