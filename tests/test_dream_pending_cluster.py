"""The dream-pending mark on a real three-master Redis Cluster (issue 15, f1): there the episodes are written one
MULTI each after the opt-out check, and the mark goes in the last one's (the user's keys share a hash slot).
A worker killed right after the store leaves the user marked, as on one Redis (``test_dream_pending``)."""

from __future__ import annotations

from pathlib import Path

import redis

from agtos.config import Settings
from tests.redis_process import RedisClusterProcesses
from tests.test_dream_pending import killed_after_the_store


def test_a_worker_killed_right_after_the_store_leaves_the_user_marked_on_a_cluster(
    cluster: RedisClusterProcesses, tmp_path: Path
) -> None:
    settings = Settings(
        redis_url=cluster.url, key_prefix="f1dream", data_dir=tmp_path / "data", config_dir=tmp_path / "config"
    )
    raw = redis.RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port)
    try:
        killed_after_the_store(settings, raw)
    finally:
        raw.close()
