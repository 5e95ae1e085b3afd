"""The durable ingestion queue: one Redis stream with a consumer group.

A session end adds its job (the turns to ingest) with ``XADD``; workers read new entries with
``XREADGROUP``, acknowledge and delete them when done (``XACK`` + ``XDEL``, so ``XLEN`` is the
depth), and take over entries left pending by a dead consumer, or handed back after a failure,
with ``XAUTOCLAIM``. An entry delivered ``max_attempts`` times without success moves to a
dead-letter stream with its last error. Workers beat a heartbeat hash, so ``/health`` can tell
whether one is alive, and add their job times, so a session end can estimate its wait. A
forget-all deletes the user's entries from both streams (:meth:`IngestQueue.drop_where`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis
from redis.typing import EncodableT, FieldT, StreamIdT

from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector, as_text

log = logging.getLogger(__name__)

GROUP = "ingest-workers"
DEAD_LETTERS_KEPT = 10_000
ALIVE_WITHIN_S = 15.0  # a worker whose heartbeat is older counts as gone
ERROR_CHARS = 2_000
DROP_PAGE = 500  # entries read per XRANGE when a forget walks the streams


@dataclass(frozen=True)
class QueueEntry:
    """One job as delivered: its stream id, payload and how often it was delivered (1 = first time)."""

    id: str
    payload: bytes
    deliveries: int


def entry_ms(entry_id: str) -> int:
    """The milliseconds part of a stream id: when the entry was added (Redis server clock)."""
    return int(entry_id.split("-", 1)[0])


class IngestQueue:
    def __init__(self, connector: RedisConnector, keys: GlobalKeys) -> None:
        self.connector = connector
        self.stream = keys.meta("ingest-queue")
        self.dead = keys.meta("ingest-dead")
        self.errors = keys.meta("ingest-errors")  # entry id -> last error (until acked or dead)
        self.stats_key = keys.meta("ingest-stats")
        self.workers_key = keys.meta("ingest-workers")  # consumer -> last heartbeat (unix s)
        self._group_ready = False

    # -- producer ----------------------------------------------------------------------
    def ensure_group(self) -> None:
        """Create the stream and its consumer group (from the first entry) unless they exist."""
        if self._group_ready:
            return

        def op(r: redis.Redis) -> None:
            try:
                r.xgroup_create(self.stream, GROUP, id="0", mkstream=True)
            except redis.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

        self.connector.run(op)
        self._group_ready = True

    def enqueue(self, payload: bytes) -> tuple[str, int]:
        """Add a job; returns its entry id and the queue depth including it (its position)."""
        self.ensure_group()

        def op(r: redis.Redis) -> tuple[str, int]:
            pipe = r.pipeline(transaction=True)
            pipe.xadd(self.stream, {"job": payload})
            pipe.xlen(self.stream)
            entry_id, depth = pipe.execute()
            return as_text(entry_id), int(depth)

        return self.connector.run(op)

    def contains(self, entry_id: str) -> bool:
        """True while the entry is queued or being worked on (done and dead entries are deleted)."""
        return bool(self.connector.run(lambda r: r.xrange(self.stream, entry_id, entry_id, count=1)))

    def entries(self, entry_ids: list[str]) -> dict[str, QueueEntry]:
        """Those of these entries still in the stream (queued, or in a worker's hands), by id: one
        ``XRANGE id id`` each, in one pipeline (a read's catch-up of its user's ends)."""
        if not entry_ids:
            return {}

        def op(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            for entry_id in entry_ids:
                pipe.xrange(self.stream, entry_id, entry_id, count=1)
            return list(pipe.execute())

        found = self.connector.run(op)
        return {as_text(i): QueueEntry(as_text(i), _job(fields), 1) for reply in found for i, fields in reply or []}

    # -- consumer ----------------------------------------------------------------------
    def read(self, consumer: str, count: int, block_ms: int) -> list[QueueEntry]:
        """New entries for ``consumer``, waiting up to ``block_ms`` for one (first delivery)."""
        self.ensure_group()
        reply: Any = self.connector.run(
            lambda r: r.xreadgroup(GROUP, consumer, {self.stream: ">"}, count=count, block=block_ms or None)
        )
        return [QueueEntry(as_text(i), _job(fields), 1) for _stream, entries in reply or [] for i, fields in entries]

    def claim_stale(self, consumer: str, min_idle_ms: int, count: int) -> list[QueueEntry]:
        """Entries pending longer than ``min_idle_ms`` (a dead consumer's, or handed back after a
        failure), now owned by ``consumer``, with their delivery counts (this one included)."""
        self.ensure_group()

        def op(r: redis.Redis) -> list[QueueEntry]:
            reply = r.xautoclaim(self.stream, GROUP, consumer, min_idle_ms, "0-0", count=count)
            claimed = [(as_text(i), fields) for i, fields in reply[1] if fields is not None]
            entries = []
            for entry_id, fields in claimed:
                info = r.xpending_range(self.stream, GROUP, min=entry_id, max=entry_id, count=1)
                deliveries = int(info[0]["times_delivered"]) if info else 1
                entries.append(QueueEntry(entry_id, _job(fields), deliveries))
            return entries

        return self.connector.run(op)

    def ack(self, entry_id: str, job_s: float, caught_up: bool = False) -> bool:
        """The job is done: acknowledge and delete the entry, count it and its time (``caught_up``: as
        a read's catch-up's too), once: a job done twice (a read's catch-up beside a worker; a worker
        finishing an entry a forget dropped) counts only where its entry was still there to delete.
        True when this call deleted it."""

        def op(r: redis.Redis) -> bool:
            pipe = r.pipeline(transaction=True)
            pipe.xack(self.stream, GROUP, entry_id)
            pipe.xdel(self.stream, entry_id)
            _, deleted = pipe.execute()
            r.hdel(self.errors, entry_id)
            if not deleted:
                return False
            stats = r.pipeline(transaction=True)
            stats.hincrby(self.stats_key, "done", 1)
            stats.hincrbyfloat(self.stats_key, "jobSeconds", job_s)
            if caught_up:
                stats.hincrby(self.stats_key, "caughtUp", 1)
            stats.execute()
            return True

        return bool(self.connector.run(op))

    def hold(self, consumer: str, entry_ids: list[str]) -> None:
        """``consumer`` is still working on these entries: their idle time starts again (``XCLAIM`` …
        ``JUSTID``, no delivery counted), so no other worker takes them over as stale while a long job
        runs. An entry acked or dropped meanwhile is left as it is."""
        ids: list[StreamIdT] = list(entry_ids)
        if ids:
            self.connector.run(lambda r: r.xclaim(self.stream, GROUP, consumer, 0, ids, justid=True))

    def retry_later(
        self, entry_id: str, consumer: str, delay_ms: int, claim_idle_ms: int, error: str, uncount: int | None = None
    ) -> None:
        """Hand a failed entry back: it becomes claimable (by any worker) after ``delay_ms``.

        ``XCLAIM … IDLE`` ages the entry without counting a delivery (``JUSTID``); the next
        ``XAUTOCLAIM`` counts it. ``uncount``: the entry's deliveries, this one not counted (it failed
        for a reason not its own: it waited too long for a lock), so it never goes to the dead letters
        for it."""
        idle = max(0, claim_idle_ms - delay_ms)
        retries = None if uncount is None else max(0, uncount - 1)

        def op(r: redis.Redis) -> None:
            r.hset(self.errors, entry_id, error[:ERROR_CHARS])
            r.xclaim(self.stream, GROUP, consumer, 0, [entry_id], idle=idle, retrycount=retries, justid=True)
            r.hincrby(self.stats_key, "retries", 1)

        self.connector.run(op)

    def dead_letter(self, entry: QueueEntry, reason: str, error: str | None = None) -> None:
        """Move an entry that keeps failing to the dead-letter stream, with ``error`` (else the
        last error a worker recorded for it)."""

        def op(r: redis.Redis) -> None:
            last = error[:ERROR_CHARS] if error is not None else r.hget(self.errors, entry.id)
            fields: dict[FieldT, EncodableT] = {
                "job": entry.payload,
                "entry": entry.id,
                "deliveries": entry.deliveries,
                "reason": reason,
                "error": last or b"",
            }
            r.xadd(self.dead, fields, maxlen=DEAD_LETTERS_KEPT, approximate=True)
            pipe = r.pipeline(transaction=True)
            pipe.xack(self.stream, GROUP, entry.id)
            pipe.xdel(self.stream, entry.id)
            pipe.execute()
            r.hdel(self.errors, entry.id)

        self.connector.run(op)
        log.error("ingest job %s dead-lettered after %d deliveries: %s", entry.id, entry.deliveries, reason)

    def dead_letters(self, limit: int = 20) -> list[dict[str, str]]:
        """The newest dead letters (entry id, deliveries, reason, error; not the payload)."""
        reply: Any = self.connector.run(lambda r: r.xrevrange(self.dead, count=limit))
        return [
            {k: as_text(fields.get(k.encode(), b"")) for k in ("entry", "deliveries", "reason", "error")}
            | {"id": as_text(i)}
            for i, fields in reply
        ]

    def drop_where(self, owned: Callable[[bytes], bool]) -> int:
        """Delete every queued, in-progress and dead-lettered entry whose job ``owned`` says yes to
        (a forgotten user's: the entries hold their turns); returns how many. A worker holding one
        finishes it (its ack of a deleted entry is a no-op); forget's fence drops what it stores."""

        def op(r: redis.Redis) -> int:
            dropped = 0
            for stream in (self.stream, self.dead):
                start = "-"
                while True:
                    page: Any = r.xrange(stream, start, "+", count=DROP_PAGE)
                    ids = [as_text(i) for i, fields in page if owned(_job(fields))]
                    if ids:
                        pipe = r.pipeline(transaction=True)
                        if stream == self.stream:
                            pipe.xack(stream, GROUP, *ids)
                            pipe.hdel(self.errors, *ids)
                        pipe.xdel(stream, *ids)
                        pipe.execute()
                        dropped += len(ids)
                    if len(page) < DROP_PAGE:
                        break
                    start = "(" + as_text(page[-1][0])
            return dropped

        return self.connector.run(op)  # no ensure_group: a forget creates no stream

    def heartbeat(self, consumer: str) -> None:
        self.connector.run(lambda r: r.hset(self.workers_key, consumer, repr(time.time())))

    def leave(self, consumer: str) -> None:
        """A worker that stops cleanly: drop its heartbeat and (when it holds nothing) its consumer."""

        def op(r: redis.Redis) -> None:
            r.hdel(self.workers_key, consumer)
            try:
                held = r.xpending_range(self.stream, GROUP, min="-", max="+", count=1, consumername=consumer)
                if not held:
                    r.xgroup_delconsumer(self.stream, GROUP, consumer)
            except redis.ResponseError as exc:  # no group yet (stopped before its first read): nothing to leave
                if not str(exc).startswith("NOGROUP"):
                    raise

        self.connector.run(op)

    # -- state -------------------------------------------------------------------------
    def stats(self, alive_within_s: float = ALIVE_WITHIN_S) -> dict[str, Any]:
        """Depth, in-progress entries, age of the oldest, dead letters, live workers, mean job time,
        ends stored by reads' catch-ups."""

        def op(r: redis.Redis) -> list[Any]:
            clock = r.time()  # TIME names no key: a cluster pipeline refuses it
            pipe = r.pipeline(transaction=False)
            pipe.xlen(self.stream)
            pipe.xrange(self.stream, count=1)
            pipe.xlen(self.dead)
            pipe.hgetall(self.stats_key)
            pipe.hgetall(self.workers_key)
            return [clock, *pipe.execute()]

        (secs, micros), depth, first, dead, stats, beats = self.connector.run(op)
        now = secs + micros / 1e6
        oldest = max(0.0, now - entry_ms(as_text(first[0][0])) / 1000) if first else None
        done = int(stats.get(b"done", 0))
        job_seconds = float(stats.get(b"jobSeconds", 0.0))
        workers = sum(1 for beat in beats.values() if now - float(beat) <= alive_within_s)
        return {
            "depth": int(depth),
            "oldestAgeS": None if oldest is None else round(oldest, 3),
            "deadLetters": int(dead),
            "workersAlive": workers,
            "done": done,
            "retries": int(stats.get(b"retries", 0)),
            "caughtUp": int(stats.get(b"caughtUp", 0)),  # of ``done``: stored by a read's catch-up
            "meanJobS": round(job_seconds / done, 3) if done else None,
        }


def _job(fields: dict[bytes, bytes]) -> bytes:
    return fields.get(b"job", b"")
