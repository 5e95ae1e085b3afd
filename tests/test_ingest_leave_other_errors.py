"""Leaving the ingest group passes over only Redis's NOGROUP (ff27281: a worker stopped before the stream and its
group exist): any other error of the group read still raises, here the queue's key holding a string (WRONGTYPE),
which swallowing every ResponseError would hide."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from agtos.config import Settings
from agtos.storage.ingest_queue import IngestQueue
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector


@pytest.fixture
def connector(settings: Settings) -> Iterator[RedisConnector]:
    conn = RedisConnector(settings.redis_url, settings.data_dir)
    yield conn
    conn.close()


def test_leaving_raises_an_error_other_than_no_group(
    connector: RedisConnector, raw_redis: redis.Redis, key_prefix: str
) -> None:
    queue = IngestQueue(connector, GlobalKeys(key_prefix))
    raw_redis.set(queue.stream, "not a stream")
    with pytest.raises(redis.ResponseError, match=r"^WRONGTYPE"):
        queue.leave("w1")
    assert raw_redis.get(queue.stream) == b"not a stream"
