"""Documented settings whose README promise no test watched through the public path (issue 20 item 3).

Re-audit of docs/settings_tests.md on 2026-12-07 (c3): every variable of the README and of
``agtos/config.py`` has a row there; the behaviour documented since the map was written is checked
here, each variable set in the environment and the app built as ``agtos serve`` builds it
(``create_app()`` reading ``Settings.from_env()``), through the fixtures of tests/test_env_settings.py.

* ``AGTOS_INGEST_CLAIM_IDLE_S`` (README, "Ingestion queue"): "a job left pending by a dead worker is
  taken over (``XAUTOCLAIM``) after ``AGTOS_INGEST_CLAIM_IDLE_S`` (120); a live worker re-claims the
  entries it works on every third of that (``XCLAIM … JUSTID``, no delivery counted), so a job longer
  than it … is not run again by another worker, nor dead-lettered for its deliveries".
  tests/test_large_session_end.py shows the hold with ``IngestWorker(claim_idle_s=1.0)`` built by hand;
  tests/test_readme_promises_limits.py the dead worker's job through the variable, with no live job.
"""

from __future__ import annotations

import time

import redis

from agtos.memory.ingest_worker import SessionJob
from agtos.storage.ingest_queue import GROUP
from tests import test_env_settings
from tests.test_env_settings import Serve
from tests.test_readme_promises_limits import QUEUE, coordinator_of, end_queued, episode_ids

env = test_env_settings.env  # fixtures: a clean environment, and apps built from it
serve = test_env_settings.serve


def test_ingest_claim_idle_s_paces_a_live_workers_hold(serve: Serve, raw_redis: redis.Redis) -> None:
    """With the variable at 1.5 s, one worker's job runs at least 5 s (over three claim idle times)
    while a second worker looks for stale entries every 50 ms (for 4.5 s more after a job of its own):
    the second takes over the job of a worker that died (pending past 1.5 s) and never the live
    worker's, which is delivered once and stored once.
    Bugs caught: the variable not read (the default 120 s: the dead worker's job is never taken
    over), a live worker's hold paced by another time than a third of it (its job taken over and run
    twice), a hold that counts a delivery."""
    with serve(**QUEUE, AGTOS_INGEST_CLAIM_IDLE_S="1.5") as client:
        coordinator = coordinator_of(client)
        dead_workers = end_queued(client, "gus")
        live_workers = end_queued(client, "hal")
        [taken] = coordinator.ingest_queue.read("dead-worker", 1, 0)  # gus's end, never acknowledged
        live, other = coordinator.ingest_worker(), coordinator.ingest_worker()
        ran: list[tuple[str, str]] = []
        stream = coordinator.ingest_queue.stream
        live_deliveries: list[int] = []

        run_other, run_live = other.handle, live.handle

        def other_handle(job: SessionJob) -> object:
            ran.append(("other", job.user_id))
            return run_other(job)

        def long_handle(job: SessionJob) -> object:
            ran.append(("live", job.user_id))
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline:
                if other.run_once(block=False):  # its first job loads the models: watch 4.5 s more after it
                    deadline = max(deadline, time.monotonic() + 4.5)
                time.sleep(0.05)
            pending = raw_redis.xpending_range(stream, GROUP, min="-", max="+", count=10, consumername=live.consumer)
            live_deliveries.extend(int(p["times_delivered"]) for p in pending)
            return run_live(job)

        other.handle, live.handle = other_handle, long_handle
        assert live.run_once(block=False) == 1  # hal's end, new: gus's is not 1.5 s idle yet
        assert taken.deliveries == 1
        assert ran == [("live", "hal"), ("other", "gus")]  # gus's taken over, hal's never
        assert live_deliveries == [1]  # held without a delivery counted
        assert episode_ids(client, "gus") == [dead_workers]
        assert episode_ids(client, "hal") == [live_workers]
        assert coordinator.ingest_queue.dead_letters() == []
        assert raw_redis.xlen(stream) == 0  # both acknowledged and deleted
