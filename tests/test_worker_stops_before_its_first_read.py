"""A worker stopped before its first read leaves quietly: Ctrl-C of a fresh `make run` while the worker child still
loaded its models printed a 100-line traceback (`ResponseError: NOGROUP No such key '…:ingest-queue' or consumer
group 'ingest-workers'`): the stream and its group did not exist yet, and leaving asked the group for its pending."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import redis

from agtos.config import Settings
from agtos.memory.ingest_worker import IngestWorker, SessionJob
from agtos.storage.ingest_queue import GROUP, IngestQueue
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector


@pytest.fixture
def connector(settings: Settings) -> Iterator[RedisConnector]:
    conn = RedisConnector(settings.redis_url, settings.data_dir)
    yield conn
    conn.close()


def test_a_worker_stopped_before_the_queue_exists_stops_without_an_error(
    connector: RedisConnector, raw_redis: redis.Redis, key_prefix: str
) -> None:
    queue = IngestQueue(connector, GlobalKeys(key_prefix))
    assert not raw_redis.exists(queue.stream)  # a fresh install: no stream, no group
    stopped = threading.Event()
    stopped.set()  # SIGTERM while the models loaded
    IngestWorker(queue, lambda _job: None, consumer="early").run_forever(stopped)
    assert not raw_redis.hexists(queue.workers_key, "early")
    assert not raw_redis.exists(queue.stream)  # leaving creates nothing


def test_a_worker_that_ran_still_leaves_its_group(
    connector: RedisConnector, raw_redis: redis.Redis, key_prefix: str
) -> None:
    queue = IngestQueue(connector, GlobalKeys(key_prefix))
    queue.enqueue(SessionJob(user_id="wes", session_id="s1", segment="s1", turns=[]).model_dump_json().encode())
    worker = IngestWorker(queue, lambda _job: None, consumer="ran")
    assert worker.run_once(block=False) == 1  # the group exists, the consumer joined it and ran the job
    assert "ran" in {c["name"].decode() for c in raw_redis.xinfo_consumers(queue.stream, GROUP)}
    stopped = threading.Event()
    stopped.set()
    worker.run_forever(stopped)
    assert "ran" not in {c["name"].decode() for c in raw_redis.xinfo_consumers(queue.stream, GROUP)}


def test_leaving_raises_an_error_other_than_no_group(
    connector: RedisConnector, raw_redis: redis.Redis, key_prefix: str
) -> None:
    """Only Redis's NOGROUP is passed over: any other error of the group read still raises, here the queue's key
    holding a string (WRONGTYPE), which swallowing every ResponseError would hide (m1)."""
    queue = IngestQueue(connector, GlobalKeys(key_prefix))
    raw_redis.set(queue.stream, "not a stream")
    with pytest.raises(redis.ResponseError, match=r"^WRONGTYPE"):
        queue.leave("w1")
    assert raw_redis.get(queue.stream) == b"not a stream"
