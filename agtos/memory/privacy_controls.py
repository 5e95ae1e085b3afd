"""Privacy controls: forget one record or everything of a user, and per-user opt-out.

Forgetting removes the records, their index entries (vector, BM25, entity) and the
in-process caches; an opted-out user keeps working memory only and nothing of theirs is
written to Redis. The opt-out list itself is a global set outside every user's key space.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from agtos.memory.conclusion_lock import delete_conclusion
from agtos.memory.episode_cascade import forget_derived, forget_entities_of
from agtos.memory.session_ends import SessionEnds
from agtos.storage.ingest_queue import IngestQueue
from agtos.storage.keys import check_record_id
from agtos.storage.pending_vectors import PendingVectors
from agtos.storage.redis_conn import StorageUnavailable
from agtos.tasks.polarity import polarity
from agtos.tasks.text import normalise

if TYPE_CHECKING:
    from agtos.memory.services import Services

FORGETTABLE = ("episode", "memory", "conclusion", "entity")
OPT_OUT_CACHE_S = 2.0


class NotFoundError(LookupError):
    """The record to forget does not exist for this user."""


class OptedOutError(PermissionError):
    """The user opted out of persistence; nothing may be written for them."""


class Privacy:
    def __init__(self, services: Services) -> None:
        self.c = services
        self._opt_out_cache: dict[str, tuple[float, bool]] = {}

    # -- opt-out ----------------------------------------------------------------------
    def is_opted_out(self, user_id: str, fresh: bool = False) -> bool:
        """Cached for a moment (``fresh``: read now, as the writers of queued or batched data do: an
        opt-out made in another process a moment ago counts); if Redis is down we cannot write
        anyway, so False is safe."""
        now = time.monotonic()
        hit = self._opt_out_cache.get(user_id)
        if hit and not fresh and now - hit[0] < OPT_OUT_CACHE_S:
            return hit[1]
        try:
            value = self.c.opt_outs.contains(user_id)
        except StorageUnavailable:
            return hit[1] if hit else False
        self._opt_out_cache[user_id] = (now, value)
        return value

    def opt_out_setting(self, user_id: str) -> bool:
        """The user's setting as Redis holds it now (``GET /privacy``): ``StorageUnavailable`` when it
        cannot be read, never a guess (:meth:`is_opted_out` says False then, safe only for writers)."""
        value = self.c.opt_outs.contains(user_id)
        self._opt_out_cache[user_id] = (time.monotonic(), value)
        return value

    def set_opt_out(self, user_id: str, opted_out: bool, forget_existing: bool = False) -> dict[str, Any]:
        self.c.opt_outs.set(user_id, opted_out)
        self._opt_out_cache[user_id] = (time.monotonic(), opted_out)
        if opted_out:  # the idle sweep no longer ends their live sessions: none of it is stored
            self.c.journal.forget_user(user_id)
        forgotten = self.forget_all(user_id)["keysDeleted"] if opted_out and forget_existing else 0
        return {"userId": user_id, "optOut": opted_out, "keysDeleted": forgotten}

    def require_persistence(self, user_id: str) -> None:
        if self.is_opted_out(user_id):
            raise OptedOutError(f"user {user_id!r} opted out of persistence; only working memory is kept")

    # -- forgetting -------------------------------------------------------------------
    def forget_item(self, user_id: str, kind: str, item_id: str) -> dict[str, Any]:
        """Delete one record from Redis and every index; NotFoundError if it does not exist."""
        if kind not in FORGETTABLE:
            raise ValueError(f"kind must be one of {FORGETTABLE}")
        check_record_id(item_id, f"{kind} id")
        if kind == "conclusion":
            found = delete_conclusion(self.c, user_id, item_id)
        elif kind == "entity":
            found = self.c.entities.forget(user_id, item_id)
        else:
            episode = self.c.episodes.get(user_id, item_id) if kind == "episode" else None
            # an episode's record counts: a batch writing it may not have indexed it yet (ingestion_pipeline)
            found = self.c.semantic.delete(kind, user_id, item_id) or episode is not None
            if episode is not None:  # a retried end's record names it (agtos/memory/session_ends.py)
                SessionEnds(self.c.connector, self.c.keys, 0).forget_episode(user_id, episode.session_id, item_id)
        derived = None
        if kind == "episode":  # even when the record is gone already: the marker and what was learnt name it
            self.c.dream_markers.forget(user_id, item_id)
            derived = forget_derived(self.c, user_id, item_id)
            found = found or any(derived.values())
        elif kind == "memory" and found:  # one posted through the API fed the entity graph under its id
            forget_entities_of(self.c, user_id, item_id)
        if not found:
            raise NotFoundError(f"no {kind} {item_id!r} for this user")
        self._clear_query_cache()
        return {"forgotten": {"kind": kind, "id": item_id}, "derived": derived}

    def forget_all(self, user_id: str) -> dict[str, Any]:
        """Every key of the user (records, indexes, journals, counters), their session ends still
        queued or dead-lettered, plus in-process state. Marked first (:meth:`late_writes_removed`):
        work that took the user's data before this stores nothing of it after."""
        self.c.fences.mark(user_id)
        deleted = self._delete_stored(user_id)
        self.c.journal.forget_user(user_id)  # the global index of live journals names them
        IngestQueue(self.c.connector, self.c.keys).drop_where(lambda job: _job_user(job) == user_id)
        self.c.working.drop(user_id)
        self._clear_query_cache()
        return {"forgotten": "all", "userId": user_id, "keysDeleted": deleted}

    def clock_ms(self) -> int:
        """The Redis clock: when a piece of work takes a user's data (compare with forget-all's mark)."""
        return self.c.fences.now_ms()

    def forget_marks(self, user_ids: Iterable[str]) -> dict[str, int]:
        """When each of these users last forgot everything (Redis clock, ms), for those who did lately."""
        return self.c.fences.marks(user_ids)

    def late_writes_removed(self, since: Mapping[str, int]) -> set[str]:
        """For work that read users' data at ``since`` (user id → ms) and has written since: the users
        who forgot everything meanwhile, with whatever was written for them deleted again."""
        gone = self.c.fences.forgotten_since(since)
        for user_id in gone:
            self._delete_stored(user_id)
        return gone

    def _delete_stored(self, user_id: str) -> int:
        deleted = self.c.users.delete_all(user_id)
        # the global list of users with records waiting for vectors names them (their set went above)
        PendingVectors(self.c.connector, self.c.keys).forget_user(user_id)
        return deleted

    def _clear_query_cache(self) -> None:
        """Query embeddings and the contradiction heuristics' text caches are keyed by text: drop
        them so no forgotten text lingers in memory."""
        polarity.cache_clear()
        normalise.cache_clear()
        embedder = self.c.semantic._embedder
        cache = getattr(embedder, "cache", None)
        if cache is not None and hasattr(cache, "clear"):
            cache.clear()


def _job_user(payload: bytes) -> str | None:
    """The user a queued session end belongs to (its JSON's ``user_id``); None if unreadable."""
    try:
        job = json.loads(payload)
    except ValueError:
        return None
    return job.get("user_id") if isinstance(job, dict) else None
