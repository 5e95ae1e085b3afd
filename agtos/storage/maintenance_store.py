"""Lint reports and sweep bookkeeping in Redis (so restarts keep ``lastMaintenanceAt``/``totalSweeps``)."""

from __future__ import annotations

from typing import Any

import redis

from agtos.schemas import MaintenanceReport
from agtos.schemas.api import MaintenanceRun
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector, members

REPORTS_KEPT = 200
RUN_TTL_S = 7 * 86_400  # a requested run's status stays readable for a week


class MaintenanceStore:
    def __init__(self, connector: RedisConnector, keys: GlobalKeys) -> None:
        self.connector = connector
        self.keys = keys

    def _history(self, user_id: str) -> str:
        return self.keys.user(user_id).collection("lint", "reports")

    def save(self, report: MaintenanceReport) -> None:
        """Persist the report, trim old ones, bump the global sweep counters."""
        uk = self.keys.user(report.user_id)
        history = self._history(report.user_id)

        def op(r: redis.Redis) -> None:
            pipe = r.pipeline(transaction=True)
            pipe.set(uk.record("lintreport", str(report.timestamp)), report.model_dump_json())
            pipe.zadd(history, {str(report.timestamp): report.timestamp})
            pipe.execute()
            meta = r.pipeline(transaction=True)  # global keys: their own transaction (another slot)
            meta.hset(self.keys.meta("maintenance"), "lastMaintenanceAt", report.timestamp)
            meta.hincrby(self.keys.meta("maintenance"), "totalSweeps", 1)
            meta.execute()
            stale = members(r.zrange(history, 0, -REPORTS_KEPT - 1))
            if stale:
                r.delete(*[uk.record("lintreport", s) for s in stale])
                r.zrem(history, *stale)

        self.connector.run(op)

    def history(self, user_id: str, limit: int = 20) -> list[MaintenanceReport]:
        stamps = members(self.connector.run(lambda r: r.zrevrange(self._history(user_id), 0, limit - 1)))
        uk = self.keys.user(user_id)
        if not stamps:
            return []
        raws = self.connector.run(lambda r: r.mget([uk.record("lintreport", s) for s in stamps]))
        return [MaintenanceReport.model_validate_json(raw) for raw in raws if raw]

    def get(self, user_id: str, timestamp: int) -> MaintenanceReport | None:
        raw = self.connector.run(lambda r: r.get(self.keys.user(user_id).record("lintreport", str(timestamp))))
        return MaintenanceReport.model_validate_json(raw) if raw else None

    def status(self) -> dict[str, Any]:
        raw = self.connector.run(lambda r: r.hgetall(self.keys.meta("maintenance")))
        return {
            "lastMaintenanceAt": int(raw[b"lastMaintenanceAt"]) if b"lastMaintenanceAt" in raw else None,
            "totalSweeps": int(raw.get(b"totalSweeps", 0)),
        }

    def save_run(self, run: MaintenanceRun) -> None:
        """Write a requested run's current state (its status record expires after RUN_TTL_S)."""
        key = self.keys.user(run.user_id).record("lintrun", run.run_id)
        self.connector.run(lambda r: r.set(key, run.model_dump_json(), ex=RUN_TTL_S))

    def get_run(self, user_id: str, run_id: str) -> MaintenanceRun | None:
        raw = self.connector.run(lambda r: r.get(self.keys.user(user_id).record("lintrun", run_id)))
        return MaintenanceRun.model_validate_json(raw) if raw else None

    def mark_emitted(self, user_id: str, pair_key: str) -> bool:
        """True the first time a contradiction pair is reported (events fire once per pair)."""
        key = self.keys.user(user_id).collection("lint", "contradictions")
        return bool(self.connector.run(lambda r: r.sadd(key, pair_key)))
