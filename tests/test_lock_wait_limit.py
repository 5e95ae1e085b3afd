"""A queued session end behind a user's lock that a live holder keeps: bounded, retried, stored once (issue 15, d4).

``AGTOS_LOCK_WAIT_MAX_S`` (README: a writer waiting for a user's lock gives up after it, and a queued job is handed
back and retried later, not counted towards the dead letters). Another process (played by the test) holds Ann's
``writers:memories`` and ``writers:entities`` locks with a long expiry (a live holder: waited on, never overtaken).
The app is built from the environment in queue mode with its worker driven here; ``AGTOS_INGEST_MAX_ATTEMPTS=1``,
so a give-up counted as a failed delivery would dead-letter the job at its next delivery.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.storage.user_lock import limit_waits
from tests import test_env_settings
from tests.helpers import user
from tests.test_env_settings import Serve
from tests.test_readme_promises_limits import QUEUE, coordinator_of, end_queued, episode_ids

env = test_env_settings.env  # fixtures: a clean environment, and apps built from it
serve = test_env_settings.serve

LIMITED = {
    **QUEUE,
    "AGTOS_LOCK_WAIT_MAX_S": "1",
    "AGTOS_INGEST_RETRY_DELAY_S": "0.2",
    "AGTOS_INGEST_MAX_ATTEMPTS": "1",
}


@pytest.fixture(autouse=True)
def _unlimited_after() -> Iterator[None]:
    """The limit is process-wide (set by the app's services): later tests of this process get none."""
    yield
    limit_waits(None)


def eventually(what: str, check: Callable[[], bool], within_s: float) -> None:
    """Poll ``check`` every 50 ms until it is true, failing with ``what`` after ``within_s``."""
    deadline = time.monotonic() + within_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def memory_texts(client: TestClient, who: str) -> list[str]:
    listed = client.get("/api/memory/memories", params={"limit": 100}, headers=user(who))
    assert listed.status_code == 200, listed.text
    return [m["text"] for m in listed.json()["memories"]]


def test_a_job_behind_a_live_holder_gives_up_is_retried_and_lands_once(
    serve: Serve, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """Ann's and Bob's ends are queued; another process holds Ann's writers' locks (PX 10 min). Within 40 s
    Bob's end is done and stored (the worker is not stuck behind Ann's lock); Ann's memories are not (her
    episode record, written before the lock, may be: every write is an upsert), her entry still queued, not
    dead-lettered, and the locks still the holder's. 3 s later (3 more give-ups of 1 s) the same. Once the
    holder releases, Ann's end is done within 40 s, stored once: one episode, her memories, none twice, queue
    and dead letters empty.
    Bugs caught: no limit (the worker waits behind Ann's lock, Bob's end never stored), the variable not read,
    a give-up counted as a failed delivery (Ann's end dead-lettered and never stored), overtaking the holder."""
    held = [f"{key_prefix}:u:{{ann}}:writers:{name}" for name in ("memories", "entities")]
    with serve(**LIMITED) as client:
        coordinator = coordinator_of(client)
        queue = coordinator.ingest_queue
        ann, bob = end_queued(client, "ann"), end_queued(client, "bob")
        for key in held:
            assert raw_redis.set(key, "other-process", nx=True, px=600_000)
        worker = coordinator.ingest_worker().start()
        try:
            eventually("Bob's end waited behind Ann's lock", lambda: raw_redis.xlen(queue.stream) <= 1, 40)
            assert episode_ids(client, "bob") == [bob] and memory_texts(client, "bob") != []
            for pause in (0.0, 3.0):
                time.sleep(pause)
                assert memory_texts(client, "ann") == []  # written under the held lock (the episode may be)
                assert raw_redis.xlen(queue.stream) == 1  # Ann's entry, handed back
                assert queue.dead_letters() == []
                assert [raw_redis.get(key) for key in held] == [b"other-process"] * 2
            raw_redis.delete(*held)
            eventually("Ann's end not done after the holder released", lambda: raw_redis.xlen(queue.stream) == 0, 40)
        finally:
            worker.stop()
        assert episode_ids(client, "ann") == [ann]
        texts = memory_texts(client, "ann")
        assert texts and len(texts) == len(set(texts)), texts
        assert queue.dead_letters() == []


def test_the_documented_default_is_ten_minutes(env: pytest.MonkeyPatch) -> None:
    """README: ``AGTOS_LOCK_WAIT_MAX_S`` defaults to 600 (s); the variable sets it."""
    assert Settings.from_env().lock_wait_max_s == 600.0
    env.setenv("AGTOS_LOCK_WAIT_MAX_S", "2.5")
    assert Settings.from_env().lock_wait_max_s == 2.5
